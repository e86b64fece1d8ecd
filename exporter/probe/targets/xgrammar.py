"""xgrammar: `GrammarCompiler.compile_*` (one compile call each, hit or miss) and, outside vLLM,
`GrammarMatcher.fill_next_token_bitmask` (the per-token mask fill)."""

from __future__ import annotations

import functools
import time
from typing import Any

from exporter.probe import patching
from exporter.probe.recorder import FAST_CHARS, FAST_PENDING, MASK, MAX_PENDING
from exporter.probe.targets.cache_hits import cache_unchanged
from exporter.probe.targets.common import ARMED, error_reason, log, spec_text

_perf = time.perf_counter
COMPILE_METHODS = {
    "compile_json_schema": "json",
    "compile_regex": "regex",
    "compile_grammar": "grammar",
    "compile_structural_tag": "structural_tag",
    "compile_builtin_json_grammar": "json_object",
}
SPEC_KEYWORDS = ("schema", "regex", "grammar", "structural_tag", "tags")


def spec_argument(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """The spec a compile method was given, positionally or by keyword."""
    if args:
        return spec_text(args[0])
    for name in SPEC_KEYWORDS:
        if name in kwargs:
            return spec_text(kwargs[name])
    return ""


def wrap_compile(original: Any, kind: str) -> Any:
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        recorder = ARMED.recorder
        if recorder is None:
            return original(self, *args, **kwargs)
        started = _perf()
        token = next(recorder.tokens)  # inlined Recorder.begin: this runs per request
        recorder.inflight[token] = (started, "xgrammar")
        state = self.__dict__
        generation = state.get("_gdx_gen", 0)
        if "_gdx_noted" not in state:  # once per compiler: its cache size is reported
            state["_gdx_noted"] = True
            recorder.facts.note_compiler("xgrammar", recorder.facts.compiler_name("xgrammar"), self)
        try:
            result = original(self, *args, **kwargs)
        except BaseException as err:
            elapsed = _perf() - started
            spec = spec_argument(args, kwargs)
            recorder.finish(token, "xgrammar", kind, spec, elapsed, False, error_reason(err))
            raise
        elapsed = _perf() - started
        hit = elapsed < recorder.hit_max_seconds or cache_unchanged(self, generation)
        spec = args[0] if args and type(args[0]) is str else spec_argument(args, kwargs)
        pending = recorder.pending
        if len(pending) < FAST_PENDING and len(spec) <= FAST_CHARS:  # Recorder.finish's first branch, inlined
            recorder.inflight.pop(token, None)
            pending.append((None, "xgrammar", kind, spec, elapsed, hit, None, ()))
        else:
            recorder.finish(token, "xgrammar", kind, spec, elapsed, hit)
        return result

    return wrapper


def wrap_mask(original: Any, backend: str) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        recorder = ARMED.recorder
        if recorder is None:
            return original(*args, **kwargs)
        started = _perf()
        result = original(*args, **kwargs)
        timings = recorder.timings  # inlined Recorder.observe_mask: this runs per token
        if len(timings) < MAX_PENDING:
            timings.append((MASK, backend, _perf() - started))
        return result

    return wrapper


def patch_xgrammar(module: Any, with_mask: bool) -> None:
    compiler = getattr(module, "GrammarCompiler", None)
    if compiler is None:
        log.info("guided-decoding probe: xgrammar.GrammarCompiler not found")
        return
    for method, kind in COMPILE_METHODS.items():
        patching.wrap(compiler, method, functools.partial(wrap_compile, kind=kind), "GrammarCompiler")
    matcher = getattr(module, "GrammarMatcher", None)
    if with_mask and matcher is not None:
        patching.wrap(
            matcher, "fill_next_token_bitmask", lambda orig: wrap_mask(orig, "xgrammar"), "GrammarMatcher"
        )
