"""TLS and basic auth from an exporter-toolkit web configuration file, with a real TLS client
(certificates made by openssl) against the real daemon process."""

from __future__ import annotations

import base64
import shutil
import ssl
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import bcrypt
import pytest
import yaml

USER, PASSWORD = "prometheus", "s3cret-scrape"


def make_cert(tmp: Path) -> tuple[Path, Path]:
    openssl = shutil.which("openssl")
    assert openssl, "openssl is needed to make a test certificate"
    cert, key = tmp / "tls.crt", tmp / "tls.key"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


def get(url: str, context: ssl.SSLContext | None, auth: tuple[str, str] | None) -> tuple[int, str]:
    request = urllib.request.Request(url)
    if auth:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_tls_and_basic_auth(tmp_path: Path, daemon_factory: object) -> None:
    cert, key = make_cert(tmp_path)
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode().replace("$2b$", "$2y$", 1)
    config = tmp_path / "web.yml"
    config.write_text(yaml.safe_dump({
        "tls_server_config": {"cert_file": str(cert), "key_file": str(key), "min_version": "TLS12"},
        "basic_auth_users": {USER: hashed},
    }))  # fmt: skip
    daemon = daemon_factory("--web.config.file", str(config), "--no-collector.nvml")  # type: ignore[operator]
    assert daemon.url.startswith("https://127.0.0.1:")
    trusted = ssl.create_default_context(cafile=str(cert))
    status, body = get(daemon.url + "/metrics", trusted, (USER, PASSWORD))
    assert status == 200 and "guided_decoding_collector_success" in body
    assert get(daemon.url + "/metrics", trusted, (USER, PASSWORD))[0] == 200  # remembered: no bcrypt again
    assert get(daemon.url + "/metrics", trusted, None)[0] == 401
    assert get(daemon.url + "/schemas", trusted, (USER, "wrong"))[0] in (401, 404)
    assert get(daemon.url + "/", trusted, (USER, "wrong"))[0] == 401
    # kubelet probes carry no credentials: liveness and readiness answer without them
    assert get(daemon.url + "/healthz", trusted, None)[0] == 200
    assert get(daemon.url + "/readyz", trusted, None)[0] in (200, 503)
    assert get(daemon.url + "/metrics?x=/healthz", trusted, None)[0] == 401
    assert get(daemon.url + "/metrics", trusted, ("mallory", PASSWORD))[0] == 401
    with pytest.raises(urllib.error.URLError):  # the server's certificate is checked by the client
        get(daemon.url + "/metrics", ssl.create_default_context(), (USER, PASSWORD))
    with pytest.raises((urllib.error.URLError, ConnectionError)):  # plain HTTP to the TLS port
        get(daemon.url.replace("https://", "http://") + "/metrics", None, (USER, PASSWORD))


@pytest.mark.alone  # compares two paths' timing medians: wants the machine quiet
def test_an_unknown_user_name_answers_as_slowly_as_a_known_one(
    tmp_path: Path, daemon_factory: object
) -> None:
    """User enumeration by timing: a wrong password for a known user pays bcrypt (about 60 ms at cost
    10); an unknown name paid nothing (under 1 ms), 70x apart. Measured side by side, interleaved, so a
    busy machine slows both alike: the medians must agree within 3x."""
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=10)).decode()
    config = tmp_path / "web.yml"
    config.write_text(yaml.safe_dump({"basic_auth_users": {USER: hashed}}))
    daemon = daemon_factory("--web.config.file", str(config), "--no-collector.nvml")  # type: ignore[operator]
    url = daemon.url + "/metrics"
    assert get(url, None, (USER, PASSWORD))[0] == 200  # warm: connections, the first scrape

    def took(user: str) -> float:
        start = time.perf_counter()
        assert get(url, None, (user, "wrong"))[0] == 401
        return time.perf_counter() - start

    known, unknown = [], []
    for attempt in range(9):
        known.append(took(USER))
        unknown.append(took(f"mallory{attempt}"))
    ratio = statistics.median(known) / statistics.median(unknown)
    assert 1 / 3 < ratio < 3, (known, unknown)


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        (
            {"tls_server_config": {"cert_file": "/nonexistent.crt", "key_file": "/nonexistent.key"}},
            "cannot load cert_file",
        ),
        ({"basic_auth_users": {"a": "plaintext"}}, "not a bcrypt hash"),
        ({"tls_srever_config": {}}, "unknown keys"),
    ],
)
def test_a_bad_web_config_stops_before_anything_starts(
    tmp_path: Path, doc: dict[str, object], problem: str
) -> None:
    config = tmp_path / "web.yml"
    config.write_text(yaml.safe_dump(doc))
    out = subprocess.run(
        [sys.executable, "-m", "exporter", "serve", "--web.config.file", str(config)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2 and "web.config.file" in out.stderr and problem in out.stderr
