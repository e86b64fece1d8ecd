"""SGLang: its own grammar cache answers repeats before xgrammar is asked, so its hits are counted at
`BaseGrammarBackend.get_cached_or_future_value` (which returns `(value, True)` on a hit); its misses
reach xgrammar's wrapped compile and are counted there."""

from __future__ import annotations

import time
from typing import Any

from exporter.probe import patching
from exporter.probe.targets.common import ARMED, log, spec_text

_perf = time.perf_counter
KEY_KINDS = {"json": "json", "regex": "regex", "ebnf": "grammar", "structural_tag": "structural_tag"}
ANY_JSON = "$$ANY$$"  # SGLang's key for json_object (any JSON)


def wrap_cache_lookup(original: Any) -> Any:
    def wrapper(self: Any, key: Any, *args: Any, **kwargs: Any) -> Any:
        started = _perf()
        result = original(self, key, *args, **kwargs)
        recorder = ARMED.recorder
        try:
            if recorder is not None and result[1] is True:  # a hit in SGLang's cache; misses reach xgrammar
                elapsed = _perf() - started
                key_type, spec = key
                kind = KEY_KINDS.get(str(key_type).split(":", 1)[0], "other")
                if spec == ANY_JSON:
                    kind, spec = "json_object", ""
                token = recorder.begin("xgrammar")
                recorder.finish(token, "xgrammar", kind, spec_text(spec), elapsed, True)
        except Exception:
            pass
        return result

    return wrapper


def patch_sglang(module: Any) -> None:
    base = getattr(module, "BaseGrammarBackend", None)
    if base is None:
        log.info("guided-decoding probe: sglang BaseGrammarBackend not found")
        return
    patching.wrap(base, "get_cached_or_future_value", wrap_cache_lookup, "BaseGrammarBackend")
