"""The daemon's option table: `Config`, one field per option, whose metadata names its flag, YAML key,
environment variable and parser (exporter.kernel.options' `option`), so the flags, the environment
variables, the YAML schema, `--help` and the table in docs/configuration.md cannot drift apart. `gdx
lint` takes the `lint.*` options as flags from the same fields, and both commands build their limits
with `Config.lint_thresholds`. Reading them (defaults < YAML < environment < flags) is exporter.daemon.config.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, TypeVar

from exporter import wire
from exporter.daemon.option_parsers import (
    parse_address,
    parse_apply_interval,
    parse_listen_address,
    parse_namespaces,
    parse_off_or_duration,
    parse_port,
    parse_profile,
    parse_text,
    parse_uids,
)
from exporter.daemon.targets import Target, parse_targets, targets_of
from exporter.kernel.lint_options import LINT_OPTIONS, LintOptions, lint_field
from exporter.kernel.names import SCRAPE_ANNOTATION
from exporter.kernel.options import (
    choice,
    option,
    parse_bool,
    parse_count,
    parse_duration,
    parse_positive_int,
    parse_size,
)
from exporter.schema.findings import Thresholds

DEFAULT_PORT = 9479
DEFAULT_SOCKET = wire.DEFAULT_SOCKET
DEFAULT_AUDIENCE = wire.DEFAULT_AUDIENCE
COLLECTORS = ("cpu", "nvml", "vllm", "probe")  # the `collector.*` switches, in the order /metrics shows them

S = TypeVar("S")  # a collector's settings dataclass


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
        "Probe connections are read in one pass this often (and before every scrape, so /metrics is never"
        " behind); between passes a connection is parked and the kernel holds what its probe sends: one"
        " wake-up of the daemon instead of one per engine. 0: each message is read and applied as it"
        " arrives.",
        metavar="DURATION",
    )
    probe_max_hold: float = option(
        15.0,
        "probe.max-hold",
        parse_off_or_duration,
        "The longest a snapshot read in a pass waits to be applied while nothing scrapes: a scrape (and"
        " /schemas) applies every snapshot read first; an API server's snapshots, any that can make a"
        " --guard.compile-budget verdict, and 1 MiB held on a connection are applied at once. Applied"
        " together they cost about half the CPU of one applied each second. 0: applied in every pass.",
        metavar="DURATION",
    )
    probe_titles: bool = option(
        True,
        "probe.titles",
        parse_bool,
        "Put what the titles of a schema's family share (sanitised top-level titles, [A-Za-z0-9_.-], 64"
        " chars; a model named per tenant shows its shared part) in schema_info's title label, and a"
        " family's name (that title, else one built from its structure) in family_info's name label.",
    )
    guard_compile_budget: float = option(
        0.0,
        "guard.compile-budget",
        parse_off_or_duration,
        "A schema whose grammar compiled this long or longer on average on an engine of this node is"
        " refused (HTTP 400, compile_budget) on its next request by every vLLM API server on the node"
        " whose guard is on (GDX_GUARD): the daemon sends them the verdict. 0: off.",
        metavar="DURATION",
    )
    guard_verdict_ttl: float = option(
        86400.0,
        "guard.verdict-ttl",
        parse_duration,
        "How long the daemon keeps a node verdict it has not seen again (a death, a stall, a compile past the"
        " budget) and sends it to the guards that connect: a fixed engine is not refused forever. Each probe"
        " also ages its own copy (GDX_GUARD_VERDICT_SECONDS).",
        metavar="DURATION",
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
