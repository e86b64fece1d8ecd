"""Every option by flag, environment variable and YAML key; precedence; documented errors (exit 2)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from exporter import cli
from exporter.daemon import config, options
from exporter.daemon.config import Config, ConfigError
from exporter.daemon.targets import Target
from exporter.kernel import lint_options
from exporter.kernel.options import parse_bool
from exporter.schema.findings import Thresholds
from tools.harness import ROOT

# A valid raw value (as text) for every option and the parsed value it must become.
SAMPLES: dict[str, tuple[str, Any]] = {
    "web_listen_address": ("127.0.0.1:9999", "127.0.0.1:9999"),
    "log_level": ("debug", "debug"),
    "log_format": ("json", "json"),
    "collector_cpu": ("false", False),
    "collector_nvml": ("false", False),
    "collector_vllm": ("false", False),
    "collector_probe": ("false", False),
    "collector_timeout": ("250ms", 0.25),
    "vllm_targets": (
        "http://10.0.0.1:8000/metrics",
        (Target("http://10.0.0.1:8000/metrics", "10.0.0.1:8000"),),
    ),
    "vllm_timeout": ("2m", 120.0),
    "vllm_max_body_bytes": ("1MiB", 2**20),
    "vllm_max_series": ("500", 500),
    "vllm_passthrough": ("off", False),
    "sglang_targets": (
        "http://10.0.0.2:30000",
        (Target("http://10.0.0.2:30000/metrics", "10.0.0.2:30000", "sglang"),),
    ),
    "sglang_passthrough": ("off", False),
    "trtllm_targets": (
        "http://10.0.0.3:8000",
        (Target("http://10.0.0.3:8000/prometheus/metrics", "10.0.0.3:8000", "trtllm"),),
    ),
    "trtllm_passthrough": ("off", False),
    "probe_socket": ("/tmp/x.sock", "/tmp/x.sock"),
    "web_schemas": ("true", True),
    "web_schemas_registry": ("20", 20),
    "web_config_file": ("/etc/gdx/web.yml", "/etc/gdx/web.yml"),
    "probe_socket_group": ("engines", "engines"),
    "probe_allowed_uids": ("1000,0", (1000, 0)),
    "probe_listen_address": (":9478", ":9478"),
    "probe_token_audience": ("gdx-test", "gdx-test"),
    "probe_max_schemas": ("200", 200),
    "probe_max_families": ("20", 20),
    "probe_max_engines": ("32", 32),
    "probe_max_engines_per_pod": ("4", 4),
    "probe_engine_ttl": ("5m", 300.0),
    "probe_apply_interval": ("0", 0.0),
    "probe_max_hold": ("1m", 60.0),
    "metrics_profile": ("minimal", "minimal"),
    "probe_titles": ("off", False),
    "shape_window": ("5m", 300.0),
    "guard_compile_budget": ("2s", 2.0),
    "guard_verdict_ttl": ("1h", 3600.0),
    "lint_depth": ("4", 4),
    "lint_max_items": ("50", 50),
    "lint_union_depth": ("2", 2),
    "lint_union_width": ("16", 16),
    "lint_enum_size": ("128", 128),
    "lint_quantifier": ("16", 16),
    "lint_budget": ("250ms", 0.25),
    "lint_budget_nodes": ("5000", 5000),
    "lint_dynamic_reuse": ("1.5", 1.5),
    "lint_dynamic_seconds": ("250ms", 0.25),
    "lint_dynamic_span": ("1m", 60.0),
    "nvml_retry_interval": ("10s", 10.0),
    "kubernetes_enabled": ("true", True),
    "kubernetes_node_name": ("node-a", "node-a"),
    "kubernetes_namespaces": ("team-a,team-b", ("team-a", "team-b")),
    "kubernetes_pod_selector": ("app=vllm", "app=vllm"),
    "kubernetes_pod_annotation": ("example.com/scrape", "example.com/scrape"),
    "kubernetes_default_port": ("8080", 8080),
    "kubernetes_refresh_interval": ("1h", 3600.0),
    "kubernetes_api_server": ("https://10.0.0.2:6443", "https://10.0.0.2:6443"),
    "kubernetes_token_file": ("/tmp/token", "/tmp/token"),
    "kubernetes_ca_file": ("/tmp/ca", "/tmp/ca"),
}
INVALID: dict[str, str] = {
    "web_listen_address": "9479",
    "log_level": "loud",
    "log_format": "xml",
    "collector_cpu": "maybe",
    "collector_timeout": "soon",
    "vllm_targets": "ftp://x/metrics",
    "sglang_targets": "ftp://x/metrics",
    "trtllm_targets": "http://",
    "vllm_timeout": "-1s",
    "vllm_max_body_bytes": "lots",
    "vllm_max_series": "0",
    "nvml_retry_interval": "0s",
    "probe_max_schemas": "0",
    "probe_max_families": "0",
    "probe_max_engines": "0",
    "probe_max_engines_per_pod": "-1",
    "lint_dynamic_reuse": "-2",
    "lint_dynamic_seconds": "often",
    "probe_allowed_uids": "root",
    "probe_listen_address": "9478",
    "probe_engine_ttl": "never",
    "probe_apply_interval": "3s",  # over the probe's send timeout
    "probe_max_hold": "-1s",
    "guard_compile_budget": "-1s",
    "guard_verdict_ttl": "0",
    "metrics_profile": "tiny",
    "lint_depth": "0",
    "lint_budget": "-1s",
    "lint_budget_nodes": "many",
    "kubernetes_default_port": "70000",
}
OPTIONS = {f.name: f for f in options.OPTIONS}


def test_every_option_has_a_sample() -> None:
    assert set(SAMPLES) == set(OPTIONS)


def test_defaults() -> None:
    cfg = config.load({}, environ={})
    assert cfg.web_listen_address == ":9479"
    assert cfg.probe_socket == "/run/guided-decoding-exporter/probe.sock"
    assert all(cfg.collector_enabled(name) for name in options.COLLECTORS)
    assert cfg.vllm_targets == () and cfg.vllm_passthrough is True


def _flag_args(name: str, raw: str) -> list[str]:
    meta = OPTIONS[name].metadata
    if meta["parse"] is parse_bool:
        return [("--" if raw in ("true", "on") else "--no-") + meta["flag"]]
    return ["--" + meta["flag"], raw]


def _parse_flags(args: list[str]) -> dict[str, Any]:
    ns = cli._parser().parse_args(["serve", *args])
    flags = vars(ns)
    flags.pop("command")
    return flags


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_flag_sets_option(name: str) -> None:
    raw, want = SAMPLES[name]
    cfg = config.load(_parse_flags(_flag_args(name, raw)), environ={"NODE_NAME": "n"})
    assert getattr(cfg, name) == want


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_env_sets_option(name: str) -> None:
    raw, want = SAMPLES[name]
    cfg = config.load({}, environ={OPTIONS[name].metadata["env"]: raw, "NODE_NAME": "n"})
    assert getattr(cfg, name) == want


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_yaml_sets_option(name: str, tmp_path: Path) -> None:
    raw, want = SAMPLES[name]
    first, _, rest = OPTIONS[name].metadata["yaml"].partition(".")
    value: Any = [raw] if name == "vllm_targets" else raw
    path = tmp_path / "gdx.yaml"
    import yaml

    path.write_text(yaml.safe_dump({first: {rest: value}}))
    cfg = config.load({"config_file": str(path)}, environ={"NODE_NAME": "n"})
    assert getattr(cfg, name) == want


def test_precedence_flag_over_env_over_yaml(tmp_path: Path) -> None:
    path = tmp_path / "gdx.yaml"
    path.write_text("vllm:\n  timeout: 7s\n  max_body_bytes: 1KiB\nlog:\n  level: error\n")
    env = {"GDX_VLLM_TIMEOUT": "8s", "GDX_LOG_LEVEL": "warning", "GDX_CONFIG_FILE": str(path)}
    cfg = config.load(_parse_flags(["--vllm.timeout", "9s"]), environ=env)
    assert (cfg.vllm_timeout, cfg.log_level, cfg.vllm_max_body_bytes) == (9.0, "warning", 1024)


def test_repeated_target_flag_and_yaml_mappings(tmp_path: Path) -> None:
    cfg = config.load(
        _parse_flags(["--vllm.target", "http://a:1", "--vllm.target", "http://b:2/m"]), environ={}
    )
    assert cfg.vllm_targets == (Target("http://a:1/metrics", "a:1"), Target("http://b:2/m", "b:2"))
    path = tmp_path / "gdx.yaml"
    path.write_text("vllm:\n  targets:\n    - {url: 'http://a:1/metrics', pod: vllm-0}\n    - http://b:2\n")
    cfg = config.load({"config_file": str(path)}, environ={})
    assert [t.pod for t in cfg.vllm_targets] == ["vllm-0", "b:2"]
    # one pod name in two namespaces is two targets; the same namespace twice is refused
    path.write_text(
        "vllm:\n  targets:\n    - {url: 'http://a:1', pod: vllm-0, namespace: team-a}\n"
        "    - {url: 'http://b:2', pod: vllm-0, namespace: team-b}\n"
    )
    cfg = config.load({"config_file": str(path)}, environ={})
    assert [(t.namespace, t.pod) for t in cfg.vllm_targets] == [("team-a", "vllm-0"), ("team-b", "vllm-0")]
    path.write_text(path.read_text().replace("team-b", "team-a"))
    with pytest.raises(ConfigError, match="share the pod name 'vllm-0' in namespace 'team-a'"):
        config.load({"config_file": str(path)}, environ={})


def test_env_target_list_is_comma_separated() -> None:
    cfg = config.load({}, environ={"GDX_VLLM_TARGET": "http://a:1/metrics, http://b:2/metrics"})
    assert [t.url for t in cfg.vllm_targets] == ["http://a:1/metrics", "http://b:2/metrics"]


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_value_names_key_and_origin(name: str) -> None:
    meta = OPTIONS[name].metadata
    with pytest.raises(ConfigError) as err:
        config.load({}, environ={meta["env"]: INVALID[name]})
    assert err.value.key == meta["flag"]
    assert meta["flag"] in str(err.value) and meta["env"] in str(err.value)


def test_unknown_yaml_key_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "gdx.yaml"
    path.write_text("vllm:\n  tiemout: 3s\n")
    with pytest.raises(ConfigError, match=r"vllm\.tiemout.*unknown key"):
        config.load({"config_file": str(path)}, environ={})


@pytest.mark.parametrize(
    ("text", "problem"),
    [("web: [1, 2\n", "not valid YAML"), ("- a\n- b\n", "expected a mapping")],
)
def test_broken_yaml_is_an_error(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "gdx.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=problem):
        config.load({"config_file": str(path)}, environ={})


def test_missing_config_file() -> None:
    with pytest.raises(ConfigError, match=r"config\.file: cannot read /nonexistent/gdx.yaml"):
        config.load({"config_file": "/nonexistent/gdx.yaml"}, environ={})


def test_duplicate_pod_names_rejected() -> None:
    with pytest.raises(ConfigError, match="share the pod name 'x:1'"):
        config.load({}, environ={"GDX_VLLM_TARGET": "http://x:1,http://x:1/metrics"})


def test_kubernetes_needs_a_node_name() -> None:
    with pytest.raises(ConfigError, match="NODE_NAME"):
        config.load({}, environ={"GDX_KUBERNETES_ENABLED": "true"})
    cfg = config.load({}, environ={"GDX_KUBERNETES_ENABLED": "true", "NODE_NAME": "gpu-node-7"})
    assert cfg.kubernetes_node_name == "gpu-node-7"


def test_cli_exits_2_with_a_clear_message_before_starting(tmp_path: Path) -> None:
    sock = tmp_path / "probe.sock"
    proc = subprocess.run(
        [sys.executable, "-m", "exporter", "serve", "--vllm.timeout", "fast", "--probe.socket", str(sock)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "gdx serve: invalid configuration: vllm.timeout (from --vllm.timeout): "
        "'fast' is not a duration (e.g. 500ms, 5s, 1m)"
    )
    assert not sock.exists()  # nothing started


def test_cli_rejects_unknown_flag() -> None:
    assert (
        subprocess.run(
            [sys.executable, "-m", "exporter", "serve", "--vllm.targt", "x"], capture_output=True, timeout=60
        ).returncode
        == 2
    )


def test_help_lists_every_flag_and_env_var() -> None:
    text = subprocess.run(
        [sys.executable, "-m", "exporter", "serve", "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    for f in options.OPTIONS:
        assert "--" + f.metadata["flag"] in text
        assert f.metadata["env"] in text.replace("\n", "").replace(" ", "")


def _subcommand(name: str) -> argparse.ArgumentParser:
    (commands,) = [a for a in cli._parser()._actions if isinstance(a, argparse._SubParsersAction)]
    parser: argparse.ArgumentParser = commands.choices[name]
    return parser


def _lint_flag_names(parser: argparse.ArgumentParser) -> set[str]:
    flags = {flag for action in parser._actions for flag in action.option_strings}
    return {flag for flag in flags if flag.startswith("--lint.")}


def test_lint_and_serve_take_the_same_lint_flags() -> None:
    serve, lint = _lint_flag_names(_subcommand("serve")), _lint_flag_names(_subcommand("lint"))
    assert serve == lint
    assert "--lint.depth" in serve and "--lint.budget-nodes" in serve


def test_lint_and_serve_build_the_same_thresholds_from_the_same_flags() -> None:
    args = [arg for f in lint_options.LINT_OPTIONS for arg in _flag_args(f.name, SAMPLES[f.name][0])]
    from_serve = config.load(_parse_flags(args), environ={}).lint_thresholds()
    lint_args = vars(_subcommand("lint").parse_args([*args, "schema.json"]))
    from_lint = lint_options.lint_thresholds_from(lint_args)
    assert from_lint == from_serve
    assert (from_lint.depth, from_lint.budget.max_nodes, from_lint.budget.max_seconds) == (4, 5000, 0.25)


def test_lint_threshold_defaults_are_the_rules_defaults() -> None:
    assert lint_options.lint_thresholds_from({}) == Thresholds() == Config().lint_thresholds()


def test_lint_thresholds_reject_a_bad_value_like_serve() -> None:
    with pytest.raises(ConfigError) as err:
        lint_options.lint_thresholds_from({"lint_depth": "0"})
    assert str(err.value) == (
        "invalid configuration: lint.depth (from --lint.depth): '0' must be greater than zero"
    )


def test_config_is_frozen() -> None:
    cfg = Config()
    with pytest.raises(AttributeError):
        cfg.vllm_timeout = 1  # type: ignore[misc]


def test_configuration_doc_documents_every_option() -> None:
    """docs/reference/flags.md has a table row per option naming its flag, env variable and YAML key."""
    text = (ROOT / "docs" / "reference" / "flags.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `--")]
    for f in options.OPTIONS:
        m = f.metadata
        cells = (f"`--{m['flag']}`", f"`{m['env']}`", f"`{m['yaml']}`")
        assert any(all(c in row for c in cells) for row in rows), f.name


def test_collector_settings_come_from_the_option_table() -> None:
    """Every settings field is its option's value (`Config.settings`), none copied by hand."""
    import dataclasses

    from exporter.daemon import server
    from exporter.daemon.collectors.engines import vllm_settings
    from exporter.daemon.collectors.probe import probe_settings
    from exporter.daemon.discovery import DiscoverySettings

    cfg = config.load(
        {"kubernetes_node_name": "node-7", "kubernetes_default_port": 9000, "vllm_max_series": 123,
         "probe_max_families": 7, "probe_socket_group": "gdx", "vllm_passthrough": False},
        environ={},
    )  # fmt: skip
    built = (
        (server.discovery_settings(cfg), "kubernetes"),
        (vllm_settings(cfg), "vllm"),
        (probe_settings(cfg), "probe"),
    )
    for settings, prefix in built:
        for item in dataclasses.fields(settings):
            option = f"{prefix}_{item.name}"
            if hasattr(cfg, option):
                assert getattr(settings, item.name) == getattr(cfg, option), option
    assert server.discovery_settings(cfg).node_name == "node-7" and vllm_settings(cfg).max_series == 123
    assert probe_settings(cfg).max_families == 7 and vllm_settings(cfg).passthrough is False

    @dataclasses.dataclass
    class Renamed:
        node: str = ""  # no kubernetes_node option

    with pytest.raises(TypeError, match="kubernetes_node"):
        cfg.settings(Renamed, "kubernetes")
    assert cfg.settings(DiscoverySettings, "kubernetes").default_port == 9000
