"""The wrapped call sites, engine by engine. Every wrapper calls the original with `*args, **kwargs`,
re-raises its exceptions untouched and records through the Recorder, which never raises.

Where the probe counts a compile:
- vLLM: `StructuredOutputManager._create_grammar` (`_async_create_grammar` in older releases). It
  knows the request's kind and spec, and it covers every backend. The library calls under it are
  not wrapped in vLLM: its regex compiles run on a second thread (`compile_regex_with_timeout`),
  where a nested wrapper could not tell it is nested and would count twice.
- SGLang, TensorRT-LLM, direct use: xgrammar `GrammarCompiler.compile_*` and llguidance `LLMatcher`
  construction. SGLang's own cache answers before xgrammar is asked, so its hits are counted at
  `BaseGrammarBackend.get_cached_or_future_value` (returns `(value, True)` on a hit).
"""

from __future__ import annotations

import functools
import json
import threading
import time
from collections import OrderedDict
from typing import Any

from exporter.probe import patching
from exporter.probe.recorder import MASK, MAX_PENDING, Recorder

_perf = time.perf_counter


class _State:
    recorder: Recorder | None = None


STATE = _State()


def error_reason(err: BaseException | str) -> str:
    """Maps an engine's compile failure to the contract's reasons."""
    if isinstance(err, TimeoutError):
        return "timeout"
    text = str(err).lower()
    if "timeout" in text or "timed out" in text:
        return "timeout"
    if "unimplemented" in text or "unsupported" in text or "not supported" in text:
        return "unsupported"
    if isinstance(err, (ValueError, RuntimeError, KeyError, TypeError)) or "invalid" in text:
        return "invalid_schema"
    return "internal"


def spec_text(spec: Any) -> str:
    """The key for a spec given as a string (the usual case), a dict, or a pydantic model class."""
    if isinstance(spec, str):
        return spec
    if isinstance(spec, dict):
        try:
            return json.dumps(spec, sort_keys=True)
        except (TypeError, ValueError):
            return repr(spec)[:4096]
    name = getattr(spec, "__qualname__", None) or type(spec).__qualname__
    return f"<{getattr(spec, '__module__', '')}.{name}>"


_cache_lock = threading.Lock()


def cache_generation(compiler: Any) -> int:
    """How many cache growths the probe has seen on this compiler; read when a call starts."""
    try:
        return int(compiler.__dict__.get("_gdx_gen", 0))
    except Exception:
        return -1


def cache_unchanged(compiler: Any, generation: int) -> bool:
    """Second hit signal, asked only by calls slower than the hit threshold. The call was a hit if
    the compiler's cache size is what the last slow call saw and no slow call saw it change while
    this one ran. A compile adds an entry; a hit (slow because the host is starved) adds none.
    A slow hit that overlaps another thread's compile counts as a miss: it did wait."""
    try:
        size = compiler.get_cache_size_bytes()
        with _cache_lock:
            state = compiler.__dict__
            current = state.get("_gdx_gen", 0)
            if size != state.get("_gdx_cache_size"):
                state["_gdx_cache_size"] = size
                state["_gdx_gen"] = current + 1
                return False
            return bool(current == generation)
    except Exception:
        return False


# ---- xgrammar ------------------------------------------------------------------------------------

XGRAMMAR_METHODS = {
    "compile_json_schema": "json",
    "compile_regex": "regex",
    "compile_grammar": "grammar",
    "compile_structural_tag": "structural_tag",
    "compile_builtin_json_grammar": "json_object",
}


def _xgrammar_compile(original: Any, kind: str) -> Any:
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = STATE.recorder
        if rec is None:
            return original(self, *args, **kwargs)
        started = _perf()
        token = next(rec.tokens)
        rec.inflight[token] = (started, "xgrammar")
        generation = self.__dict__.get("_gdx_gen", 0)
        try:
            result = original(self, *args, **kwargs)
        except BaseException as err:
            elapsed = _perf() - started
            rec.finish(token, "xgrammar", kind, _first_arg(args, kwargs), elapsed, False, error_reason(err))
            raise
        elapsed = _perf() - started
        hit = elapsed < rec.hit_max_seconds or cache_unchanged(self, generation)
        spec = args[0] if args and type(args[0]) is str else _first_arg(args, kwargs)
        rec.finish(token, "xgrammar", kind, spec, elapsed, hit)
        return result

    return wrapper


def _first_arg(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    if args:
        return spec_text(args[0])
    for name in ("schema", "regex", "grammar", "structural_tag", "tags"):
        if name in kwargs:
            return spec_text(kwargs[name])
    return ""


def _mask(original: Any, backend: str) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        rec = STATE.recorder
        if rec is None:
            return original(*args, **kwargs)
        started = _perf()
        result = original(*args, **kwargs)
        timings = rec.timings  # inlined observe_mask: this runs per token
        if len(timings) < MAX_PENDING:
            timings.append((MASK, backend, _perf() - started))
        return result

    return wrapper


def patch_xgrammar(module: Any, with_mask: bool) -> None:
    compiler = getattr(module, "GrammarCompiler", None)
    if compiler is None:
        patching.log.info("guided-decoding probe: xgrammar.GrammarCompiler not found")
        return
    for method, kind in XGRAMMAR_METHODS.items():
        patching.wrap(compiler, method, functools.partial(_xgrammar_compile, kind=kind), "GrammarCompiler")
    matcher = getattr(module, "GrammarMatcher", None)
    if with_mask and matcher is not None:
        patching.wrap(
            matcher, "fill_next_token_bitmask", lambda orig: _mask(orig, "xgrammar"), "GrammarMatcher"
        )


# ---- llguidance ----------------------------------------------------------------------------------


class _GrammarOrigins:
    """Maps a grammar string built by `LLMatcher.grammar_from_*` back to the user's spec (bounded)."""

    def __init__(self, limit: int = 256) -> None:
        self.limit = limit
        self.map: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self.lock = threading.Lock()

    def remember(self, grammar: Any, kind: str, spec: Any) -> None:
        if not isinstance(grammar, str):
            return
        with self.lock:
            self.map[grammar] = (kind, spec_text(spec))
            if len(self.map) > self.limit:
                self.map.popitem(last=False)

    def lookup(self, grammar: Any) -> tuple[str, str]:
        if isinstance(grammar, str):
            with self.lock:
                found = self.map.get(grammar)
            if found is not None:
                return found
        return "grammar", spec_text(grammar)


ORIGINS = _GrammarOrigins()
_LL_FACTORIES = {
    "grammar_from_json_schema": "json",
    "grammar_from_regex": "regex",
    "grammar_from_lark": "grammar",
}


def _llguidance_proxy(real: Any) -> Any:
    """LLMatcher is a Rust type: it can be neither subclassed nor patched, so the module attribute
    becomes a class whose construction times the real one and forwards everything else."""

    class _Meta(type):
        def __getattr__(cls, name: str) -> Any:
            return getattr(real, name)

        def __instancecheck__(cls, obj: Any) -> bool:
            return isinstance(obj, real)

        def __subclasscheck__(cls, sub: Any) -> bool:
            return issubclass(sub, real)

    def factory(name: str, kind: str) -> Any:
        original = getattr(real, name)

        def build(*args: Any, **kwargs: Any) -> Any:
            grammar = original(*args, **kwargs)
            try:
                spec = args[0] if args else next(iter(kwargs.values()), "")
                ORIGINS.remember(grammar, kind, spec)
            except Exception:
                pass
            return grammar

        return staticmethod(build)

    def __new__(cls: Any, *args: Any, **kwargs: Any) -> Any:
        rec = STATE.recorder
        if rec is None:
            return real(*args, **kwargs)
        token = rec.begin("llguidance")
        started = _perf()
        grammar = args[1] if len(args) > 1 else kwargs.get("grammar", "")
        try:
            matcher = real(*args, **kwargs)
        except BaseException as err:
            kind, spec = ORIGINS.lookup(grammar)
            rec.finish(token, "llguidance", kind, spec, _perf() - started, False, error_reason(err))
            raise
        elapsed = _perf() - started
        kind, spec = ORIGINS.lookup(grammar)
        error = None
        try:
            if matcher.is_error():  # llguidance reports a bad grammar here, not by raising
                error = error_reason(matcher.get_error())
        except Exception:
            pass
        rec.finish(token, "llguidance", kind, spec, elapsed, False, error)  # no cross-request cache
        return matcher

    namespace: dict[str, Any] = {"__new__": __new__, "__doc__": real.__doc__, "__gdx_wrapped__": True}
    namespace["__wrapped__"] = real
    for name, kind in _LL_FACTORIES.items():
        if hasattr(real, name):
            namespace[name] = factory(name, kind)
    return _Meta("LLMatcher", (), namespace)


def patch_llguidance(module: Any) -> None:
    real = getattr(module, "LLMatcher", None)
    if real is None:
        patching.log.info("guided-decoding probe: llguidance.LLMatcher not found")
        return
    if getattr(real, "__gdx_wrapped__", False):
        return
    patching.wrap(module, "LLMatcher", lambda orig: _llguidance_proxy(orig), "llguidance")


# ---- vLLM ----------------------------------------------------------------------------------------

VLLM_BACKENDS = {
    "XgrammarBackend": "xgrammar",
    "GuidanceBackend": "llguidance",
    "OutlinesBackend": "outlines",
    "LMFormatEnforcerBackend": "lm-format-enforcer",
}
VLLM_KINDS = {
    "JSON": "json",
    "JSON_OBJECT": "json_object",
    "REGEX": "regex",
    "GRAMMAR": "grammar",
    "CHOICE": "choice",
    "STRUCTURAL_TAG": "structural_tag",
}
_submitted: dict[int, float] = {}
_SUBMITTED_LIMIT = 100_000


def vllm_backend_name(manager: Any) -> str:
    backend = getattr(manager, "backend", None)
    name = type(backend).__name__
    return VLLM_BACKENDS.get(name, name.removesuffix("Backend").lower() or "unknown")


def _vllm_request_spec(request: Any) -> tuple[str, str]:
    try:
        request_type, spec = request.structured_output_request.structured_output_key
    except Exception:
        return "other", ""
    name = getattr(request_type, "name", str(request_type)).upper()
    return VLLM_KINDS.get(name, "other"), spec_text(spec)


def _vllm_create(original: Any) -> Any:
    def wrapper(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        rec = STATE.recorder
        if rec is None:
            return original(self, request, *args, **kwargs)
        backend = vllm_backend_name(self)
        token = rec.begin(backend)
        compiler = getattr(self.backend, "compiler", None)
        generation = cache_generation(compiler) if compiler is not None else -1
        started = _perf()
        try:
            result = original(self, request, *args, **kwargs)
        except BaseException as err:
            ended = _perf()
            kind, spec = _vllm_request_spec(request)
            rec.finish(token, backend, kind, spec, ended - started, False, error_reason(err))
            _record_wait(rec, backend, request, ended)
            raise
        ended = _perf()
        elapsed = ended - started
        kind, spec = _vllm_request_spec(request)
        if backend == "llguidance":
            hit = False
        else:
            hit = elapsed < rec.hit_max_seconds or (
                compiler is not None and cache_unchanged(compiler, generation)
            )
        rec.finish(token, backend, kind, spec, elapsed, hit)
        _record_wait(rec, backend, request, ended)
        return result

    return wrapper


def _record_wait(rec: Recorder, backend: str, request: Any, ended: float) -> None:
    submitted = _submitted.pop(id(request), None)
    if submitted is not None:
        rec.observe_wait(backend, ended - submitted)


def _vllm_grammar_init(original: Any) -> Any:
    def wrapper(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        if STATE.recorder is not None and getattr(request, "structured_output_request", None) is not None:
            if len(_submitted) > _SUBMITTED_LIMIT:  # compiles that never ran (engine shut down)
                _submitted.clear()
            _submitted[id(request)] = _perf()
        return original(self, request, *args, **kwargs)

    return wrapper


def _vllm_bitmask(original: Any) -> Any:
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = STATE.recorder
        if rec is None:
            return original(self, *args, **kwargs)
        started = _perf()
        result = original(self, *args, **kwargs)
        if result is not None:  # None: no structured request in this step
            timings = rec.timings  # inlined observe_mask; the backend's name is resolved off the step
            if len(timings) < MAX_PENDING:
                timings.append((MASK, self, _perf() - started))
        return result

    return wrapper


def patch_vllm(module: Any) -> None:
    manager = getattr(module, "StructuredOutputManager", None)
    if manager is None:
        patching.log.info("guided-decoding probe: vllm StructuredOutputManager not found")
        return
    where = "StructuredOutputManager"
    if "_create_grammar" in manager.__dict__:
        patching.wrap(manager, "_create_grammar", _vllm_create, where)
    else:
        patching.wrap(manager, "_async_create_grammar", _vllm_create, where)
    patching.wrap(manager, "grammar_init", _vllm_grammar_init, where)
    patching.wrap(manager, "grammar_bitmask", _vllm_bitmask, where)


# ---- SGLang --------------------------------------------------------------------------------------

SGLANG_KINDS = {"json": "json", "regex": "regex", "ebnf": "grammar", "structural_tag": "structural_tag"}


def _sglang_lookup(original: Any) -> Any:
    def wrapper(self: Any, key: Any, *args: Any, **kwargs: Any) -> Any:
        started = _perf()
        result = original(self, key, *args, **kwargs)
        rec = STATE.recorder
        try:
            if rec is not None and result[1] is True:  # a hit in SGLang's own cache; misses reach xgrammar
                elapsed = _perf() - started
                key_type, spec = key
                kind = SGLANG_KINDS.get(str(key_type).split(":", 1)[0], "other")
                if spec == "$$ANY$$":
                    kind, spec = "json_object", ""
                rec.finish(rec.begin("xgrammar"), "xgrammar", kind, spec_text(spec), elapsed, True)
        except Exception:
            pass
        return result

    return wrapper


def patch_sglang(module: Any) -> None:
    base = getattr(module, "BaseGrammarBackend", None)
    if base is None:
        patching.log.info("guided-decoding probe: sglang BaseGrammarBackend not found")
        return
    patching.wrap(base, "get_cached_or_future_value", _sglang_lookup, "BaseGrammarBackend")


# ---- TensorRT-LLM --------------------------------------------------------------------------------


def _trtllm_create(original: Any, backend: str) -> Any:
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = STATE.recorder
        if rec is None:
            return original(self, *args, **kwargs)
        started = _perf()
        try:
            return original(self, *args, **kwargs)
        finally:  # synchronous on the executor loop: the whole batch waits this long
            rec.observe_wait(backend, _perf() - started)

    return wrapper


def patch_trtllm(module: Any) -> None:
    for cls, backend in (("XGrammarMatcherFactory", "xgrammar"), ("LLGuidanceMatcherFactory", "llguidance")):
        factory = getattr(module, cls, None)
        if factory is None:
            patching.log.info("guided-decoding probe: tensorrt_llm %s not found", cls)
            continue
        patching.wrap(factory, "create", functools.partial(_trtllm_create, backend=backend), cls)
