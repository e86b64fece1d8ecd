"""Python targets: the object `module:Name` or `path/to/file.py:Name` names (a Pydantic model, a
TypeAdapter or a dataclass), and the JSON Schema a client library sends for it (exporter/lint/clients.py:
each client's own conversion, called, never rewritten here).

Importing a target runs its module's code, as `python -c "import module"` would: name only modules you
would run. A module that fails to import is a TargetError (`gdx` exits 2 with the error), and so is a
client whose package is not installed (the message names the package to install).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
from pathlib import Path
from typing import Any

from exporter.lint import clients
from exporter.lint.clients import CLIENTS

__all__ = ["CLIENTS", "TargetError", "is_target", "load", "schema_of"]

_MODULE = re.compile(r"^[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*$")
_NAME = re.compile(r"^[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*$")


class TargetError(Exception):
    """A target that cannot be imported or converted: the message says which and why."""


def is_target(argument: str) -> bool:
    """`module:Name` or `file.py:Name` (an attribute path after the colon), not an existing file."""
    where, sep, name = argument.rpartition(":")
    if not sep or not _NAME.match(name) or os.path.exists(argument):
        return False
    return where.endswith(".py") or bool(_MODULE.match(where))


def schema_of(target: str, client: str = "pydantic") -> dict[str, Any]:
    """The JSON Schema `client` sends for the object `target` names."""
    obj = load(target)
    try:
        return clients.schema(target, client, obj)
    except clients.ClientError as err:
        raise TargetError(str(err)) from err
    except Exception as err:  # the library's own error, named
        raise TargetError(
            f"{target}: {client} cannot make a JSON Schema of it: {type(err).__name__}: {err}"
        ) from err


def load(target: str) -> Any:
    where, _, name = target.rpartition(":")
    try:
        module = _import_file(where) if where.endswith(".py") else _import_module(where)
    except TargetError:
        raise
    except BaseException as err:
        raise TargetError(f"{target}: importing {where} failed: {type(err).__name__}: {err}") from err
    obj: Any = module
    for part in name.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise TargetError(f"{target}: {where} has no {name}") from None
    return obj


def _import_module(name: str) -> Any:
    """A module as `python -m` finds it: the working folder first (the `gdx` script alone lacks it)."""
    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(name)
    finally:
        if added and cwd in sys.path:
            sys.path.remove(cwd)


def _import_file(path: str) -> Any:
    """A file's module, with its folder first on sys.path so that its own imports resolve."""
    file = Path(path).resolve()
    if not file.is_file():
        raise TargetError(f"{path}: no such file")
    folder = str(file.parent)
    spec = importlib.util.spec_from_file_location(f"_gdx_target_{abs(hash(str(file)))}", file)
    if spec is None or spec.loader is None:
        raise TargetError(f"{path}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, folder)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        if sys.path and sys.path[0] == folder:
            sys.path.pop(0)
    return module
