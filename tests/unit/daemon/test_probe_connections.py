"""What one connection may do to the daemon's probe listener (issue 47): real sockets on loopback and in
tmp dirs, the real listener and store, and the Kubernetes API at its HTTP boundary
(tools/harness/apiserver). Junk TCP connections get a small pool of their own and a 20 KiB auth line,
cost the API server few reviews, and cannot take a reviewed or unix-socket probe's slot; a connection
says hello once and cannot take another peer's engine; a silent connection is closed, a revoked or
expiring token's connection too."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

import exporter.daemon.receiver.listener as listener_module
from exporter.daemon.receiver.listener import ProbeListener
from exporter.daemon.receiver.store import ProbeStore
from exporter.daemon.receiver.tokenreview import ReviewSettings, TokenReviewer
from exporter.probe.shipper import encode
from tools.harness import free_port
from tools.harness.apiserver import BoundToken, FakeApiServer

AUDIENCE = "guided-decoding-exporter"
IDENTITY = {
    "pid": 1,
    "pod": "p",
    "engine": "0",
    "engine_kind": "generic",
    "engine_version": "",
    "backends": {},
    "probe_version": "0",
}


def hello(instance: str = "abc", **extra: object) -> bytes:
    return encode({"kind": "hello", **IDENTITY, "instance": instance, **extra})


def auth(token: str) -> bytes:
    return encode({"kind": "auth", "token": token})


def snapshot(seq: int) -> bytes:
    return encode({"kind": "snapshot", "seq": seq, "backends": {}})


async def until(check: Callable[[], bool], seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def closed_by_daemon(reader: asyncio.StreamReader, seconds: float = 5.0) -> bool:
    """Whether the daemon ends the connection within `seconds` (whatever it had sent before)."""
    try:
        async with asyncio.timeout(seconds):
            while await reader.read(1 << 16):
                pass
    except TimeoutError:
        return False
    except ConnectionError:
        pass
    return True


class Node:
    """A listener on a unix socket and on a loopback TCP port, its store, and the API server it asks."""

    def __init__(self, tmp: Path, **options: float) -> None:
        self.api = FakeApiServer()
        own = tmp / "daemon-token"
        own.write_text(self.api.daemon_token)
        self.port = free_port()
        self.path = str(tmp / "probe.sock")
        self.store = ProbeStore()
        self.reviewer = TokenReviewer(
            ReviewSettings(self.api.url, str(own), "", AUDIENCE, "node-a", timeout=3.0)
        )
        self.listener = ProbeListener(
            self.path,
            "",
            (),
            self.store,
            listen_address=f"127.0.0.1:{self.port}",
            reviewer=self.reviewer,
            **options,  # type: ignore[arg-type]
        )

    async def tcp(self, *lines: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        writer.write(b"".join(lines))
        await writer.drain()
        return reader, writer

    async def unix(self, *lines: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_unix_connection(self.path)
        writer.write(b"".join(lines))
        await writer.drain()
        return reader, writer


@pytest.fixture
async def make_node(tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[Node]]]:
    nodes: list[Node] = []

    async def make(**options: float) -> Node:
        where = tmp_path / f"node{len(nodes)}"
        where.mkdir()
        node = Node(where, **options)
        nodes.append(node)
        await node.listener.start()
        assert node.listener.not_listening() is None
        return node

    yield make
    for node in nodes:
        await node.listener.close()
        node.api.stop()


# ---- before the review (item 4) ---------------------------------------------------------------------


async def test_an_auth_line_over_20_kib_is_refused_at_once_and_never_reviewed(make_node) -> None:
    node = await make_node()
    reader, writer = await node.tcp(b'{"v":1,"kind":"auth","token":"' + b"x" * (64 * 1024))
    assert await closed_by_daemon(reader, 2.0)  # before, it read on up to 4 MiB, then waited 10 s
    writer.close()
    assert node.listener.refused["no_token"] == 1
    assert node.api.reviews == []


async def test_connections_awaiting_review_cannot_take_the_sockets_slots(
    make_node, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Junk TCP connections that never show a token fill their own small pool (the rest refused and
    counted), not the slots a real probe on the unix socket needs."""
    monkeypatch.setattr(listener_module, "MAX_CONNECTIONS", 4)
    monkeypatch.setattr(listener_module, "MAX_PENDING", 3, raising=False)
    node = await make_node()
    junk = [await node.tcp() for _ in range(8)]
    await until(lambda: node.listener.refused.get("pending_limit", 0) + node.listener.refused["limit"] >= 5)
    assert node.listener.refused.get("pending_limit") == 5 and node.listener.refused["limit"] == 0
    assert node.listener.connections == 0  # waiting for a review is not a connection yet
    probes = [await node.unix(hello(f"engine-{n}", engine=str(n))) for n in range(4)]
    await until(lambda: len(node.store.engines) == 4)
    assert node.listener.connections == 4 and node.listener.refused["limit"] == 0
    for _reader, writer in junk + probes:
        writer.close()


async def test_a_refused_token_is_reviewed_once_and_reviews_are_rate_limited(make_node) -> None:
    """The same junk token 30 times: one review (its refusal remembered by digest); 60 different
    ones: no more reviews than the burst allows, the rest refused as rate-limited."""
    node = await make_node()
    for _ in range(30):
        reader, writer = await node.tcp(auth("forged"))
        assert await closed_by_daemon(reader)
        writer.close()
    assert len(node.api.reviews) == 1
    assert node.listener.refused["token_rejected"] == 30
    for n in range(60):
        reader, writer = await node.tcp(auth(f"junk-{n}"))
        assert await closed_by_daemon(reader)
        writer.close()
    assert len(node.api.reviews) <= 1 + 20 + 5  # the burst, and what refilled meanwhile
    assert node.listener.refused["review_rate_limited"] >= 30
    assert "forged" not in repr(node.reviewer.refusals._entries)  # digests only


def test_one_tls_context_for_every_review(tmp_path: Path) -> None:
    reviewer = TokenReviewer(ReviewSettings("https://127.0.0.1:1", str(tmp_path / "t"), "", AUDIENCE, "n"))
    first = reviewer._ssl()
    assert first is reviewer._ssl()


# ---- one hello, one owner (items 3 and 12) ----------------------------------------------------------


async def test_a_second_hello_on_one_connection_is_refused_and_ends_it(make_node) -> None:
    node = await make_node()
    reader, writer = await node.unix(hello("first"), hello("made-up-1", engine="1"), hello("made-up-2"))
    assert await closed_by_daemon(reader)
    writer.close()
    assert node.listener.refused["second_hello"] == 1
    assert node.listener.counts["ok"] == 1 and node.listener.counts["rejected"] == 1
    assert [e.instance for e in node.store.engines.values()] == ["first"]


async def test_another_pods_hello_for_a_known_instance_is_refused_not_merged(make_node) -> None:
    node = await make_node()
    node.api.tokens["a"] = BoundToken("llm", "vllm-a")
    node.api.tokens["b"] = BoundToken("llm", "vllm-b", uid="6f1c2a90-0000-4000-8000-000000000002")
    _ra, wa = await node.tcp(auth("a"), hello("shared"))
    await until(lambda: len(node.store.engines) == 1)
    rb, wb = await node.tcp(auth("b"), hello("shared"))
    assert await closed_by_daemon(rb)
    assert node.listener.refused["instance_taken"] == 1
    (engine,) = node.store.engines.values()
    assert (engine.hello.pod, engine.connected) == ("vllm-a", True)
    # the same pod reconnecting with its instance is the same engine, as before
    wa.close()
    await until(lambda: not engine.connected)
    _rc, wc = await node.tcp(auth("a"), hello("shared"))
    await until(lambda: engine.connected)
    assert node.listener.refused["instance_taken"] == 1
    wb.close()
    wc.close()


# ---- after the review (items 4 and 12) --------------------------------------------------------------


async def test_a_silent_connection_is_closed_and_a_parked_one_that_sends_is_not(
    make_node, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(listener_module, "CHECK_EVERY", 0.05, raising=False)
    node = await make_node(apply_interval=0.1, idle_timeout=0.6)
    silent_reader, silent = await node.unix(hello("silent"))
    _r, busy = await node.unix(hello("busy", engine="1"))
    for seq in range(1, 13):  # 1.2 s of snapshots, the connection parked between passes
        busy.write(snapshot(seq))
        await busy.drain()
        await asyncio.sleep(0.1)
    assert await closed_by_daemon(silent_reader, 0.1)
    assert node.listener.refused["idle"] == 1
    assert node.listener.connections == 1
    assert [c.parked for c in node.listener._open] == [True]
    busy.close()
    silent.close()


def jwt(exp: float) -> str:
    part = base64.urlsafe_b64encode(json.dumps({"exp": int(exp)}).encode()).rstrip(b"=").decode()
    return f"eyJhbGciOiJSUzI1NiJ9.{part}.c2ln"


async def test_a_revoked_token_closes_its_connection_at_the_next_review(
    make_node, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(listener_module, "CHECK_EVERY", 0.05, raising=False)
    monkeypatch.setattr(listener_module, "REVIEW_EVERY", 0.5, raising=False)
    node = await make_node(apply_interval=0.1)
    node.api.tokens["good"] = BoundToken("llm", "vllm-0")
    reader, writer = await node.tcp(auth("good"), hello("x"))
    await until(lambda: node.listener.connections == 1)
    await asyncio.sleep(1.0)  # reviewed again, still good: kept
    assert len(node.api.reviews) >= 2 and node.listener.connections == 1
    del node.api.tokens["good"]  # the pod deleted: its bound token no longer authenticates
    assert await closed_by_daemon(reader, 3.0)
    writer.close()
    assert node.listener.refused["token_rejected"] == 1
    await until(lambda: node.listener.connections == 0)


async def test_a_connection_ends_before_its_token_expires(make_node, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listener_module, "CHECK_EVERY", 0.05, raising=False)
    monkeypatch.setattr(listener_module, "EXPIRY_MARGIN", 0.0, raising=False)
    node = await make_node()
    token = jwt(time.time() + 1.5)
    node.api.tokens[token] = BoundToken("llm", "vllm-0")
    reader, writer = await node.tcp(auth(token), hello("x"))
    await until(lambda: node.listener.connections == 1)
    assert await closed_by_daemon(reader, 4.0)
    writer.close()
    assert sum(node.listener.refused.values()) == 0  # not a refusal: the probe reconnects with its new one


# ---- the socket's path (item 6) ---------------------------------------------------------------------


@pytest.mark.parametrize("left", ["empty directory", "directory", "file", "socket", "symlink"])
async def test_whatever_an_engine_left_at_the_socket_path_is_cleared(
    tmp_path: Path, left: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "probe.sock"
    elsewhere = tmp_path / "target"
    elsewhere.write_text("keep")
    if left.endswith("directory"):
        path.mkdir()
        if left == "directory":
            (path / "inside").write_text("x")
    elif left == "file":
        path.write_text("x")
    elif left == "symlink":
        path.symlink_to(elsewhere)
    else:
        foreign = socket.socket(socket.AF_UNIX)
        foreign.bind(str(path))
        foreign.listen()
        if os.getuid() == 0:
            os.chown(path, 4242, -1)  # an engine's socket, not ours
    store = ProbeStore()
    listener = ProbeListener(str(path), "", (), store)
    await listener.start()
    try:
        assert listener.not_listening() is None
        _reader, writer = await asyncio.open_unix_connection(str(path))
        writer.write(hello())
        await writer.drain()
        await until(lambda: len(store.engines) == 1)
        writer.close()
        assert elsewhere.read_text() == "keep"  # a link is removed, never followed
        if left == "directory":
            assert (tmp_path / "probe.sock.displaced" / "inside").exists()
    finally:
        await listener.close()
        if left == "socket":
            foreign.close()


@pytest.mark.skipif(os.getuid() != 0, reason="giving the socket another owner needs root")
async def test_a_socket_given_another_owner_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "probe.sock"
    store = ProbeStore()
    listener = ProbeListener(str(path), "", (), store)
    await listener.start()
    try:
        os.chown(path, 4242, -1)
        assert listener.not_listening() is not None
        await listener._watch()
        assert os.lstat(path).st_uid == os.getuid() and listener.not_listening() is None
    finally:
        await listener.close()


def test_a_path_that_cannot_be_cleared_is_a_readiness_failure(tmp_path: Path) -> None:
    from exporter.daemon.receiver import socket_path

    path = tmp_path / "probe.sock"
    (path / "inside").mkdir(parents=True)
    (tmp_path / f"probe.sock{socket_path.DISPLACED}" / "full").mkdir(parents=True)  # the place aside, full

    async def run() -> str | None:
        listener = ProbeListener(str(path), "", (), ProbeStore())
        await listener.start()
        try:
            return listener.not_listening()
        finally:
            await listener.close()

    why = asyncio.run(run())
    assert why is not None and "cannot listen on probe socket" in why
