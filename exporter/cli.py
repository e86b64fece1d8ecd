"""`gdx`: the command line. `gdx serve` runs the node daemon; `gdx hash` and `gdx lint` analyse schemas;
`gdx inject` and `gdx probe-files` put the probe into stock engine pods."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Callable, Sequence

from exporter import __version__
from exporter.daemon import config

# Each subcommand's `--help` ends with examples, one command a line, as node_exporter's does. Every line
# that starts with `gdx ` parses (tests/unit/test_cli_help.py).
EXAMPLES: dict[str, tuple[str, ...]] = {
    "serve": (
        "gdx serve                      # :9479; probes on the default socket; engine pods discovered",
        "gdx serve --vllm.target http://127.0.0.1:8000/metrics --no-collector.nvml",
        "gdx serve --config.file /etc/gdx/config.yaml --log.level debug",
        "GDX_METRICS_PROFILE=minimal gdx serve     # every flag is also a GDX_* variable",
    ),
    "hash": (
        "gdx hash schema.json           # the schema_hash and shape_hash the dashboards show",
        "gdx hash --client openai app.models:Invoice",
        "gdx hash --tool-call-parser hermes requests.jsonl",
    ),
    "lint": (
        "gdx lint schemas/*.json requests.jsonl    # exit 1 on an error finding",
        "gdx lint --engine vllm==0.33.0 requests.jsonl",
        "gdx lint --client openai app.models:Invoice",
        "gdx lint --format github schemas/*.json   # annotations in a GitHub Actions job",
        "gdx lint --format sarif schemas/*.json > gdx.sarif",
        "gdx lint --write-baseline gdx-baseline.json schemas/*.json",
        "gdx lint --baseline gdx-baseline.json schemas/*.json",
        "gdx lint --engine vllm --write-guard guard.json requests.jsonl",
    ),
    "fix": (
        "gdx fix --tokenizer tokenizer.json --out fix/ requests.jsonl",
        "gdx fix --tokenizer tokenizer.json --out fix/ --format json app.models:Invoice",
    ),
    "warm": (
        "gdx warm --url http://127.0.0.1:8000 fix/registry/",
        "gdx warm --url http://127.0.0.1:8000 --exit-zero http://NODE:9479/schemas/registry",
    ),
    "inject": (
        "kubectl get deploy vllm -o yaml | gdx inject - | kubectl apply -f -",
        "gdx inject vllm.yaml > vllm-injected.yaml",
        "gdx inject --image registry.example/guided-decoding-exporter:0.1.0 manifests/",
        "gdx inject --guard enforce --guard-configmap gdx-guard --warm-configmap gdx-warm vllm.yaml",
        "helm template vllm ./chart | gdx inject - | kubectl apply -f -",
    ),
    "probe-files": (
        "gdx probe-files /opt/gdx-probe # then PYTHONPATH=/opt/gdx-probe in the engine's environment",
    ),
}


class ExamplesFormatter(argparse.HelpFormatter):
    """Wraps the description as argparse does and keeps the examples as written, one command a line."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("examples:"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def _with_examples(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for name, sub in commands.choices.items():
        if name not in EXAMPLES:
            continue  # tests/unit/test_cli_help.py fails on it
        sub.formatter_class = ExamplesFormatter
        sub.epilog = "examples:\n" + "\n".join("  " + line for line in EXAMPLES[name])


def _parser(only: str | None = None) -> argparse.ArgumentParser:
    """Every command's parser, or with `only` (a command's name) that command's alone: each command's
    module is imported to add its parser, and `gdx serve` need not import lint, fix and inject (a
    third of a second of every daemon's start)."""
    parser = argparse.ArgumentParser(
        prog="gdx",
        description="guided-decoding-exporter: grammar-compile metrics for structured-output LLM serving.",
        epilog="examples:\n"
        + "\n".join(f"  {lines[0]}" for lines in EXAMPLES.values())
        + "\n\n'gdx COMMAND --help' explains a command, with more examples.",
        formatter_class=ExamplesFormatter,
    )
    parser.add_argument("--version", action="version", version=f"gdx {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, add in _ADDERS.items():
        if only is None or only in name:
            add(commands)
    _with_examples(commands)
    return parser


def _add_serve(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser(
        "serve",
        help="run the node daemon (Prometheus /metrics on :9479)",
        description=(
            "Run the node daemon: per-core CPU, NVML GPU gauges, the engines' own metrics passed through"
            " (vLLM, SGLang, TensorRT-LLM) and the in-engine probe's compile metrics on one /metrics"
            " endpoint. Every flag can also be set in the YAML"
            " file (--config.file) or as a GDX_* environment variable; flags win over the environment,"
            " which wins over the file. Invalid configuration exits with code 2 before anything starts."
        ),
    )
    config.add_flags(serve)


def _add_lint(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from exporter.lint import command as lint_command

    lint_command.add_parsers(commands)


def _add_fix(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from exporter.fix import command as fix_command

    fix_command.add_parser(commands)


def _add_warm(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from exporter.fix import warm

    warm.add_parser(commands)


def _add_inject(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from exporter.inject import command as inject_command

    inject_command.add_parsers(commands)


# The commands each adder defines, in the order `gdx --help` lists them.
_ADDERS: dict[tuple[str, ...], Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]] = {
    ("serve",): _add_serve,
    ("hash", "lint"): _add_lint,
    ("fix",): _add_fix,
    ("warm",): _add_warm,
    ("inject", "probe-files"): _add_inject,
}


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    # `gdx COMMAND ...`: that command's parser alone; anything else (`gdx --help`, a typo) gets them all
    known = [c for names in _ADDERS for c in names]
    parser = _parser(words[0] if words and words[0] in known else None)
    args = parser.parse_args(words)
    if args.command is None:
        parser.print_help()
        return 2
    if args.command == "serve":
        return _serve(vars(args))
    try:
        return _tool(args)
    except BrokenPipeError:
        # The reader went away (`gdx lint ... | head`): stop quietly with SIGPIPE's status, as `yes | head`
        # does, instead of a traceback; stdout is pointed at /dev/null so the exit flush cannot fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 128 + signal.SIGPIPE


def _tool(args: argparse.Namespace) -> int:
    """The commands that print and exit: hash, lint, inject, probe-files."""
    from exporter.lint import command as lint_command

    if args.command == "hash":
        from exporter.lint import hashing

        return hashing.hash_main(args)
    if args.command == "lint":
        return lint_command.lint_main(args)
    if args.command == "fix":
        from exporter.fix import command as fix_command

        return fix_command.fix_main(args)
    if args.command == "warm":
        from exporter.fix import warm

        return warm.main(args)
    from exporter.inject import command as inject_command

    if args.command == "inject":
        return inject_command.inject_main(args)
    if args.command == "probe-files":
        return inject_command.probe_files_main(args)
    return 2


def _serve(flags: dict[str, object]) -> int:
    flags.pop("command", None)
    try:
        cfg = config.load(flags)
    except config.ConfigError as err:
        print(f"gdx serve: {err}", file=sys.stderr)
        return 2
    if cfg.web_config_file:  # checked before anything starts, like the rest of the configuration
        from exporter.daemon import webconfig

        try:
            webconfig.load(cfg.web_config_file)
        except ValueError as err:
            print(f"gdx serve: invalid configuration: web.config.file: {err}", file=sys.stderr)
            return 2
    from exporter.daemon import logs, server

    logs.setup(cfg.log_level, cfg.log_format)
    try:
        asyncio.run(server.serve(cfg, freeze=True))
    except SystemExit as err:
        if isinstance(err.code, str):
            print(f"gdx serve: {err.code}", file=sys.stderr)
            return 1
        raise
    return 0
