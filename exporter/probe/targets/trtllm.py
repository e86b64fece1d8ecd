"""TensorRT-LLM: `XGrammarMatcherFactory.create` / `LLGuidanceMatcherFactory.create` build a request's
matcher synchronously on the executor loop, so the whole batch waits that long: recorded as grammar
wait. The compile under it is counted by the xgrammar and llguidance wrappers."""

from __future__ import annotations

import functools
import time
from typing import Any

from exporter.probe import patching
from exporter.probe.targets.common import ARMED, log

_perf = time.perf_counter
FACTORIES = {"XGrammarMatcherFactory": "xgrammar", "LLGuidanceMatcherFactory": "llguidance"}


def wrap_create(original: Any, backend: str) -> Any:
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        recorder = ARMED.recorder
        if recorder is None:
            return original(self, *args, **kwargs)
        started = _perf()
        try:
            return original(self, *args, **kwargs)
        finally:  # synchronous on the executor loop: the whole batch waits this long
            recorder.observe_wait(backend, _perf() - started)

    return wrapper


def patch_trtllm(module: Any) -> None:
    for name, backend in FACTORIES.items():
        factory = getattr(module, name, None)
        if factory is None:
            log.info("guided-decoding probe: tensorrt_llm %s not found", name)
            continue
        patching.wrap(factory, "create", functools.partial(wrap_create, backend=backend), name)
