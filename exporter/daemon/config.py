"""Configuration: the daemon's options (exporter.daemon.options, one table), settable by flag,
environment variable or YAML file.

Precedence, lowest first: built-in default, YAML file (`--config.file`), `GDX_*` environment, flags.
Every problem is reported as `ConfigError` naming the key and where the value came from.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Mapping
from typing import Any

import yaml

from exporter.daemon.options import OPTIONS
from exporter.daemon.options import Config as Config  # what `load` returns
from exporter.kernel.options import ENV_PREFIX, add_flag, parse_option
from exporter.kernel.options import ConfigError as ConfigError  # what `load` raises

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
