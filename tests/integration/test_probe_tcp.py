"""Probes over TCP (the node-local Service and hostIP transports): a real daemon process on a loopback
port, real probes, and the Kubernetes API at its HTTP boundary (tools/harness/apiserver: no API server
can run here, so TokenReview answers are shaped from the API reference, not recorded). The daemon
takes a connection only after a TokenReview vouches for its token, names the pod as the review does,
refuses every other connection and counts it by reason; bad input over TCP is handled as on the socket."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporter.probe.recorder import Recorder
from exporter.probe.shipper import Shipper, encode
from tools.harness import free_port
from tools.harness.apiserver import BoundToken, FakeApiServer
from tools.harness.processes import DaemonProcess
from tools.harness.scraping import sample, scrape, wait_for

IDENTITY = {
    "engine": "0",
    "engine_kind": "generic",
    "engine_version": "",
    "backends": {},
    "probe_version": "0",
}


class Node:
    """A daemon on node-a listening for probes on TCP, and the API server it asks."""

    def __init__(self, tmp: Path, *extra: str) -> None:
        self.api = FakeApiServer()
        own = tmp / "daemon-token"
        own.write_text(self.api.daemon_token)
        self.port = free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.tmp = tmp
        self.daemon = DaemonProcess(
            [
                "--no-collector.nvml", "--no-collector.vllm", "--probe.socket", "",
                "--probe.listen-address", f"127.0.0.1:{self.port}",
                "--kubernetes.api-server", self.api.url, "--kubernetes.token-file", str(own),
                "--kubernetes.ca-file", "", "--kubernetes.node-name", "node-a", *extra,
            ]
        )  # fmt: skip

    def token(self, name: str, bound: BoundToken) -> Path:
        self.api.tokens[name] = bound
        path = self.tmp / f"token-{name}"
        path.write_text(name + "\n")
        return path

    def refused(self, reason: str) -> float:
        return sample(
            scrape(self.daemon.url), "guided_decoding_probe_connections_refused_total", reason=reason
        )

    def stop(self) -> None:
        self.daemon.stop()
        self.api.stop()


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    where = Node(tmp_path)
    try:
        yield where
    finally:
        where.stop()


def ship(node: Node, token_file: Path | str, pod: str, compiles: int = 3) -> Shipper:
    rec = Recorder()
    for i in range(compiles):
        rec.finish(rec.begin("xgrammar"), "xgrammar", "json", f'{{"title":"t{i}"}}', 0.01, False)
    shipper = Shipper(rec, node.address, {**IDENTITY, "pod": pod}, 0.1, token_file=str(token_file))
    return shipper


def send_lines(node: Node, lines: list[bytes]) -> None:
    with socket.create_connection(("127.0.0.1", node.port), timeout=5) as sock:
        for line in lines:
            sock.sendall(line)
        time.sleep(0.2)


def test_a_reviewed_probe_is_named_by_its_review_not_its_hello(node: Node) -> None:
    token = node.token("good", BoundToken(namespace="llm", pod="vllm-0"))
    shipper = ship(node, token, pod="a-name-it-made-up")
    for _ in range(3):
        shipper.tick()
        time.sleep(0.1)
    wait_for(
        lambda: sample(scrape(node.daemon.url), "guided_decoding_compile_requests_total", pod="vllm-0") == 3
    )
    m = scrape(node.daemon.url)
    assert sample(m, "guided_decoding_compile_requests_total", pod="a-name-it-made-up") == 0
    assert sample(m, "guided_decoding_probe_info", pod="vllm-0", namespace="llm") == 1
    assert sum(sample(m, "guided_decoding_probe_connections_refused_total", reason=r) for r in ("no_token",
               "token_rejected", "not_a_pod", "other_node", "review_failed")) == 0  # fmt: skip
    review = node.api.reviews[0]
    assert review["spec"] == {"token": "good", "audiences": ["guided-decoding-exporter"]}
    assert len(node.api.reviews) == 1  # once per connection, not per message
    shipper.stop()


@pytest.mark.parametrize(
    ("bound", "reason"),
    [
        (None, "token_rejected"),  # a token the API server does not know
        (BoundToken("llm", "vllm-0", audiences=("https://kubernetes.default.svc",)), "token_rejected"),
        (BoundToken("llm", "vllm-0", pod_bound=False), "not_a_pod"),  # a long-lived secret token
        (BoundToken("llm", "vllm-0", node="node-b"), "other_node"),
    ],
    ids=["unknown", "other-audience", "not-pod-bound", "other-node"],
)
def test_a_token_the_review_does_not_vouch_for_is_refused_and_counted(
    node: Node, bound: BoundToken | None, reason: str
) -> None:
    token = node.token("t", bound) if bound is not None else node.tmp / "unknown"
    if bound is None:
        token.write_text("forged")
    shipper = ship(node, token, pod="vllm-0")
    shipper.tick()
    wait_for(lambda: node.refused(reason) == 1)
    shipper.tick()  # the daemon closed it: the probe backs off instead of hammering the API server
    time.sleep(0.3)
    shipper.tick()
    m = scrape(node.daemon.url)
    assert sample(m, "guided_decoding_compile_requests_total", pod="vllm-0") == 0
    assert sample(m, "guided_decoding_probe_connections_refused_total", reason=reason) <= 2
    assert f"refused a probe connection over TCP ({reason})" in node.daemon.log
    shipper.stop()


def test_no_token_at_all_is_refused(node: Node, tmp_path: Path) -> None:
    shipper = ship(node, tmp_path / "absent", pod="vllm-0")
    shipper.tick()
    wait_for(lambda: node.refused("no_token") == 1)
    send_lines(node, [encode({"kind": "hello", **IDENTITY, "instance": "x", "pid": 1, "pod": "p"})])
    wait_for(lambda: node.refused("no_token") == 2)
    assert node.api.reviews == []  # nothing to review
    shipper.stop()


def test_an_api_server_that_cannot_be_asked_refuses_and_says_so(tmp_path: Path) -> None:
    where = Node(tmp_path)
    token = where.token("good", BoundToken("llm", "vllm-0"))
    where.api.stop()  # the daemon's API server is gone
    try:
        shipper = ship(where, token, pod="vllm-0")
        shipper.tick()
        wait_for(lambda: where.refused("review_failed") == 1)
        assert "TokenReview:" in where.daemon.log
        shipper.stop()
    finally:
        where.daemon.stop()


lines = st.one_of(
    st.binary(max_size=200).map(lambda b: b.replace(b"\n", b"") + b"\n"),
    st.dictionaries(
        st.sampled_from(["v", "kind", "instance", "pid", "pod", "engine", "schemas", "seq", "token"]),
        st.one_of(
            st.none(), st.integers(), st.text(max_size=8), st.sampled_from(["hello", "snapshot", "auth"])
        ),
        max_size=6,
    ).map(lambda d: json.dumps(d).encode() + b"\n"),
)


@pytest.mark.slow
def test_hostile_lines_over_an_authenticated_connection(node: Node) -> None:
    """The wire fuzz over TCP: after a good auth line, generated lines; the daemon counts every one
    and stays up."""
    node.token("good", BoundToken(namespace="llm", pod="vllm-0"))
    sent = 0

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(st.lists(lines, min_size=1, max_size=8))
    def run(batch: list[bytes]) -> None:
        nonlocal sent
        send_lines(node, [encode({"kind": "auth", "token": "good"}), *batch])
        sent += len(batch)

    run()
    m = scrape(node.daemon.url)
    counted = sum(sample(m, "guided_decoding_probe_snapshots_total", result=r) for r in
                  ("ok", "malformed", "oversize", "rejected"))  # fmt: skip
    assert counted == sent and node.daemon.proc.poll() is None
