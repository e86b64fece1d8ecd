"""vLLM's API server: the structured-output validation each request goes through before the engine
sees it, timed per backend it resolved to, and the unbounded outlines step marked while it runs.

`SamplingParams._validate_structured_outputs` runs synchronously on the API server's event loop:
while it runs, the server answers nothing, structured or not. Under `auto`, a schema that xgrammar
refuses and that has `patternProperties` goes to outlines, whose validation builds outlines_core's
regex in this process with no time or memory bound (docs/probe.md#api-server). The wrapper costs a
clock read and an append; only a validation of wire.STALL_SECONDS or more keeps its spec, and only
the outlines step writes a marker (inflight.py).
"""

from __future__ import annotations

import json
import time
from typing import Any

from exporter.probe import patching
from exporter.probe.guard import Guard, Verdict
from exporter.probe.inflight import Markers
from exporter.probe.targets.common import ARMED
from exporter.probe.targets.vllm import PRODUCT_NAMES
from exporter.wire import STALL_SECONDS

_perf = time.perf_counter


class ArmedMarkers:
    """The armed process's marker folder (None: not armed here, or no folder)."""

    __slots__ = ("markers",)

    def __init__(self) -> None:
        self.markers: Markers | None = None


MARKERS = ArmedMarkers()


class ArmedGuard:
    """The armed API server's guard (None: GDX_GUARD off, or not armed here)."""

    __slots__ = ("guard",)

    def __init__(self) -> None:
        self.guard: Guard | None = None


GUARD = ArmedGuard()


def params_spec(params: Any) -> tuple[str, str]:
    """(kind, spec) of a request's StructuredOutputsParams, as vLLM's `get_structured_output_key`
    makes them (the engine's cache key, so the API server and the engine hash a schema alike)."""
    try:
        if params.json is not None:
            return "json", params.json if isinstance(params.json, str) else json.dumps(params.json)
        if getattr(params, "json_object", None):
            return "json_object", ""
        if params.regex is not None:
            return "regex", str(params.regex)
        if params.choice is not None:
            return "choice", params.choice if isinstance(params.choice, str) else json.dumps(params.choice)
        if params.grammar is not None:
            return "grammar", str(params.grammar)
        if getattr(params, "structural_tag", None) is not None:
            return "structural_tag", str(params.structural_tag)
    except Exception:
        pass
    return "other", ""


def _resolved(params: Any, failed: bool) -> str:
    backend = getattr(params, "_backend", None) if params is not None else None
    if failed:
        return "rejected"  # the request got a 400 (or the validation raised)
    return PRODUCT_NAMES.get(backend, backend) if isinstance(backend, str) and backend else "none"


def wrap_validate(original: Any) -> Any:
    refusal = getattr(original, "__globals__", {}).get("VLLMValidationError", ValueError)

    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        recorder = ARMED.recorder
        params = getattr(self, "structured_outputs", None)
        if recorder is None or params is None:
            return original(self, *args, **kwargs)
        guard = GUARD.guard
        if guard is not None and guard.screens:  # a compile_budget verdict lives: every path is screened
            message = screened(guard, recorder, params)
            if message:
                raise refusal(message)
        started = _perf()
        failed = True
        try:
            result = original(self, *args, **kwargs)
            failed = False
            return result
        finally:
            elapsed = _perf() - started
            try:
                backend = _resolved(params, failed)
                if elapsed >= STALL_SECONDS:
                    recorder.validated(backend, elapsed, *params_spec(params))
                else:
                    recorder.validated(backend, elapsed)
            except Exception:
                recorder.counters["internal_errors"] += 1

    return wrapper


def guarded(guard: Guard, recorder: Any, params: Any) -> str:
    """The refusal's message when the guard enforces a verdict on this request's schema (the outlines
    path: any verdict, the bounded run first for a new schema), else ""; counts what it did. Never
    raises: an internal error lets the request through, counted."""
    try:
        kind, spec = params_spec(params)
        if kind != "json":
            return ""
        runs = guard.runs
        schema_hash, verdict = guard.judge(kind, spec)
        recorder.counters["guard_validations"] += guard.runs - runs
        return _refusal(guard, recorder, schema_hash, verdict)
    except Exception:
        recorder.counters["guard_errors"] += 1
        return ""


def screened(guard: Guard, recorder: Any, params: Any) -> str:
    """The refusal's message when a request's schema, on any path, has a verdict that holds on every
    path (compile_budget), else ""; a request of another kind, or whose screen matches none, costs a
    key and a set lookup. Never raises."""
    try:
        spec = params.json
        if spec is None:
            return ""
        found = guard.screen(spec)
        return _refusal(guard, recorder, *found) if found is not None else ""
    except Exception:
        recorder.counters["guard_errors"] += 1
        return ""


def _refusal(guard: Guard, recorder: Any, schema_hash: str, verdict: Verdict | None) -> str:
    if verdict is None:
        return ""
    recorder.count_guarded(verdict.reason, "refused" if guard.enforcing else "would_refuse", schema_hash)
    return verdict.message(schema_hash) if guard.enforcing else ""


def wrap_outlines_validation(original: Any) -> Any:
    """vLLM's outlines validation, called only when the router sends a request to outlines: the guard
    first (guard.py), then the marker around vLLM's own step."""
    refusal = getattr(original, "__globals__", {}).get("VLLMValidationError", ValueError)

    def wrapper(sampling_params: Any, *args: Any, **kwargs: Any) -> Any:
        guard, recorder = GUARD.guard, ARMED.recorder
        if guard is not None and recorder is not None:
            message = guarded(guard, recorder, getattr(sampling_params, "structured_outputs", None))
            if message:
                raise refusal(message)
        markers = MARKERS.markers
        path = ""
        if markers is not None and ARMED.recorder is not None:
            try:
                path = markers.enter("outlines", *params_spec(sampling_params.structured_outputs))
            except Exception:
                path = ""
        try:
            return original(sampling_params, *args, **kwargs)
        finally:
            if path and markers is not None:
                markers.leave(path)

    return wrapper


def patch_vllm_sampling(module: Any) -> None:
    params = getattr(module, "SamplingParams", None)
    if params is not None and "_validate_structured_outputs" in params.__dict__:
        patching.wrap(params, "_validate_structured_outputs", wrap_validate, "SamplingParams")


def patch_vllm_outlines_validation(module: Any) -> None:
    name = "validate_structured_output_request_outlines"
    if hasattr(module, name):
        patching.wrap(module, name, wrap_outlines_validation, "backend_outlines")
