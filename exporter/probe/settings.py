"""The probe's settings, read from the engine process's environment once, when it arms.

The variables are listed in `exporter.probe`'s docstring. A value that does not parse is logged and
replaced by its default: a typo in an engine's environment must not stop the engine.
"""

from __future__ import annotations

import logging
import os
import socket
import tempfile
from dataclasses import dataclass, field

from exporter.kernel.options import parse_duration, parse_positive_int, parse_size
from exporter.probe.guard import MODES, GuardSettings
from exporter.probe.recorder import DEFAULT_HIT_MAX_SECONDS, DEFAULT_TRACKED_SPECS
from exporter.wire import DEFAULT_SOCKET, DEFAULT_TOKEN_FILE

log = logging.getLogger("gdx.probe")
DEFAULT_INTERVAL = 1.0
TRACKED_SPECS = "GDX_PROBE_TRACKED_SPECS"
# The name before GDX_PROBE_TRACKED_SPECS: still read for one release when the new one is unset.
DEPRECATED_TRACKED_SPECS = "GDX_PROBE_MAX_SCHEMAS"


@dataclass(frozen=True, slots=True)
class EngineProbeSettings:
    """What the probe inside an engine reads from its environment (GDX_PROBE_*, GDX_POD_*)."""

    socket_path: str  # the daemon's address: a unix socket path, unix:PATH or tcp://HOST:PORT
    tracked_specs: int
    hit_max_seconds: float
    interval: float
    pod: str
    engine: str
    namespace: str = ""
    token_file: str = DEFAULT_TOKEN_FILE
    state_dir: str = ""  # the in-flight markers (inflight.py): an emptyDir in a pod
    daemon_uid: int | None = None  # who must listen on the unix socket; None: its directory's owner
    guard: GuardSettings = field(default_factory=GuardSettings)  # vLLM's API server only (guard.py)


@dataclass(frozen=True, slots=True)
class Address:
    """Where the daemon listens: `family` "unix" (`path`) or "tcp" (`host`, `port`)."""

    family: str
    path: str = ""
    host: str = ""
    port: int = 0

    def __str__(self) -> str:
        return f"tcp://{self.host}:{self.port}" if self.family == "tcp" else self.path


def parse_address(text: str) -> Address:
    """`tcp://HOST:PORT` (HOST a name, an IPv4 address or a bracketed IPv6 one), `unix:PATH`,
    `unix://PATH`, or a bare path; raises ValueError naming what is wrong."""
    text = text.strip()
    if text.startswith("tcp://"):
        rest = text[len("tcp://") :].rstrip("/")
        host, sep, port = rest.rpartition(":")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{text!r} is not tcp://HOST:PORT")
        return Address("tcp", host=host, port=int(port))
    if text.startswith("unix:"):
        text = text[len("unix:") :]
        text = text[2:] if text.startswith("///") else text
    if not text.startswith("/") and "://" in text:
        raise ValueError(f"{text!r}: the scheme is not tcp:// or unix:")
    if not text:
        raise ValueError("empty address")
    return Address("unix", path=text)


# Where Kubernetes puts the pod's namespace when the service-account token is mounted.
SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def pod_namespace(path: str = SERVICE_ACCOUNT_NAMESPACE) -> str:
    """GDX_POD_NAMESPACE (the downward API's metadata.namespace), else POD_NAMESPACE, else the mounted
    service account's namespace file, else empty. Read once when the probe arms, never on a hot path."""
    named = os.environ.get("GDX_POD_NAMESPACE") or os.environ.get("POD_NAMESPACE")
    if named:
        return named.strip()
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read(256).strip()
    except (OSError, ValueError):
        return ""


def disabled() -> bool:
    return os.environ.get("GDX_PROBE", "1").strip().lower() in ("0", "false", "no", "off")


def number(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        log.warning("guided-decoding probe: %s=%r is not a number, using %s", name, os.environ[name], default)
        return default


def daemon_uid() -> int | None:
    """GDX_PROBE_DAEMON_UID: the uid the daemon runs as; unset or not a uid: None (the owner of the
    socket's directory is expected)."""
    raw = os.environ.get("GDX_PROBE_DAEMON_UID", "").strip()
    if not raw:
        return None
    if not raw.isdigit():
        log.warning("guided-decoding probe: GDX_PROBE_DAEMON_UID=%r is not a uid, ignored", raw)
        return None
    return int(raw)


def tracked_specs() -> int:
    """GDX_PROBE_TRACKED_SPECS, else the deprecated GDX_PROBE_MAX_SCHEMAS; one warning whenever the
    old name is set, saying which name to use."""
    if DEPRECATED_TRACKED_SPECS in os.environ:
        if TRACKED_SPECS in os.environ:
            log.warning(
                "guided-decoding probe: %s is deprecated and ignored: %s is set",
                DEPRECATED_TRACKED_SPECS,
                TRACKED_SPECS,
            )
        else:
            log.warning(
                "guided-decoding probe: %s is deprecated, use %s", DEPRECATED_TRACKED_SPECS, TRACKED_SPECS
            )
            return int(number(DEPRECATED_TRACKED_SPECS, DEFAULT_TRACKED_SPECS))
    return int(number(TRACKED_SPECS, DEFAULT_TRACKED_SPECS))


def guard_settings() -> GuardSettings:
    """GDX_GUARD (off, observe, enforce), GDX_GUARD_MEMORY (a size), GDX_GUARD_TIMEOUT and
    GDX_GUARD_VERDICT_SECONDS (durations: 1s, 500ms), GDX_GUARD_MAX_VERDICTS, GDX_GUARD_FILE; a value
    that does not parse is logged and its default kept."""
    default = GuardSettings()
    mode = os.environ.get("GDX_GUARD", "off").strip().lower() or "off"
    if mode not in MODES:
        log.warning("guided-decoding probe: GDX_GUARD=%r is not one of %s: the guard is off", mode, MODES)
        mode = "off"
    values: dict[str, object] = {}
    for name, key, parse in (
        ("GDX_GUARD_MEMORY", "memory_bytes", parse_size),
        ("GDX_GUARD_TIMEOUT", "timeout", parse_duration),
        ("GDX_GUARD_VERDICT_SECONDS", "verdict_seconds", parse_duration),
        ("GDX_GUARD_MAX_VERDICTS", "max_verdicts", parse_positive_int),
    ):
        raw = os.environ.get(name, "").strip()
        if not raw:
            continue
        try:
            values[key] = parse(raw)
        except ValueError as err:
            log.warning("guided-decoding probe: %s: %s, using %s", name, err, getattr(default, key))
    return GuardSettings(mode, verdict_file=os.environ.get("GDX_GUARD_FILE", "").strip(), **values)  # type: ignore[arg-type]


def read_settings(engine: str | None = None, socket_path: str | None = None) -> EngineProbeSettings:
    """The environment's settings; `engine` and `socket_path`, when given, win over it.
    GDX_PROBE_ADDRESS (tcp://HOST:PORT or unix:PATH) wins over GDX_PROBE_SOCKET (a path)."""
    return EngineProbeSettings(
        socket_path=socket_path
        or os.environ.get("GDX_PROBE_ADDRESS")
        or os.environ.get("GDX_PROBE_SOCKET")
        or DEFAULT_SOCKET,
        tracked_specs=tracked_specs(),
        hit_max_seconds=number("GDX_PROBE_HIT_MAX_SECONDS", DEFAULT_HIT_MAX_SECONDS),
        interval=number("GDX_PROBE_INTERVAL", DEFAULT_INTERVAL),
        pod=os.environ.get("GDX_POD_NAME") or os.environ.get("POD_NAME") or socket.gethostname(),
        engine=engine or os.environ.get("GDX_PROBE_ENGINE", "0"),
        namespace=pod_namespace(),
        token_file=os.environ.get("GDX_PROBE_TOKEN_FILE") or DEFAULT_TOKEN_FILE,
        state_dir=os.environ.get("GDX_PROBE_STATE_DIR")
        or os.path.join(tempfile.gettempdir(), "guided-decoding-probe"),
        daemon_uid=daemon_uid(),
        guard=guard_settings(),
    )
