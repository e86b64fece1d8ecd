# ruff: noqa: E501  (answers read better on one line)
"""Who a TCP probe connection is: only what a TokenReview vouches for (pure parts), and the probe's
side of it: the address it dials and the auth line it sends first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from exporter.daemon.receiver.tokenreview import PodIdentity, Refused, check_node, identity_from_review
from exporter.probe.recorder import Recorder
from exporter.probe.settings import Address, parse_address
from exporter.probe.shipper import Shipper
from tools.harness.apiserver import BoundToken, review_answer

AUDIENCE = "guided-decoding-exporter"


def answer(bound: BoundToken | None, audiences: list[str] | None = None) -> dict[str, Any]:
    """The API's answer shape (tools/harness/apiserver), without a server."""
    tokens = {"t": bound} if bound is not None else {}
    return review_answer(tokens, {"spec": {"token": "t", "audiences": audiences or [AUDIENCE]}})


def test_a_pod_bound_token_names_the_pod_its_namespace_and_node() -> None:
    identity = identity_from_review(
        answer(BoundToken("llm", "vllm-0", node="node-a", service_account="sa")), AUDIENCE
    )
    assert identity == PodIdentity("llm", "vllm-0", "6f1c2a90-0000-4000-8000-000000000001", "node-a", "sa")


@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        ({"status": {"authenticated": False, "error": "invalid bearer token"}}, "token_rejected"),
        ({"status": {"user": {}, "error": "expired"}}, "token_rejected"),
        ({"status": {"authenticated": True, "audiences": ["other"], "user": {}}}, "token_rejected"),
        (
            {"status": {"authenticated": True, "audiences": [AUDIENCE], "user": {"username": "alice"}}},
            "not_a_pod",
        ),
        (
            {
                "status": {
                    "authenticated": True,
                    "audiences": [AUDIENCE],
                    "user": {"username": "system:serviceaccount:llm:default"},
                }
            },
            "not_a_pod",
        ),
        ({"kind": "Status", "code": 403}, "review_failed"),
        ([], "review_failed"),
    ],
)
def test_anything_else_is_refused_with_a_reason(doc: Any, reason: str) -> None:
    with pytest.raises(Refused) as err:
        identity_from_review(doc, AUDIENCE)
    assert err.value.reason == reason


@pytest.mark.parametrize("audiences", ["absent", None, AUDIENCE, {AUDIENCE: True}, 0])
def test_an_answer_that_does_not_list_our_audience_is_refused(audiences: Any) -> None:
    """Fail closed: an authenticated answer whose `audiences` is missing or not a list does not vouch
    for our audience, however pod-bound the rest of it looks."""
    doc = answer(BoundToken("llm", "vllm-0"))
    if audiences == "absent":
        del doc["status"]["audiences"]
    else:
        doc["status"]["audiences"] = audiences
    with pytest.raises(Refused, match="not for the audience") as err:
        identity_from_review(doc, AUDIENCE)
    assert err.value.reason == "token_rejected"


def test_the_apis_own_answers_for_bad_tokens_are_refused() -> None:
    for doc in (answer(None), answer(BoundToken("llm", "p", audiences=("https://kubernetes.default.svc",)))):
        with pytest.raises(Refused, match="did not accept"):
            identity_from_review(doc, AUDIENCE)
    with pytest.raises(Refused) as err:
        identity_from_review(answer(BoundToken("llm", "p", pod_bound=False)), AUDIENCE)
    assert err.value.reason == "not_a_pod"


def test_the_node_check_uses_the_review_else_the_node_pod_list() -> None:
    on_a = PodIdentity("llm", "p", "u", "node-a", "sa")
    check_node(on_a, "node-a", None)
    with pytest.raises(Refused, match="runs on node-a") as err:
        check_node(on_a, "node-b", None)
    assert err.value.reason == "other_node"
    with pytest.raises(Refused) as err:
        check_node(on_a, "", None)
    assert err.value.reason == "node_unknown"
    old = PodIdentity("llm", "p", "u", "", "sa")  # before Kubernetes 1.30: no node in the review
    check_node(old, "node-a", lambda: {("llm", "p")})
    with pytest.raises(Refused) as err:
        check_node(old, "node-a", lambda: {("llm", "q")})
    assert err.value.reason == "other_node"
    with pytest.raises(Refused) as err:
        check_node(old, "node-a", None)
    assert err.value.reason == "node_unknown"


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("tcp://guided-decoding-exporter-probe.guided-decoding.svc:9478",
         Address("tcp", host="guided-decoding-exporter-probe.guided-decoding.svc", port=9478)),
        ("tcp://10.0.0.7:9478", Address("tcp", host="10.0.0.7", port=9478)),
        ("tcp://[fd00::7]:9478", Address("tcp", host="fd00::7", port=9478)),
        ("unix:///run/guided-decoding-exporter/probe.sock", Address("unix", path="/run/guided-decoding-exporter/probe.sock")),
        ("unix:/tmp/p.sock", Address("unix", path="/tmp/p.sock")),
        ("/tmp/p.sock", Address("unix", path="/tmp/p.sock")),
    ],
)  # fmt: skip
def test_the_probe_reads_its_address(text: str, address: Address) -> None:
    assert parse_address(text) == address


@pytest.mark.parametrize(
    "text", ["tcp://host", "tcp://host:0", "tcp://:9478", "http://x:1", "", "tcp://$(GDX_HOST_IP):9478x"]
)
def test_a_bad_address_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_address(text)


def test_over_tcp_the_first_line_is_the_token_and_over_the_socket_there_is_none(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("eyJ.token\n")
    hello = {"pod": "p", "engine": "0", "engine_kind": "generic", "engine_version": "", "backends": {}}
    tcp = Shipper(Recorder(), "tcp://127.0.0.1:9", hello, token_file=str(token)).messages(fresh=True)
    assert json.loads(tcp[0]) == {"v": 1, "kind": "auth", "token": "eyJ.token"}
    assert json.loads(tcp[1])["kind"] == "hello"
    unix = Shipper(Recorder(), str(tmp_path / "s.sock"), hello, token_file=str(token)).messages(fresh=True)
    assert json.loads(unix[0])["kind"] == "hello" and all(b'"auth"' not in m for m in unix)
    later = Shipper(Recorder(), "tcp://127.0.0.1:9", hello, token_file=str(token)).messages(fresh=False)
    assert all(json.loads(m)["kind"] == "snapshot" for m in later)
    missing = Shipper(Recorder(), "tcp://127.0.0.1:9", hello, token_file=str(tmp_path / "none")).messages(
        fresh=True
    )
    assert json.loads(missing[0])["kind"] == "hello"  # the daemon refuses it as no_token, and counts it
