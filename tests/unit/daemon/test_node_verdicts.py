"""The node's verdicts the daemon sends to the API servers' guards: a death is server_crash, a
validation of a second or more on average server_stall, nothing else; a crash is not demoted;
bounded, aged, and the version moves only on a change."""

from __future__ import annotations

import json

from exporter.daemon.receiver.verdicts import NodeVerdicts


def sent(verdicts: NodeVerdicts, now: float) -> dict[str, str]:
    doc = json.loads(verdicts.line(now))
    assert doc["kind"] == "verdicts" and doc["v"] == 1
    return {v["schema_hash"]: v["reason"] for v in doc["verdicts"]}


def test_deaths_and_long_validations_are_verdicts_and_nothing_else_is() -> None:
    node = NodeVerdicts()
    node.observe("a" * 12, deaths=1, stalls=0, stall_seconds=0.0, now=0)
    node.observe("b" * 12, deaths=0, stalls=2, stall_seconds=2.6, now=0)  # 1.3 s each
    node.observe("c" * 12, deaths=0, stalls=3, stall_seconds=0.9, now=0)  # 0.3 s each: under the bound
    node.observe("d" * 12, deaths=0, stalls=0, stall_seconds=0.0, now=0)  # refused or misrouted only
    assert sent(node, 1) == {"a" * 12: "server_crash", "b" * 12: "server_stall"}
    version = node.version
    node.observe("a" * 12, deaths=0, stalls=1, stall_seconds=5.0, now=2)  # a crash stays a crash
    node.observe("b" * 12, deaths=0, stalls=1, stall_seconds=1.5, now=2)  # the same verdict again
    assert node.version == version and sent(node, 3)["a" * 12] == "server_crash"


def test_bounded_and_aged() -> None:
    node = NodeVerdicts(max_verdicts=2, max_age=100)
    for i, name in enumerate("xyz"):
        node.observe(name * 12, deaths=1, stalls=0, stall_seconds=0.0, now=i)
    assert sent(node, 10) == {"y" * 12: "server_crash", "z" * 12: "server_crash"}
    version = node.version
    assert sent(node, 101.5) == {"z" * 12: "server_crash"} and node.version > version  # y aged out
