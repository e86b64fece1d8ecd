"""The value parsers of the daemon's own options (the shared ones are exporter.kernel.options'): each
takes the raw value (str from flags or the environment, any type from YAML) and returns it parsed, or
raises ValueError saying what is wrong (`ConfigError` adds the key and where the value came from)."""

from __future__ import annotations

import re
from typing import Any

from exporter.kernel.options import parse_duration, parse_positive_int

# under the 2 s send timeout of probes shipped before the non-blocking shipper (today's give up after
# 10 s without a byte read): injected probes may be older than the daemon during an upgrade
MAX_APPLY_INTERVAL = 1.5


def parse_off_or_duration(raw: Any) -> float:
    """A duration, or 0 (off)."""
    if not isinstance(raw, bool) and str(raw).strip() in ("0", "0s", "0ms", "0.0"):
        return 0.0
    return parse_duration(raw)


def parse_apply_interval(raw: Any) -> float:
    """A duration up to MAX_APPLY_INTERVAL, or 0 (off). Longer, a probe whose round fills the socket
    buffer of its parked connection would give up sending and reconnect (older probes: after 2 s)."""
    seconds = parse_off_or_duration(raw)
    if seconds == 0:
        return 0.0
    if seconds > MAX_APPLY_INTERVAL:
        raise ValueError(f"{raw!r} is over {MAX_APPLY_INTERVAL:g}s (a probe gives up a send after 2s)")
    return seconds


def parse_profile(raw: Any) -> str:
    """A series profile's name (exporter.daemon.profiles)."""
    from exporter.daemon.profiles import PROFILES

    name = parse_text(raw)
    if name not in PROFILES:
        raise ValueError(f"{name!r} is not a profile ({' or '.join(PROFILES)})")
    return name


def parse_port(raw: Any) -> int:
    value = parse_positive_int(raw)
    if value > 65535:
        raise ValueError(f"{raw!r} is not a TCP port (1-65535)")
    return value


def parse_address(raw: Any) -> str:
    """`host:port`, `:port` (all interfaces) or `[v6]:port`; port 0 asks the OS for a free one."""
    text = str(raw).strip()
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{raw!r} is not host:port (e.g. :9479 or 127.0.0.1:9479)")
    if host.startswith("[") != host.endswith("]"):
        raise ValueError(f"{raw!r} has an unbalanced IPv6 bracket")
    return text


def split_address(address: str) -> tuple[str | None, int]:
    """`:9479` -> (None, 9479) meaning every interface; `[::1]:80` -> ('::1', 80)."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    return (host or None), int(port)


def parse_text(raw: Any) -> str:
    if isinstance(raw, (dict, list)):
        raise ValueError(f"expected a string, got {type(raw).__name__}")
    return str(raw).strip()


def parse_listen_address(raw: Any) -> str:
    """HOST:PORT, :PORT or [V6]:PORT; empty for none."""
    text = parse_text(raw)
    if text:
        host, sep, port = text.rpartition(":")
        bare_v6 = ":" in host and not host.startswith("[")
        if not sep or not port.isdigit() or not 0 < int(port) < 65536 or bare_v6:
            raise ValueError(f"{text!r} is not HOST:PORT (e.g. :9478)")
    return text


def parse_uids(raw: Any) -> tuple[int, ...]:
    """A list of numeric user ids: `1000,0` (flag or env) or a YAML list."""
    items = raw if isinstance(raw, list) else [p for p in str(raw).split(",") if p.strip()]
    uids = []
    for item in items:
        text = str(item).strip()
        if not text.isdigit():
            raise ValueError(f"{item!r} is not a numeric user id")
        uids.append(int(text))
    return tuple(uids)


_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def parse_namespaces(raw: Any) -> tuple[str, ...]:
    """Kubernetes namespace names: `team-a,team-b` (flag or env) or a YAML list; duplicates dropped."""
    items = raw if isinstance(raw, list) else [p for p in str(raw).split(",") if p.strip()]
    names: list[str] = []
    for item in items:
        text = str(item).strip()
        if not _NAMESPACE.match(text):
            raise ValueError(f"{text[:70]!r} is not a namespace name (lower-case DNS label, at most 63)")
        if text not in names:
            names.append(text)
    return tuple(names)
