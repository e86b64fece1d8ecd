"""The analysis budget counts the analysing thread's CPU, not the wall: a `gdx lint` on a busy CI runner
(the suite's three workers on two cores) reported `too_complex` for a schema an idle machine analysed
in a third of its budget, and dropped that schema's other findings. Waiting (a descheduled thread,
here a sleep between steps) spends no budget; work does."""

from __future__ import annotations

import time

import pytest

from exporter.schema.walk import Budget, TooComplex, cpu_clock, walk

WIDE = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(2000)}}


def test_waiting_between_steps_spends_none_of_the_budget() -> None:
    budget = Budget(max_nodes=100_000, max_seconds=0.05)
    started = time.monotonic()
    visited = 0
    for _ in walk(WIDE, budget):
        visited += 1
        if visited % 200 == 0:
            time.sleep(0.01)  # 10 sleeps: 0.1 s of wall, twice the budget
    assert visited == 2001
    assert time.monotonic() - started > budget.max_seconds * 2


def test_work_between_steps_spends_it() -> None:
    budget = Budget(max_nodes=100_000, max_seconds=0.05)
    with pytest.raises(TooComplex, match="of CPU"):
        for _ in walk(WIDE, budget):
            spin = cpu_clock() + 0.001
            while cpu_clock() < spin:
                pass
