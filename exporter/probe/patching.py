"""Version-tolerant monkey-patching: wrap a named attribute now, or when its module is first imported.

Engines import their grammar libraries lazily (vLLM through a LazyLoader), so the probe registers
post-import hooks on `sys.meta_path`; a module already imported is patched at once. A missing class
or method is skipped with one log line: the probe must load on releases it does not know.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import logging
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

log = logging.getLogger("gdx.probe")
Hook = Callable[[ModuleType], None]


@dataclass(frozen=True, slots=True)
class AppliedPatch:
    """What `unwrap_all` puts back: `owner.name = original`."""

    owner: Any
    name: str
    original: Any


_applied: list[AppliedPatch] = []
_hooks: dict[str, list[Hook]] = {}
_lock = threading.RLock()


def wrap(owner: Any, name: str, make: Callable[[Any], Any], where: str) -> bool:
    """Replaces `owner.name` with `make(original)`; idempotent; False (and one log line) if absent."""
    with _lock:
        original = owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name, None)
        if original is None:
            log.info("guided-decoding probe: %s.%s not found, not wrapped", where, name)
            return False
        if getattr(original, "__gdx_wrapped__", False):
            return True
        wrapper = make(original)
        try:
            wrapper.__gdx_wrapped__ = True
            wrapper.__wrapped__ = original
        except AttributeError:
            pass
        setattr(owner, name, wrapper)
        _applied.append(AppliedPatch(owner, name, original))
        return True


def unwrap_all() -> None:
    """Restores every wrapped attribute and forgets pending hooks (tests, and `uninstall()`)."""
    with _lock:
        while _applied:
            patch = _applied.pop()
            setattr(patch.owner, patch.name, patch.original)
        _hooks.clear()


def remove_import_hooks() -> None:
    """Takes the probe's finder off `sys.meta_path` (`uninstall()`)."""
    with _lock:
        for finder in [f for f in sys.meta_path if isinstance(f, _Finder)]:
            sys.meta_path.remove(finder)


def when_imported(module: str, hook: Hook) -> None:
    """Runs `hook(module)` now if the module is loaded, else right after it is first imported."""
    with _lock:
        loaded = sys.modules.get(module)
        if loaded is not None and getattr(loaded, "__spec__", None) is not None:
            _run(hook, loaded)
            return
        _hooks.setdefault(module, []).append(hook)
        if not any(isinstance(f, _Finder) for f in sys.meta_path):
            sys.meta_path.insert(0, _Finder())


def _run(hook: Hook, module: ModuleType) -> None:
    try:
        hook(module)
    except Exception as err:  # a patch that fails must not break the engine's import
        log.warning("guided-decoding probe: patching %s failed: %r", module.__name__, err)


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader, name: str) -> None:
        self.inner = inner
        self.name = name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        with _lock:
            hooks = _hooks.pop(self.name, [])
        for hook in hooks:
            _run(hook, module)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.inner, attr)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self) -> None:
        self._busy = threading.local()

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in _hooks or getattr(self._busy, "name", None) == fullname:
            return None
        self._busy.name = fullname
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self._busy.name = None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _Loader(spec.loader, fullname)
        return spec
