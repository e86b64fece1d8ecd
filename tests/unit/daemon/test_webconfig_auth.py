"""Basic auth over real HTTP (aiohttp's test server, a real socket): an unknown user name costs the
same bcrypt check as a known one, so timing does not tell which names exist; a password past bcrypt's
72 bytes is an answer, not an error; a malformed hash stops the daemon at start, not at each request."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bcrypt
import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from exporter.daemon import webconfig

USER, PASSWORD = "prometheus", "s3cret-scrape"
COST = 5  # not bcrypt's default (12): the dummy hash must take the users' cost, not the library's


def header(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


async def ok(_: web.Request) -> web.Response:
    return web.Response(text="ok\n")


async def client_for(users: dict[str, bytes]) -> TestClient[web.Request, web.Application]:
    app = web.Application(middlewares=[webconfig.basic_auth(users, frozenset({"/healthz"}))])
    app.router.add_get("/metrics", ok)
    app.router.add_get("/healthz", ok)
    client: TestClient[web.Request, web.Application] = TestClient(TestServer(app))
    await client.start_server()
    return client


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The hashes bcrypt.checkpw is called with (the real checkpw still answers)."""
    calls: list[bytes] = []
    real: Callable[[bytes, bytes], bool] = bcrypt.checkpw

    def spy(password: bytes, hashed: bytes) -> bool:
        calls.append(hashed)
        return real(password, hashed)

    monkeypatch.setattr(bcrypt, "checkpw", spy)
    return calls


async def test_an_unknown_user_pays_the_same_bcrypt_check_as_a_known_one(checked: list[bytes]) -> None:
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(COST))
    client = await client_for({USER: hashed, "grafana": bcrypt.hashpw(b"other", bcrypt.gensalt(4))})
    try:
        assert (await client.get("/metrics", headers=header(USER, "wrong"))).status == 401
        assert checked == [hashed]
        for stranger in ("mallory", "prometheu", "prometheus2", ""):
            assert (await client.get("/metrics", headers=header(stranger, PASSWORD))).status == 401
        unknown = checked[1:]
        assert len(unknown) == 4  # one bcrypt check per unknown name, as for a known one
        assert all(int(h[4:6]) == COST and h != hashed for h in unknown)  # $2b$05$...
        assert (await client.get("/metrics", headers=header(USER, PASSWORD))).status == 200
        assert (await client.get("/healthz")).status == 200
    finally:
        await client.close()


async def test_a_password_past_72_bytes_is_checked_as_bcrypt_reads_it(checked: list[bytes]) -> None:
    """bcrypt reads 72 bytes (htpasswd hashes a longer password's first 72); bcrypt 5 raises on more,
    which was a 500 and a traceback for any client sending one."""
    long = "p" * 72
    client = await client_for({USER: bcrypt.hashpw(long.encode(), bcrypt.gensalt(4))})
    try:
        assert (await client.get("/metrics", headers=header(USER, "x" * 200))).status == 401
        assert (await client.get("/metrics", headers=header("mallory", "x" * 200))).status == 401
        assert (await client.get("/metrics", headers=header(USER, long + "ignored"))).status == 200
        assert len(checked) == 3
    finally:
        await client.close()


@pytest.mark.parametrize(
    "hashed",
    ["$2y$10$short", "$2y$99$" + "a" * 53, "$2y$10$" + "a" * 52 + "!", "$2y$1$" + "a" * 54],
)
def test_a_malformed_bcrypt_hash_is_refused_when_the_file_is_read(tmp_path: Path, hashed: str) -> None:
    config = tmp_path / "web.yml"
    config.write_text(yaml.safe_dump({"basic_auth_users": {USER: hashed}}))
    with pytest.raises(ValueError, match="not a bcrypt hash"):
        webconfig.load(str(config))


def test_htpasswd_hashes_are_read(tmp_path: Path) -> None:
    config = tmp_path / "web.yml"
    made = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
    users: dict[str, Any] = {
        USER: made.replace("$2b$", "$2y$", 1),
        "b": made,
        "a": made.replace("$2b$", "$2a$"),
    }
    config.write_text(yaml.safe_dump({"basic_auth_users": users}))
    loaded = webconfig.load(str(config))
    assert sorted(loaded.users) == ["a", "b", USER] and loaded.users[USER] == made.encode()
