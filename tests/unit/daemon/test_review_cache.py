"""A probe reconnecting with its valid token costs the API server one review a minute, not one per
connection (the review rate limit is 5 a second), and a token the API server stops vouching for is
never vouched for from that memory. Real sockets, the real listener and reviewer, the Kubernetes API
at its HTTP boundary (tools/harness/apiserver)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import exporter.daemon.receiver.listener as listener_module
from exporter.daemon.receiver.review_limits import AcceptedCache, token_key
from tests.unit.daemon.test_probe_connections import Node, auth, closed_by_daemon, hello, jwt, until
from tools.harness.apiserver import BoundToken


@pytest.fixture
async def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Node]:
    monkeypatch.setattr(listener_module, "CHECK_EVERY", 0.05)
    monkeypatch.setattr(listener_module, "REVIEW_EVERY", 0.5)
    made = Node(tmp_path)
    await made.listener.start()
    yield made
    await made.listener.close()
    made.api.stop()


async def connect_and_leave(node: Node, token: str, instance: str) -> None:
    reader, writer = await node.tcp(auth(token), hello(instance))
    served = node.listener.counts["ok"]
    await until(lambda: node.listener.counts["ok"] > served)  # reviewed and its hello taken
    writer.close()
    await until(lambda: node.listener.connections == 0)
    del reader


async def test_reconnects_with_one_token_cost_one_review(node: Node) -> None:
    node.api.tokens["good"] = BoundToken("llm", "vllm-0")
    for n in range(40):  # past the burst of 20 reviews: before, the 21st to 40th were refused
        await connect_and_leave(node, "good", f"engine-{n % 4}")
    assert len(node.api.reviews) == 1
    assert sum(node.listener.refused.values()) == 0 and node.listener.counts["ok"] == 40
    assert "good" not in repr(node.reviewer.accepted._entries)  # digests only


async def test_a_token_is_remembered_no_closer_to_its_expiry_than_the_margin(node: Node) -> None:
    node.reviewer.accepted = AcceptedCache(margin=1.0)
    token = jwt(time.time() + 2.5)  # remembered for about 1.5 s, not 60
    node.api.tokens[token] = BoundToken("llm", "vllm-0")
    await connect_and_leave(node, token, "a")
    await connect_and_leave(node, token, "a")
    assert len(node.api.reviews) == 1
    await asyncio.sleep(1.6)
    await connect_and_leave(node, token, "a")
    assert len(node.api.reviews) == 2


async def test_a_revoked_tokens_memory_does_not_outlive_a_failed_re_review(node: Node) -> None:
    """Two connections with one token (one review); the token revoked: the next re-review asks the API
    server (not the memory, still within its minute), closes both, and a new connection is refused."""
    node.api.tokens["good"] = BoundToken("llm", "vllm-0")
    first, w1 = await node.tcp(auth("good"), hello("a"))
    second, w2 = await node.tcp(auth("good"), hello("b", engine="1"))
    await until(lambda: node.listener.connections == 2)
    assert len(node.api.reviews) == 1
    del node.api.tokens["good"]
    assert await closed_by_daemon(first, 3.0) and await closed_by_daemon(second, 3.0)
    assert token_key("good") not in node.reviewer.accepted
    third, w3 = await node.tcp(auth("good"), hello("c", engine="2"))
    assert await closed_by_daemon(third, 3.0)
    assert node.listener.refused["token_rejected"] == 3
    assert token_key("good") not in node.reviewer.accepted
    for writer in (w1, w2, w3):
        writer.close()
