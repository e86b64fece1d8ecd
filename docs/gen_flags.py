"""docs/reference/flags.md: every option of `gdx serve` (exporter/daemon/options.py, the `lint.*` ones
from exporter/kernel/lint_options.py) as its flag, environment variable, YAML key and default."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from gen_common import REFERENCE, cell, header, row, table

from exporter.daemon.options import OPTIONS
from exporter.kernel.options import ENV_PREFIX, parse_bool, show_default

PAGE = REFERENCE / "flags.md"
HEAD = ("flag", "env", "YAML key", "default", "meaning")


def flag_row(option: dataclasses.Field[Any]) -> str:
    meta = option.metadata
    flag = f"`--{meta['flag']}`"
    if meta["parse"] is parse_bool:
        flag += f" / `--no-{meta['flag']}`"
    elif meta["repeat"]:
        flag += " (repeatable)"
    return row(
        flag,
        f"`{meta['env']}`",
        f"`{meta['yaml']}`",
        f"`{cell(show_default(option.default))}`",
        cell(meta["help"]),
    )


def page() -> str:
    lines = header(
        "Flags and configuration reference",
        "For operators setting up `gdx serve`: every option, as a flag, a `GDX_*` environment variable and a"
        " YAML key, with its default. How they combine, the targets, TLS and the probe's environment:"
        " [configuration.md](../configuration.md).",
        "docs/gen_flags.py",
        "the option table, `exporter/daemon/options.py` and `exporter/kernel/lint_options.py`",
    )
    lines += [
        "Flags win over the environment, which wins over the file (`--config.file`). A YAML key with dots",
        'is nested: `web.listen_address` is `web: {listen_address: ":9479"}`. Invalid configuration exits',
        "with code 2 before anything starts. `gdx lint` and `gdx hash` take the `--lint.*` flags too.",
        "",
    ]
    config_file = row(
        "`--config.file`",
        f"`{ENV_PREFIX}CONFIG_FILE`",
        "-",
        "`none`",
        "YAML file with any of the keys below.",
    )
    lines += [*table(HEAD, [config_file, *map(flag_row, OPTIONS)]), ""]
    return "\n".join(lines)


def pages() -> dict[Path, str]:
    return {PAGE: page()}
