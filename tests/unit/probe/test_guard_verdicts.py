"""The guard's verdicts (exporter/probe/guard.py) and its settings: what is refused, for how long, how
many are kept, what a verdict file may hold; the bounded runs and vLLM's own validation are
tests/integration/test_guard.py's."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from exporter.probe.guard import Guard, GuardSettings, read_file
from exporter.probe.settings import guard_settings


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
