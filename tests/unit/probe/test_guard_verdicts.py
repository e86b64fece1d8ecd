"""The guard's verdicts (exporter/probe/guard.py) and its settings: what is refused, for how long, how
many are kept, what a verdict file may hold; the bounded runs and vLLM's own validation are
tests/integration/test_guard.py's."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from exporter.probe import guard as guard_module
from exporter.probe.guard import Guard, GuardSettings, read_file
from exporter.probe.settings import guard_settings
from exporter.schema.identity import identify, schema_hash


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_verdict_is_refused_until_it_expires_and_the_oldest_go_first() -> None:
    clock = Clock()
    guard = Guard(GuardSettings("enforce", verdict_seconds=60, max_verdicts=3), clock=clock)
    guard.add("aaaaaaaaaaaa", "server_crash", "death")
    clock.now += 59
    found = guard.verdict("aaaaaaaaaaaa")
    assert found is not None and found.reason == "server_crash"
    clock.now += 1
    assert guard.verdict("aaaaaaaaaaaa") is None and len(guard) == 0  # a fixed engine is not refused forever
    for name in ("b", "c", "d", "e"):
        guard.add(name * 12, "server_stall", "bounded")
    assert len(guard) == 3 and guard.verdict("b" * 12) is None and guard.verdict("e" * 12) is not None


def test_the_refusal_names_the_reason_the_schema_and_the_fix() -> None:
    guard = Guard(GuardSettings("enforce"))
    guard.add("0123456789ab", "server_stall", "bounded", "ran past 1 s")
    verdict = guard.verdict("0123456789ab")
    assert verdict is not None
    message = verdict.message("0123456789ab")
    assert (
        "schema 0123456789ab refused (server_stall: its validation, run bounded first, ran past 1 s)"
        in message
    )
    assert '"backend": "xgrammar"' in message and "gdx fix" in message


def test_a_verdict_file_gives_only_well_formed_verdicts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "guard.json"
    path.write_text(json.dumps({"verdicts": [
        {"schema_hash": "0123456789ab", "reason": "server_crash", "detail": "lint"},
        {"schema_hash": "../../etc/pwd", "reason": "server_crash"},  # not a hash
        {"schema_hash": "0123456789ac", "reason": "too_slow"},  # not a reason the guard refuses for
        "0123456789ad",
    ]}))  # fmt: skip
    guard = Guard(GuardSettings("enforce"))
    assert guard.load(read_file(str(path)), "lint") == 1 and len(guard) == 1
    with caplog.at_level(logging.WARNING, "gdx.probe"):
        assert read_file(str(tmp_path / "missing.json")) == []
        (tmp_path / "bad.json").write_text('{"verdicts": 3}')
        assert read_file(str(tmp_path / "bad.json")) == []
    assert "missing.json not loaded" in caplog.text and "no list of verdicts" in caplog.text


def test_the_settings_default_to_off_and_a_bad_value_keeps_its_default(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for name in ("GDX_GUARD", "GDX_GUARD_MEMORY", "GDX_GUARD_TIMEOUT", "GDX_GUARD_FILE"):
        monkeypatch.delenv(name, raising=False)
    assert guard_settings() == GuardSettings()
    monkeypatch.setenv("GDX_GUARD", "Enforce")
    monkeypatch.setenv("GDX_GUARD_MEMORY", "512MiB")
    monkeypatch.setenv("GDX_GUARD_TIMEOUT", "250ms")
    monkeypatch.setenv("GDX_GUARD_FILE", "/etc/gdx/guard.json")
    found = guard_settings()
    assert (found.mode, found.memory_bytes, found.timeout, found.verdict_file) == (
        "enforce", 512 << 20, 0.25, "/etc/gdx/guard.json"
    )  # fmt: skip
    monkeypatch.setenv("GDX_GUARD", "refuse")
    monkeypatch.setenv("GDX_GUARD_TIMEOUT", "soon")
    with caplog.at_level(logging.WARNING, "gdx.probe"):
        found = guard_settings()
    assert found.mode == "off" and found.timeout == 1.0
    assert "GDX_GUARD='refuse' is not one of" in caplog.text and "GDX_GUARD_TIMEOUT" in caplog.text


# ---- compile_budget: a verdict that holds on every path, screened before it is hashed ----------------

SLOW = {"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}


def budget_guard(clock: Clock | None = None, **settings: float) -> tuple[Guard, str]:
    """A guard holding the node's compile_budget verdict for SLOW, as the daemon sends it."""
    guard = Guard(GuardSettings("enforce", **settings), clock=clock or Clock())  # type: ignore[arg-type]
    text = json.dumps(SLOW)  # what the engine compiled: vLLM's key for the request's object
    found = identify("json", text)
    line = {"schema_hash": found.schema_hash, "reason": "compile_budget", "detail": "compiled in 9.0 s",
            "screens": [list(s) for s in found.screens]}  # fmt: skip
    assert guard.load([line], "daemon") == 1
    return guard, found.schema_hash


def test_a_compile_budget_verdict_is_found_on_any_request_form_and_only_its_screens_are_hashed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hashed: list[object] = []
    real = guard_module.schema_hash
    monkeypatch.setattr(guard_module, "schema_hash", lambda *a: hashed.append(a) or real(*a))
    guard, wanted = budget_guard()
    assert guard.screens  # the API server's wrapper screens every structured request now
    as_object = json.loads(json.dumps(SLOW))
    as_string = json.dumps(SLOW)
    for spec in (as_object, as_string):
        found = guard.screen(spec)
        assert found is not None and found[0] == wanted and found[1].reason == "compile_budget"
    assert len(hashed) == 2
    other = {"type": "object", "properties": {"b": {"type": "string"}, "c": {"type": "string"}}}
    assert guard.screen(other) is None and guard.screen(json.dumps(other)) is None
    assert len(hashed) == 2  # other key counts, another length: not hashed
    same_keys = {"type": "object", "properties": {"z": {"type": "boolean"}}}
    assert guard.screen(same_keys) is None and len(hashed) == 3  # a screen is no proof: hashed, not refused
    verdict = guard.screen(as_object)
    assert verdict is not None
    message = verdict[1].message(wanted)
    assert f"schema {wanted} refused (compile_budget: compiled in 9.0 s)" in message and "gdx fix" in message


def test_crash_and_stall_verdicts_hold_on_the_outlines_path_only() -> None:
    guard = Guard(GuardSettings("enforce"))
    guard.add(schema_hash(json.dumps(SLOW)), "server_crash", "death")
    assert not guard.screens and guard.screen(SLOW) is None


def test_a_verdict_without_screens_has_every_request_hashed() -> None:
    guard = Guard(GuardSettings("enforce"))
    wanted = schema_hash(json.dumps(SLOW))
    guard.load([{"schema_hash": wanted, "reason": "compile_budget", "screens": "not a list"}], "daemon")
    assert guard.screen({"type": "string"}) is None
    found = guard.screen({"properties": SLOW["properties"], "type": "object"})
    assert found is not None and found[0] == wanted


def test_screens_go_with_their_verdicts_expired_or_pushed_out() -> None:
    clock = Clock()
    guard, _ = budget_guard(clock, verdict_seconds=60, max_verdicts=2)
    clock.now += 61
    assert guard.screen({"type": "string"}) is None  # not the expired schema: its screens go all the same
    assert not guard.screens
    guard, _ = budget_guard(clock, verdict_seconds=60, max_verdicts=2)
    guard.add("b" * 12, "server_crash", "death")
    guard.add("c" * 12, "server_crash", "death")
    assert not guard.screens and guard.screen(SLOW) is None
