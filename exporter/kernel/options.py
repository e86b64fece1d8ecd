"""The option machinery the daemon, `gdx lint` and `gdx fix` share: an option is a dataclass field whose
metadata names its flag, YAML key, environment variable and parser (`option`), so flags, environment,
YAML, `--help` and docs/configuration.md come from one table; the parsers of durations, sizes, counts
and booleans; `ConfigError`, which names the key and where its value came from."""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Callable
from dataclasses import field
from typing import Any, Protocol

ENV_PREFIX = "GDX_"


class ConfigError(ValueError):
    """A configuration value is wrong; the message names the key, its origin and the problem."""

    def __init__(self, key: str, problem: str, origin: str = "") -> None:
        where = f" (from {origin})" if origin else ""
        super().__init__(f"invalid configuration: {key}{where}: {problem}")
        self.key = key
        self.problem = problem


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_SIZE = re.compile(r"^\s*(\d+)\s*(B|KB|KiB|MB|MiB|GB|GiB)?\s*$")
_SIZE_UNITS = {
    None: 1,
    "B": 1,
    "KB": 10**3,
    "KiB": 2**10,
    "MB": 10**6,
    "MiB": 2**20,
    "GB": 10**9,
    "GiB": 2**30,
}
_DURATION_UNITS = {None: 1.0, "s": 1.0, "ms": 0.001, "m": 60.0, "h": 3600.0}


def parse_bool(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{raw!r} is not a boolean (true/false)")


def parse_duration(raw: Any) -> float:
    """Seconds from `500ms`, `5s`, `1m`, `1h` or a bare number of seconds; must be positive."""
    if isinstance(raw, bool):
        raise ValueError(f"{raw!r} is not a duration (e.g. 500ms, 5s, 1m)")
    match = _DURATION.match(str(raw))
    if not match:
        raise ValueError(f"{raw!r} is not a duration (e.g. 500ms, 5s, 1m)")
    seconds = float(match.group(1)) * _DURATION_UNITS[match.group(2)]
    if seconds <= 0:
        raise ValueError(f"{raw!r} must be greater than zero")
    return seconds


def parse_size(raw: Any) -> int:
    """Bytes from `16MiB`, `1GB`, `512KiB` or a bare number; must be positive."""
    match = _SIZE.match(str(raw)) if not isinstance(raw, bool) else None
    if not match:
        raise ValueError(f"{raw!r} is not a size (e.g. 16MiB, 1GB, 65536)")
    size = int(match.group(1)) * _SIZE_UNITS[match.group(2)]
    if size <= 0:
        raise ValueError(f"{raw!r} must be greater than zero")
    return size


def _parse_int(raw: Any) -> int:
    if isinstance(raw, bool):
        raise ValueError(f"{raw!r} is not an integer")
    try:
        return int(str(raw).strip())
    except ValueError:
        raise ValueError(f"{raw!r} is not an integer") from None


def parse_positive_int(raw: Any) -> int:
    value = _parse_int(raw)
    if value <= 0:
        raise ValueError(f"{raw!r} must be greater than zero")
    return value


def parse_count(raw: Any) -> int:
    """An integer, zero or more (zero: off)."""
    value = _parse_int(raw)
    if value < 0:
        raise ValueError(f"{raw!r} must be zero or more")
    return value


def parse_positive_float(raw: Any) -> float:
    if isinstance(raw, bool):
        raise ValueError(f"{raw!r} is not a number")
    try:
        value = float(str(raw).strip())
    except ValueError:
        raise ValueError(f"{raw!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{raw!r} must be a number greater than zero")
    return value


def choice(*allowed: str) -> Callable[[Any], str]:
    def parse(raw: Any) -> str:
        text = str(raw).strip().lower()
        if text not in allowed:
            raise ValueError(f"{raw!r} is not one of {', '.join(allowed)}")
        return text

    return parse


def option(
    default: Any,
    flag: str,
    parse: Callable[[Any], Any],
    help: str,
    *,
    yaml_key: str | None = None,
    repeat: bool = False,
    metavar: str | None = None,
) -> Any:
    meta = {
        "flag": flag,
        "yaml": yaml_key or flag.replace("-", "_"),
        "env": ENV_PREFIX + re.sub(r"[.-]", "_", flag).upper(),
        "parse": parse,
        "help": help,
        "repeat": repeat,
        "metavar": metavar,
    }
    if isinstance(default, (list, tuple)):
        return field(default=tuple(default), metadata=meta)
    return field(default=default, metadata=meta)


class ArgumentAdder(Protocol):
    """An argparse parser or argument group: whatever flags can be added to."""

    def add_argument(self, *name_or_flags: str, **kwargs: Any) -> argparse.Action: ...


def add_flag(parser: ArgumentAdder, option: dataclasses.Field[Any], *, show_env: bool) -> None:
    """One option as a flag; its value stays the raw text until `load` or `lint_thresholds_from`."""
    meta = option.metadata
    dest = option.name
    env = f"env {meta['env']}; " if show_env else ""
    text = f"{meta['help']} ({env}default {show_default(option.default)})"
    flag = "--" + meta["flag"]
    if meta["parse"] is parse_bool:
        parser.add_argument(
            flag, dest=dest, action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS, help=text
        )
    elif meta["repeat"]:
        parser.add_argument(
            flag, dest=dest, action="append", default=argparse.SUPPRESS, metavar=meta["metavar"], help=text
        )
    else:
        parser.add_argument(flag, dest=dest, default=argparse.SUPPRESS, metavar=meta["metavar"], help=text)


def parse_option(option: dataclasses.Field[Any], raw: Any, origin: str) -> Any:
    try:
        return option.metadata["parse"](raw)
    except ValueError as err:
        raise ConfigError(option.metadata["flag"], str(err), origin) from None


def show_default(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if value in ((), ""):
        return "none"
    return str(value)
