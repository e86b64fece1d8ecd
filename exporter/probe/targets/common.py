"""What every engine's wrappers share: the recorder they report to, and how a call's spec and its
failure are named."""

from __future__ import annotations

import json
import logging
from typing import Any

from exporter.probe.recorder import Recorder

log = logging.getLogger("gdx.probe")


class ArmedRecorder:
    """Holds the recorder the wrappers report to. While it holds None (not armed, or a forked child)
    the wrappers only call through. One attribute read per wrapped call."""

    __slots__ = ("recorder",)

    def __init__(self) -> None:
        self.recorder: Recorder | None = None


ARMED = ArmedRecorder()


def error_reason(err: BaseException | str) -> str:
    """Maps an engine's compile failure to a `reason` of compile_errors_total (wire.ERROR_REASONS)."""
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
