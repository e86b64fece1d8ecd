"""Configuration: one table of options, settable by flag, environment variable or YAML file.

Each option is a field of `Config` whose metadata names its flag, its YAML key and its parser, so the
flags, the environment variables, the YAML schema, `--help` and the table in docs/configuration.md
cannot drift apart. `gdx lint` takes the `lint.*` options as flags from the same fields, and both
commands build their limits with `Config.lint_thresholds`.
Precedence, lowest first: built-in default, YAML file (`--config.file`), `GDX_*` environment, flags.
Every problem is reported as `ConfigError` naming the key and where the value came from.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

import yaml

from exporter import wire
from exporter.kernel.lint_options import LINT_OPTIONS, LintOptions, lint_field
from exporter.kernel.names import SCRAPE_ANNOTATION
from exporter.kernel.options import (  # re-exported: the daemon's modules and tests read them from here
    ENV_PREFIX as ENV_PREFIX,
)
from exporter.kernel.options import ArgumentAdder as ArgumentAdder
from exporter.kernel.options import ConfigError as ConfigError
from exporter.kernel.options import add_flag as add_flag
from exporter.kernel.options import choice as choice
from exporter.kernel.options import option as option
from exporter.kernel.options import parse_bool as parse_bool
from exporter.kernel.options import parse_count as parse_count
from exporter.kernel.options import parse_duration as parse_duration
from exporter.kernel.options import parse_option as parse_option
from exporter.kernel.options import parse_positive_float as parse_positive_float
from exporter.kernel.options import parse_positive_int as parse_positive_int
from exporter.kernel.options import parse_size as parse_size
from exporter.kernel.options import show_default as show_default
from exporter.schema.findings import Thresholds

DEFAULT_PORT = 9479
DEFAULT_SOCKET = wire.DEFAULT_SOCKET
DEFAULT_AUDIENCE = wire.DEFAULT_AUDIENCE
COLLECTORS = ("cpu", "nvml", "vllm", "probe")

S = TypeVar("S")  # a collector's settings dataclass


@dataclass(frozen=True)
class Engine:
    """An engine whose own metric families the daemon scrapes and passes through."""

    name: str  # as in the flags (`--sglang.target`) and the pod annotation `.../engine`
    prefix: str  # its families: those whose name starts with this; the rest of its page is dropped
    default_path: str  # where it serves the Prometheus text format


# TensorRT-LLM serves Prometheus text at /prometheus/metrics; its /metrics is JSON iteration stats.
ENGINES: dict[str, Engine] = {
    e.name: e
    for e in (
        Engine("vllm", "vllm:", "/metrics"),
        Engine("sglang", "sglang:", "/metrics"),
        Engine("trtllm", "trtllm_", "/prometheus/metrics"),
    )
}


@dataclass(frozen=True)
class Target:
    """One engine's metrics endpoint; `pod` (and `namespace`, when known) become labels of its
    passed-through samples, `engine` (a key of `ENGINES`) says which families of its page are kept.
    Discovered pods always carry their namespace: two `vllm-0` of two namespaces stay two series."""

    url: str
    pod: str
    engine: str = "vllm"
    namespace: str = ""


# ---- value parsers: each takes the raw value (str from flags/env, any type from YAML) ----------------

MAX_APPLY_INTERVAL = 1.5  # under the probe's 2 s send timeout: a probe blocked on a parked connection


def parse_apply_interval(raw: Any) -> float:
    """A duration up to MAX_APPLY_INTERVAL, or 0 (off). Longer, a probe whose round fills the socket
    buffer of its parked connection would give up sending (shipper.SEND_TIMEOUT) and reconnect."""
    if not isinstance(raw, bool) and str(raw).strip() in ("0", "0s", "0ms", "0.0"):
        return 0.0
    seconds = parse_duration(raw)
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


def _target_from(raw: Any, engine: Engine) -> Target:
    if isinstance(raw, Mapping):
        unknown = set(raw) - {"url", "pod", "namespace"}
        if unknown:
            raise ValueError(f"unknown target field(s) {sorted(unknown)}; expected url, pod and namespace")
        url, pod, namespace = raw.get("url"), raw.get("pod"), raw.get("namespace")
    else:
        url, pod, namespace = raw, None, None
    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"{raw!r} has no url")
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http(s) URL (e.g. http://127.0.0.1:8000{engine.default_path})")
    if parts.path in ("", "/"):
        url = url.rstrip("/") + engine.default_path
    name = str(pod).strip() if pod is not None else parts.netloc
    if not name:
        raise ValueError(f"{raw!r} has an empty pod name")
    return Target(url=url, pod=name, engine=engine.name, namespace=str(namespace or "").strip())


def parse_targets(raw: Any, engine: str = "vllm") -> tuple[Target, ...]:
    """A list (YAML) or a comma-separated string (env) of URLs or `{url, pod}` mappings, all of one
    engine; a URL without a path gets the engine's (`/metrics`, TensorRT-LLM's `/prometheus/metrics`)."""
    if raw is None:
        return ()
    items: Sequence[Any]
    if isinstance(raw, str):
        items = [part for part in raw.split(",") if part.strip()]
    elif isinstance(raw, (list, tuple)):
        items = raw
    else:
        items = [raw]
    targets = tuple(_target_from(item, ENGINES[engine]) for item in items)
    pods = [(t.namespace, t.pod) for t in targets]
    duplicates = sorted({p for p in pods if pods.count(p) > 1})
    if duplicates:
        namespace, pod = duplicates[0]
        where = f" in namespace {namespace!r}" if namespace else ""
        raise ValueError(f"two targets share the pod name {pod!r}{where}; give each a distinct pod")
    return targets


def targets_of(engine: str) -> Callable[[Any], tuple[Target, ...]]:
    """The parser of one engine's target list (`--sglang.target`, `trtllm.targets`, ...)."""

    def parse(raw: Any) -> tuple[Target, ...]:
        return parse_targets(raw, engine)

    return parse


# ---- the option table ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """The daemon's resolved configuration. Field metadata is the option table."""

    web_listen_address: str = option(
        f":{DEFAULT_PORT}",
        "web.listen-address",
        parse_address,
        "Address for /metrics, /healthz and / (':9479' = every interface; 9400 is dcgm-exporter's).",
        metavar="ADDR",
    )
    web_config_file: str = option(
        "",
        "web.config.file",
        parse_text,
        "TLS and basic auth for every endpoint, from a web configuration file in exporter-toolkit's format "
        "(tls_server_config, basic_auth_users).",
        metavar="PATH",
    )
    web_schemas: bool = option(
        False,
        "web.schemas",
        parse_bool,
        "Serve /schemas: the exposed schemas' hashes, findings and structure with every literal value "
        "redacted. Off by default.",
    )
    web_schemas_registry: int = option(
        0,
        "web.schemas-registry",
        parse_count,
        "Serve /schemas/registry, for gdx warm: the full text, literal values included, of up to N of this "
        "node's most requested static schemas (a family of one schema without a dynamic_schema warning or "
        "error, kept while it is the only one). 0 (the default): not served.",
        metavar="N",
    )
    log_level: str = option(
        "info",
        "log.level",
        choice("debug", "info", "warning", "error"),
        "Log level: debug, info, warning, error.",
        metavar="LEVEL",
    )
    log_format: str = option(
        "logfmt", "log.format", choice("logfmt", "json"), "Log line format: logfmt or json.", metavar="FORMAT"
    )
    metrics_profile: str = option(
        "full",
        "metrics.profile",
        parse_profile,
        "Which series of the three large sources go on /metrics: full (all), or minimal: of the per-schema"
        ' histograms only the le="0.005" and +Inf buckets, of each core only its idle seconds, of the'
        " engines' own families only those the dashboard charts. The alerts and the dashboard work on both"
        " (docs/metrics.md: the series budget).",
        metavar="full|minimal",
    )
    collector_cpu: bool = option(True, "collector.cpu", parse_bool, "Per-core CPU seconds (psutil).")
    collector_nvml: bool = option(True, "collector.nvml", parse_bool, "GPU gauges from NVML.")
    collector_vllm: bool = option(
        True,
        "collector.vllm",
        parse_bool,
        "Scrape the engines' metrics targets (vLLM, SGLang, TensorRT-LLM) and pass their families through.",
    )
    collector_probe: bool = option(True, "collector.probe", parse_bool, "Receive in-engine probe snapshots.")
    collector_timeout: float = option(
        5.0,
        "collector.timeout",
        parse_duration,
        "Longest a scrape waits for the cpu, nvml and probe sources before marking one failed.",
        metavar="DURATION",
    )
    vllm_targets: tuple[Target, ...] = option(
        (),
        "vllm.target",
        parse_targets,
        "vLLM /metrics URL to scrape; repeat the flag for more (env: comma-separated; YAML: list of URLs"
        " or {url, pod, namespace}). The pod label defaults to host:port; namespace to none.",
        yaml_key="vllm.targets",
        repeat=True,
        metavar="URL",
    )
    vllm_timeout: float = option(
        3.0,
        "vllm.timeout",
        parse_duration,
        "Per-target scrape timeout, whole body included (every engine's targets).",
        metavar="DURATION",
    )
    vllm_max_body_bytes: int = option(
        16 * 2**20,
        "vllm.max-body-bytes",
        parse_size,
        "Largest metrics page accepted from a target of any engine; larger marks the target down.",
        metavar="SIZE",
    )
    vllm_max_series: int = option(
        10_000,
        "vllm.max-series",
        parse_positive_int,
        "Most samples of its engine's families (vllm:*, sglang:*, trtllm_*) accepted from one target"
        " (vLLM serves a few hundred, SGLang about 500); more marks it down.",
        metavar="N",
    )
    vllm_passthrough: bool = option(
        True,
        "vllm.passthrough",
        parse_bool,
        "Re-export the targets' vllm:* families with a pod label (off when Prometheus scrapes vLLM itself).",
    )
    sglang_targets: tuple[Target, ...] = option(
        (),
        "sglang.target",
        targets_of("sglang"),
        "SGLang metrics URL to scrape (no path: /metrics); repeat for more, as --vllm.target.",
        yaml_key="sglang.targets",
        repeat=True,
        metavar="URL",
    )
    sglang_passthrough: bool = option(
        True,
        "sglang.passthrough",
        parse_bool,
        "Re-export the SGLang targets' sglang:* families (its grammar metrics among them) with a pod label.",
    )
    trtllm_targets: tuple[Target, ...] = option(
        (),
        "trtllm.target",
        targets_of("trtllm"),
        "TensorRT-LLM metrics URL to scrape (no path: /prometheus/metrics, where trtllm-serve serves"
        " Prometheus text); repeat for more, as --vllm.target.",
        yaml_key="trtllm.targets",
        repeat=True,
        metavar="URL",
    )
    trtllm_passthrough: bool = option(
        True,
        "trtllm.passthrough",
        parse_bool,
        "Re-export the TensorRT-LLM targets' trtllm_* families with a pod label.",
    )
    probe_socket: str = option(
        DEFAULT_SOCKET,
        "probe.socket",
        parse_text,
        "Unix socket the in-engine probes send snapshots to (a hostPath shared with engine pods). "
        "Empty: none (probes over TCP only).",
        metavar="PATH",
    )
    probe_socket_group: str = option(
        "",
        "probe.socket-group",
        parse_text,
        "Group (name or id) to give the socket, which is mode 0660: the engine pods' group. "
        "Empty: the daemon's.",
        metavar="GROUP",
    )
    probe_allowed_uids: tuple[int, ...] = option(
        (),
        "probe.allowed-uids",
        parse_uids,
        "User ids whose processes may send snapshots (checked with SO_PEERCRED; others are refused and "
        "counted). Empty: whoever the socket's mode lets in.",
        metavar="UID,...",
    )
    probe_listen_address: str = option(
        "",
        "probe.listen-address",
        parse_listen_address,
        "HOST:PORT (:9478 for every address of the daemon's pod; $(POD_IP):9478 from the downward API for "
        "one) where probes may also connect over TCP: behind a Service "
        "with internalTrafficPolicy Local, or on a hostPort. Each connection must show its pod's "
        "projected ServiceAccount token, checked with a TokenReview (kubernetes.* credentials). Empty: "
        "the unix socket only.",
        metavar="HOST:PORT",
    )
    probe_token_audience: str = option(
        DEFAULT_AUDIENCE,
        "probe.token-audience",
        parse_text,
        "The audience a probe's token must be minted for (the projected volume's audience).",
        metavar="AUDIENCE",
    )
    probe_max_schemas: int = option(
        50,
        "probe.max-schemas",
        parse_positive_int,
        "Schema hashes exposed per node (top by recent compile seconds); the rest add up in "
        'schema_hash="other".',
        metavar="N",
    )
    probe_max_families: int = option(
        50,
        "probe.max-families",
        parse_positive_int,
        "Schema families exposed per node (top by recent compile seconds); the rest add up in "
        'family="other".',
        metavar="N",
    )
    probe_max_engines: int = option(
        64,
        "probe.max-engines",
        parse_positive_int,
        "Engines the daemon keeps per node: a hello beyond it is refused and counted, unless a"
        " disconnected engine can make room.",
        metavar="N",
    )
    probe_max_engines_per_pod: int = option(
        16,
        "probe.max-engines-per-pod",
        parse_positive_int,
        "Engines the daemon keeps per pod (over TCP the pod its token's TokenReview names): a hello beyond"
        " it is refused and counted, unless a disconnected engine of the pod can make room.",
        metavar="N",
    )
    probe_engine_ttl: float = option(
        120.0,
        "probe.engine-ttl",
        parse_duration,
        "Drop an engine and its series when its probe has sent nothing for this long.",
        metavar="DURATION",
    )
    probe_apply_interval: float = option(
        1.0,
        "probe.apply-interval",
        parse_apply_interval,
        "Probe connections are read, and their snapshots applied, in one pass this often (and before"
        " every scrape, so /metrics is never behind); between passes a connection is parked and the kernel"
        " holds what its probe sends: one wake-up of the daemon instead of one per engine. 0: each message"
        " is read and applied as it arrives.",
        metavar="DURATION",
    )
    probe_titles: bool = option(
        True,
        "probe.titles",
        parse_bool,
        "Put a schema's sanitised top-level title ([A-Za-z0-9_.-], 64 chars) in schema_info's title label,"
        " and a family's name (its title, else one built from its structure) in family_info's name label.",
    )
    shape_window: float = option(
        600.0,
        "shape.window",
        parse_duration,
        "Sliding window for shape_variants, family_variants, what varies and dynamic_schema: the variants"
        " and requests counted are those within it.",
        metavar="DURATION",
    )
    lint_depth: int = lint_field("lint_depth")
    lint_max_items: int = lint_field("lint_max_items")
    lint_union_depth: int = lint_field("lint_union_depth")
    lint_union_width: int = lint_field("lint_union_width")
    lint_enum_size: int = lint_field("lint_enum_size")
    lint_quantifier: int = lint_field("lint_quantifier")
    lint_budget: float = lint_field("lint_budget")
    lint_budget_nodes: int = lint_field("lint_budget_nodes")
    lint_dynamic_reuse: float = lint_field("lint_dynamic_reuse")
    lint_dynamic_seconds: float = lint_field("lint_dynamic_seconds")
    lint_dynamic_span: float = lint_field("lint_dynamic_span")
    nvml_retry_interval: float = option(
        60.0,
        "nvml.retry-interval",
        parse_duration,
        "How long to wait before retrying NVML initialisation after it failed.",
        metavar="DURATION",
    )
    kubernetes_enabled: bool = option(
        False,
        "kubernetes.enabled",
        parse_bool,
        "Discover engine pods on this node through the Kubernetes API (in-cluster service account).",
    )
    kubernetes_node_name: str = option(
        "",
        "kubernetes.node-name",
        parse_text,
        "This node's name; defaults to $NODE_NAME (set it from the downward API spec.nodeName).",
        metavar="NAME",
    )
    kubernetes_namespaces: tuple[str, ...] = option(
        (),
        "kubernetes.namespaces",
        parse_namespaces,
        "Namespaces to find engine pods in, each listed on its own (RBAC: a Role with list on pods in each,"
        " no ClusterRole). Empty: one list over every namespace (a ClusterRole).",
        metavar="NS,...",
    )
    kubernetes_pod_selector: str = option(
        "",
        "kubernetes.pod-selector",
        parse_text,
        "Label selector for engine pods (e.g. app.kubernetes.io/name=vllm); empty = every pod on the node"
        " that carries the scrape annotation.",
        metavar="SELECTOR",
    )
    kubernetes_pod_annotation: str = option(
        SCRAPE_ANNOTATION,
        "kubernetes.pod-annotation",
        parse_text,
        "Annotation that opts a pod in when set to 'true' (ignored when a pod selector is set). The pod's"
        " '<prefix>/engine' annotation names its engine (vllm, the default; sglang; trtllm), and"
        " '<prefix>/port' and '<prefix>/path' override the port and the engine's path.",
        metavar="KEY",
    )
    kubernetes_default_port: int = option(
        8000,
        "kubernetes.default-port",
        parse_port,
        "Port of a discovered pod's /metrics when neither its '<prefix>/port' annotation nor its spec names"
        " one (a container port named http or metrics, else the first declared).",
        metavar="PORT",
    )
    kubernetes_refresh_interval: float = option(
        30.0,
        "kubernetes.refresh-interval",
        parse_duration,
        "How often the pod list is refreshed.",
        metavar="DURATION",
    )
    kubernetes_api_server: str = option(
        "https://kubernetes.default.svc",
        "kubernetes.api-server",
        parse_text,
        "Kubernetes API address.",
        metavar="URL",
    )
    kubernetes_token_file: str = option(
        "/var/run/secrets/kubernetes.io/serviceaccount/token",
        "kubernetes.token-file",
        parse_text,
        "Service-account token (re-read on every list: projected tokens rotate).",
        metavar="PATH",
    )
    kubernetes_ca_file: str = option(
        "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
        "kubernetes.ca-file",
        parse_text,
        "CA bundle for the API server; empty uses the system store.",
        metavar="PATH",
    )

    def scrape_targets(self) -> tuple[Target, ...]:
        """The static targets of every engine (`--vllm.target`, `--sglang.target`, `--trtllm.target`)."""
        return (*self.vllm_targets, *self.sglang_targets, *self.trtllm_targets)

    def collector_enabled(self, name: str) -> bool:
        return bool(getattr(self, f"collector_{name}"))

    def settings(self, cls: type[S], prefix: str, **given: Any) -> S:
        """A collector's settings dataclass filled from the options named `<prefix>_<field>` (the option
        table above is the one list of them; nothing is copied by hand), `given` for the fields that
        are not such an option. A field that is neither raises: a renamed option cannot go unnoticed."""
        values: dict[str, Any] = {}
        for item in dataclasses.fields(cls):  # type: ignore[arg-type]
            option = f"{prefix}_{item.name}"
            if item.name in given:
                values[item.name] = given[item.name]
            elif option in OPTION_NAMES:
                values[item.name] = getattr(self, option)
            else:
                raise TypeError(f"{cls.__name__}.{item.name}: no option {option} and no value given")
        return cls(**values)

    def lint_thresholds(self) -> Thresholds:
        """The lint rules' limits from the `lint.*` options (the daemon's analysis and `gdx lint` alike)."""
        return LintOptions(**{f.name: getattr(self, f.name) for f in LINT_OPTIONS}).thresholds()


OPTIONS: tuple[dataclasses.Field[Any], ...] = dataclasses.fields(Config)
OPTION_NAMES = frozenset(option.name for option in OPTIONS)
_BY_YAML = {f.metadata["yaml"]: f for f in OPTIONS}


def add_flags(parser: argparse.ArgumentParser) -> None:
    """Adds every option as a flag whose default is 'not given', so precedence can be applied later."""
    parser.add_argument(
        "--config.file",
        dest="config_file",
        metavar="PATH",
        default=argparse.SUPPRESS,
        help=f"YAML configuration file (env {ENV_PREFIX}CONFIG_FILE). Keys are the flag names, e.g."
        " 'web: {listen_address: \":9479\"}'.",
    )
    for f in OPTIONS:
        add_flag(parser, f, show_env=True)


def _flatten(doc: Any, prefix: str = "") -> dict[str, Any]:
    """Nested YAML mappings to dotted keys; a mapping under a known key (a target) stays whole."""
    if not isinstance(doc, Mapping):
        raise ConfigError(prefix or "<root>", f"expected a mapping, got {type(doc).__name__}", "config file")
    flat: dict[str, Any] = {}
    for key, value in doc.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        if dotted in _BY_YAML or not isinstance(value, Mapping):
            flat[dotted] = value
        else:
            flat.update(_flatten(value, dotted))
    return flat


def read_yaml(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            doc = yaml.safe_load(handle)
    except OSError as err:
        raise ConfigError("config.file", f"cannot read {path}: {err.strerror or err}") from None
    except yaml.YAMLError as err:
        raise ConfigError("config.file", f"{path} is not valid YAML: {err}") from None
    if doc is None:
        return {}
    flat = _flatten(doc)
    for key in flat:
        if key not in _BY_YAML:
            known = ", ".join(sorted(_BY_YAML))
            raise ConfigError(key, f"unknown key in {path} (known keys: {known})", "config file")
    return flat


def _check_target_urls(config: Config) -> None:
    """One URL is one engine: the same URL among two engines' targets is a mistake."""
    seen: dict[str, str] = {}
    for target in config.scrape_targets():
        first = seen.setdefault(target.url, target.engine)
        if first != target.engine:
            raise ConfigError(
                f"{target.engine}.target", f"{target.url} is also a {first}.target: one URL, one engine"
            )


def load(flags: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Resolves defaults < YAML < environment < flags into a validated `Config`."""
    flags = dict(flags or {})
    environ = os.environ if environ is None else environ
    config_file = flags.pop("config_file", None) or environ.get(ENV_PREFIX + "CONFIG_FILE")
    from_yaml = read_yaml(config_file) if config_file else {}
    values: dict[str, Any] = {}
    for f in OPTIONS:
        meta = f.metadata
        if f.name in flags:
            raw, origin = flags[f.name], "--" + meta["flag"]
        elif meta["env"] in environ:
            raw, origin = environ[meta["env"]], meta["env"]
        elif meta["yaml"] in from_yaml:
            raw, origin = from_yaml[meta["yaml"]], f"{config_file}: {meta['yaml']}"
        else:
            continue
        values[f.name] = parse_option(f, raw, origin)
    config = Config(**values)
    _check_target_urls(config)
    if config.kubernetes_enabled and not config.kubernetes_node_name:
        node = environ.get("NODE_NAME", "").strip()
        if not node:
            raise ConfigError(
                "kubernetes.node-name",
                "kubernetes discovery is on but the node name is unknown: set NODE_NAME from the downward"
                " API (fieldRef spec.nodeName) or --kubernetes.node-name",
            )
        config = dataclasses.replace(config, kubernetes_node_name=node)
    return config
