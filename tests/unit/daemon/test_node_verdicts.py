"""The node's verdicts the daemon sends to the guards: a death is server_crash, a validation of a
second or more on average server_stall, with a compile budget a compile that long on average
compile_budget (sent with its screens), nothing else; a verdict is not demoted; bounded, aged, and the
version moves only on a change. The store observes them from snapshots as they arrive."""

from __future__ import annotations

import json

from exporter.daemon.receiver.store import ProbeStore
from exporter.daemon.receiver.verdicts import NodeVerdicts
from exporter.schema.identity import identify
from tests.support.probelink import Link


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


def test_compiles_past_the_budget_are_verdicts_only_with_a_budget() -> None:
    off = NodeVerdicts()
    off.observe_compiles("a" * 12, compiles=1, seconds=60.0, screens=((2, 1),), now=0)
    assert sent(off, 1) == {}
    node = NodeVerdicts(compile_budget=2.0)
    node.observe_compiles("a" * 12, compiles=2, seconds=5.0, screens=((-1, 80), (2, 1)), now=0)  # 2.5 s each
    node.observe_compiles("b" * 12, compiles=3, seconds=5.0, screens=(), now=0)  # 1.7 s each: under
    node.observe("c" * 12, deaths=1, stalls=0, stall_seconds=0.0, now=0)
    node.observe_compiles("c" * 12, compiles=1, seconds=9.0, screens=(), now=0)  # a crash stays a crash
    assert sent(node, 1) == {"a" * 12: "compile_budget", "c" * 12: "server_crash"}
    line = {v["schema_hash"]: v for v in json.loads(node.line(1))["verdicts"]}
    assert line["a" * 12]["screens"] == [[-1, 80], [2, 1]]
    assert (
        "compiled in 2.5 s on an engine of this node, over the node's --guard.compile-budget of 2 s"
        in (line["a" * 12]["detail"])
    )
    node.observe("a" * 12, deaths=0, stalls=1, stall_seconds=3.0, now=2)  # a stall outranks a slow compile
    assert sent(node, 3)["a" * 12] == "server_stall"


def test_the_store_takes_an_engines_slow_compiles_as_they_arrive() -> None:
    store = ProbeStore(compile_budget=1.0)
    link = Link(store)
    slow, quick = '{"type": "object", "properties": {"x": {}}}', '{"type": "string"}'
    link.compile(slow, 1.5)
    link.compile(slow, 0.0001, hit=True)  # hits are no compiles: 1.5 s per compile still
    link.compile(quick, 0.2)
    link.ship(fresh=True)  # no scrape, no settle: the verdict is there on arrival
    doc = json.loads(store.verdicts.line(link.now))
    assert [(v["schema_hash"], v["reason"]) for v in doc["verdicts"]] == [
        (identify("json", slow).schema_hash, "compile_budget")
    ]
    assert doc["verdicts"][0]["screens"] == [list(s) for s in identify("json", slow).screens]
    unbudgeted = ProbeStore()
    other = Link(unbudgeted)
    other.compile(slow, 30.0)
    other.ship(fresh=True)
    assert json.loads(unbudgeted.verdicts.line(other.now))["verdicts"] == []
