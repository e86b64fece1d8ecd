"""llguidance: `LLMatcher` construction is the compile (no cross-request cache: every call a miss).
The grammar it receives is a string built by `LLMatcher.grammar_from_*`; the probe maps it back to
the user's spec so that the spec, not llguidance's wrapping, is what gets identified."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any

from exporter.probe import patching
from exporter.probe.targets.common import ARMED, error_reason, log, spec_text

_perf = time.perf_counter
GRAMMAR_FACTORIES = {
    "grammar_from_json_schema": "json",
    "grammar_from_regex": "regex",
    "grammar_from_lark": "grammar",
}


class GrammarOrigins:
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
        """(kind, spec) of a grammar string; one the probe did not see built is its own spec."""
        if isinstance(grammar, str):
            with self.lock:
                found = self.map.get(grammar)
            if found is not None:
                return found
        return "grammar", spec_text(grammar)


ORIGINS = GrammarOrigins()


def forwarding_metaclass(real: Any) -> type:
    """A metaclass that sends class attribute reads and isinstance/issubclass checks to `real`."""

    class _ForwardingMeta(type):
        def __getattr__(cls, name: str) -> Any:
            return getattr(real, name)

        def __instancecheck__(cls, obj: Any) -> bool:
            return isinstance(obj, real)

        def __subclasscheck__(cls, sub: Any) -> bool:
            return issubclass(sub, real)

    return _ForwardingMeta


def remembering_factory(real: Any, name: str, kind: str) -> Any:
    """`LLMatcher.grammar_from_*` that also remembers which user spec the grammar came from."""
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


def timed_construction(real: Any) -> Any:
    """The proxy's `__new__`: builds the real matcher and records the build as one compile."""

    def __new__(cls: Any, *args: Any, **kwargs: Any) -> Any:
        recorder = ARMED.recorder
        if recorder is None:
            return real(*args, **kwargs)
        token = recorder.begin("llguidance")
        started = _perf()
        grammar = args[1] if len(args) > 1 else kwargs.get("grammar", "")
        try:
            matcher = real(*args, **kwargs)
        except BaseException as err:
            kind, spec = ORIGINS.lookup(grammar)
            recorder.finish(token, "llguidance", kind, spec, _perf() - started, False, error_reason(err))
            raise
        elapsed = _perf() - started
        kind, spec = ORIGINS.lookup(grammar)
        error = None
        try:
            if matcher.is_error():  # llguidance reports a bad grammar here, not by raising
                error = error_reason(matcher.get_error())
        except Exception:
            pass
        said = grammar_warnings(matcher)
        recorder.finish(
            token, "llguidance", kind, spec, elapsed, False, error, said
        )  # no cross-request cache
        return matcher

    return __new__


def grammar_warnings(matcher: Any) -> tuple[str, ...]:
    """What llguidance compiled and ignores (unknown formats, keywords dropped in lenient mode): the
    matcher's own list, a getter with nothing to compute. Empty when it has none or cannot tell."""
    try:
        said = matcher.get_grammar_warnings()
        return tuple(w for w in said if isinstance(w, str)) if said else ()
    except Exception:
        return ()


def matcher_proxy(real: Any) -> Any:
    """LLMatcher is a Rust type: it can be neither subclassed nor patched, so the module attribute
    becomes a class whose construction times the real one and forwards everything else."""
    namespace: dict[str, Any] = {
        "__new__": timed_construction(real),
        "__doc__": real.__doc__,
        "__gdx_wrapped__": True,
        "__wrapped__": real,
    }
    for name, kind in GRAMMAR_FACTORIES.items():
        if hasattr(real, name):
            namespace[name] = remembering_factory(real, name, kind)
    return forwarding_metaclass(real)("LLMatcher", (), namespace)


def patch_llguidance(module: Any) -> None:
    real = getattr(module, "LLMatcher", None)
    if real is None:
        log.info("guided-decoding probe: llguidance.LLMatcher not found")
        return
    if getattr(real, "__gdx_wrapped__", False):
        return
    patching.wrap(module, "LLMatcher", matcher_proxy, "llguidance")
