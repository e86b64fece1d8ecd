"""vLLM: `StructuredOutputManager._create_grammar` (`_async_create_grammar` in older releases) is the
compile; `grammar_init` marks when a request's grammar was submitted (grammar wait = submitted to
ready, queueing in the compile pool included) and is where a request meets its engine's backend;
`grammar_bitmask` is the per-step mask fill.

Routing: the API server resolves each request's backend (`structured_outputs._backend`, and
`_backend_was_auto` under `auto`); an EngineCore builds one backend, for its first structured request.
At `grammar_init` the probe compares the two: vLLM 0.33 raises there for a request resolved elsewhere
(rejected), 0.32 compiles it with the engine's backend anyway (other_backend). Outlines keeps its
indexes in an LRU cache: a compile that built none (`compile_regex_with_timeout` not called) is a hit.

It knows the request's kind and spec and covers every backend, so the library calls under it are not
wrapped in vLLM: its regex compiles run on a second thread (`compile_regex_with_timeout`), where a
nested wrapper could not tell it is nested and would count twice.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from exporter.probe import patching
from exporter.probe.recorder import MASK, MAX_PENDING, Recorder
from exporter.probe.targets.cache_hits import cache_generation, cache_unchanged
from exporter.probe.targets.common import ARMED, error_reason, log, spec_text
from exporter.probe.targets.llguidance import grammar_warnings

_perf = time.perf_counter
BACKENDS = {
    "XgrammarBackend": "xgrammar",
    "GuidanceBackend": "llguidance",
    "OutlinesBackend": "outlines",
    "LMFormatEnforcerBackend": "lm-format-enforcer",
}
REQUEST_KINDS = {
    "JSON": "json",
    "JSON_OBJECT": "json_object",
    "REGEX": "regex",
    "GRAMMAR": "grammar",
    "CHOICE": "choice",
    "STRUCTURAL_TAG": "structural_tag",
}
# vLLM's names for its backends where the product's differ (the `backend` label says llguidance).
PRODUCT_NAMES = {"guidance": "llguidance"}
# When each request's grammar was submitted (grammar_init), by id(request); popped when it is ready.
_submitted: dict[int, float] = {}
SUBMITTED_LIMIT = 100_000


def vllm_backend_name(manager: Any) -> str:
    """The backend label of a StructuredOutputManager (resolved off the engine's step for masks)."""
    backend = getattr(manager, "backend", None)
    name = type(backend).__name__
    return BACKENDS.get(name, name.removesuffix("Backend").lower() or "unknown")


def engine_backend(manager: Any) -> str:
    """The backend an engine uses, in the product's names; "" before its first structured request.
    vLLM 0.33 keeps its name (`backend_name`); older releases only the backend object."""
    state = manager.__dict__
    name = state.get("backend_name")
    if isinstance(name, str):
        return PRODUCT_NAMES.get(name, name)
    return "" if state.get("backend") is None else vllm_backend_name(manager)


def resolved_backend(request: Any) -> tuple[str, str]:
    """(asked for, resolved to) of a request, in the product's names: "auto" asked when the router
    chose; ("", "") when the request does not say (a release without the fields)."""
    try:
        params = request.sampling_params.structured_outputs
        resolved = params._backend
        auto = params._backend_was_auto
    except Exception:
        return "", ""
    if not isinstance(resolved, str):
        return "", ""
    resolved = PRODUCT_NAMES.get(resolved, resolved)
    return ("auto" if auto is True else resolved), resolved


def request_spec(request: Any) -> tuple[str, str]:
    """(kind, spec) of a vLLM request: its `structured_output_key`, vLLM's own cache key."""
    try:
        request_type, spec = request.structured_output_request.structured_output_key
    except Exception:
        return "other", ""
    name = getattr(request_type, "name", str(request_type)).upper()
    return REQUEST_KINDS.get(name, "other"), spec_text(spec)


def wrap_create_grammar(original: Any) -> Any:
    def wrapper(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        recorder = ARMED.recorder
        if recorder is None:
            return original(self, request, *args, **kwargs)
        backend = vllm_backend_name(self)
        token = recorder.begin(backend)
        state = self.__dict__
        if "_gdx_noted" not in state:  # once per manager: its compilers and its pool
            note_manager(recorder, self, backend)
        compilers = state.get("_gdx_compilers", ())
        generations = [cache_generation(c) for c in compilers]
        built = _OUTLINES.built
        started = _perf()
        try:
            result = original(self, request, *args, **kwargs)
        except BaseException as err:
            ended = _perf()
            kind, spec = request_spec(request)
            recorder.finish(token, backend, kind, spec, ended - started, False, error_reason(err))
            _record_wait(recorder, backend, request, ended)
            raise
        ended = _perf()
        elapsed = ended - started
        kind, spec = request_spec(request)
        said: tuple[str, ...] = ()
        if backend == "llguidance":
            hit = False
            said = grammar_warnings(getattr(result, "ll_matcher", None))
        elif backend == "outlines":  # its LRU cache answered unless this thread built an index
            hit = _OUTLINES.built == built
        else:
            # A compile grows one compiler's cache (vLLM 0.33: `compiler`, or `full_vocab_compiler` for
            # Lark grammars and structural tags); a hit grows none. Every compiler is asked, so each
            # keeps its last size current.
            unchanged = [cache_unchanged(c, g) for c, g in zip(compilers, generations, strict=True)]
            hit = elapsed < recorder.hit_max_seconds or (bool(unchanged) and all(unchanged))
        recorder.finish(token, backend, kind, spec, elapsed, hit, None, said)
        _record_wait(recorder, backend, request, ended)
        return result

    return wrapper


def wrap_accept_tokens(original: Any) -> Any:
    """Counts a compiled grammar that refuses tokens (the scheduler then ends the request with an
    error) or raises. One call and one comparison per request per step; the failure path records."""

    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            accepted = original(self, *args, **kwargs)
        except BaseException:
            _rejected(self, args, kwargs, "error")
            raise
        if accepted is False:
            _rejected(self, args, kwargs, "rejected")
        return accepted

    return wrapper


def _rejected(manager: Any, args: tuple[Any, ...], kwargs: dict[str, Any], reason: str) -> None:
    recorder = ARMED.recorder
    if recorder is None:
        return
    request = args[0] if args else kwargs.get("request")
    kind, spec = request_spec(request)
    recorder.reject(vllm_backend_name(manager), reason, kind, spec)


def note_manager(recorder: Recorder, manager: Any, backend: str) -> None:
    """The manager's grammar compilers (0.33 has two: `compiler` and `full_vocab_compiler`) for their
    cache sizes, and its compile pool's size ((cpu_count + 1) // 2 workers, whatever the quota)."""
    try:
        manager.__dict__["_gdx_noted"] = True
        compilers: list[Any] = []
        for name in ("compiler", "full_vocab_compiler"):
            found = getattr(manager.backend, name, None)
            usable = found is not None and hasattr(found, "get_cache_size_bytes")
            if usable and all(found is not c for c in compilers):  # 0.33 shares one when vocabularies match
                compilers.append(found)
                recorder.facts.note_compiler(backend, name, found)
        manager.__dict__["_gdx_compilers"] = tuple(compilers)
        workers = getattr(getattr(manager, "executor", None), "_max_workers", 0)
        if type(workers) is int:
            recorder.facts.pool_workers = workers
    except Exception:
        recorder.counters["internal_errors"] += 1


def _record_wait(recorder: Recorder, backend: str, request: Any, ended: float) -> None:
    submitted = _submitted.pop(id(request), None)
    if submitted is not None:
        recorder.observe_wait(backend, ended - submitted)


def wrap_grammar_init(original: Any) -> Any:
    def wrapper(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        recorder = ARMED.recorder
        if recorder is None or getattr(request, "structured_output_request", None) is None:
            return original(self, request, *args, **kwargs)
        if len(_submitted) > SUBMITTED_LIMIT:  # compiles that never ran (engine shut down)
            _submitted.clear()
        _submitted[id(request)] = _perf()
        requested, resolved = resolved_backend(request)
        try:
            result = original(self, request, *args, **kwargs)
        except BaseException:
            _submitted.pop(id(request), None)  # no compile follows
            if resolved:
                _routed(recorder, self, request, requested, resolved, failed=True)
            raise
        if resolved:
            _routed(recorder, self, request, requested, resolved, failed=False)
        return result

    return wrapper


def _routed(
    recorder: Recorder, manager: Any, request: Any, requested: str, resolved: str, failed: bool
) -> None:
    """Counts where the request went. A grammar_init that raised on a request resolved elsewhere than
    the engine's backend is vLLM 0.33's refusal; one that went on compiled it with the engine's."""
    try:
        backend = engine_backend(manager)
        if not backend:
            return  # raised before any backend was built: not a routing outcome
        if backend != recorder.facts.backend:
            recorder.facts.backend = backend
        if backend == resolved:
            if not failed:
                recorder.route(requested, resolved, backend, "compiled")
            return
        kind, spec = request_spec(request)
        recorder.route(requested, resolved, backend, "rejected" if failed else "other_backend", kind, spec)
    except Exception:
        recorder.counters["internal_errors"] += 1


class _Built(threading.local):
    """Per compile thread: how many outlines indexes it has built (a hit builds none)."""

    built = 0


_OUTLINES = _Built()


def wrap_compile_regex(original: Any) -> Any:
    """vLLM's outlines backend calls this only on an LRU-cache miss, on the compiling thread."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _OUTLINES.built += 1
        return original(*args, **kwargs)

    return wrapper


def patch_vllm_outlines(module: Any) -> None:
    patching.wrap(module, "compile_regex_with_timeout", wrap_compile_regex, "backend_outlines")


def wrap_grammar_bitmask(original: Any) -> Any:
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        recorder = ARMED.recorder
        if recorder is None:
            return original(self, *args, **kwargs)
        started = _perf()
        result = original(self, *args, **kwargs)
        if result is not None:  # None: no structured request in this step
            timings = recorder.timings  # inlined observe_mask; the backend's name is resolved off the step
            if len(timings) < MAX_PENDING:
                timings.append((MASK, self, _perf() - started))
        return result

    return wrapper


def patch_vllm(module: Any) -> None:
    manager = getattr(module, "StructuredOutputManager", None)
    if manager is None:
        log.info("guided-decoding probe: vllm StructuredOutputManager not found")
        return
    where = "StructuredOutputManager"
    if "_create_grammar" in manager.__dict__:
        patching.wrap(manager, "_create_grammar", wrap_create_grammar, where)
    else:
        patching.wrap(manager, "_async_create_grammar", wrap_create_grammar, where)
    patching.wrap(manager, "grammar_init", wrap_grammar_init, where)
    if "accept_tokens" in manager.__dict__:  # the manager-level advance (vLLM 0.32+)
        patching.wrap(manager, "accept_tokens", wrap_accept_tokens, where)
    patching.wrap(manager, "grammar_bitmask", wrap_grammar_bitmask, where)
    patching.when_imported("vllm.v1.structured_output.backend_outlines", patch_vllm_outlines)
