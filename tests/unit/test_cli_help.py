"""`gdx --help` and every subcommand's `--help` end with examples, as node_exporter's do: at least one
line that starts with `gdx ` and the subcommand, and every such line parses as written."""

from __future__ import annotations

import argparse
import contextlib
import io
import shlex

import pytest

from exporter import cli


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = cli._parser()
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def help_text(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        cli._parser().parse_args([*argv, "--help"])
    return out.getvalue()


def examples(text: str) -> list[str]:
    after = text.split("\nexamples:\n", 1)[1]
    return [line.strip() for line in after.splitlines() if line.startswith("  ")]


def test_every_subcommand_has_examples() -> None:
    names = set(subcommands())
    assert names >= {"serve", "hash", "lint", "fix", "warm", "inject", "probe-files"}
    assert set(cli.EXAMPLES) == names


@pytest.mark.parametrize("name", sorted(cli.EXAMPLES))
def test_help_ends_with_examples_that_parse(name: str) -> None:
    lines = examples(help_text([name]))
    own = [line for line in lines if line.startswith(f"gdx {name} ") or line == f"gdx {name}"]
    assert own, f"gdx {name} --help has no example line starting with 'gdx {name}'"
    for line in own:
        words = shlex.split(line, comments=True)
        words = words[: next((i for i, w in enumerate(words) if w in ("|", ">")), len(words))]
        args = cli._parser().parse_args(words[1:])  # exits (2) on a flag or value it does not take
        assert args.command == name


def test_the_top_level_help_lists_an_example_per_subcommand() -> None:
    lines = examples(help_text([]))
    for name in cli.EXAMPLES:
        assert any(f"gdx {name}" in line for line in lines), name


@pytest.mark.parametrize("name", sorted(subcommands()))
def test_a_commands_own_parser_is_the_one_the_full_parser_has(name: str) -> None:
    """`gdx COMMAND` builds that command's parser alone (a daemon's start imports no lint, fix or inject):
    the same help, and nothing else in it."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        cli._parser(name).parse_args([name, "--help"])
    assert out.getvalue() == help_text([name])
    (action,) = [a for a in cli._parser(name)._actions if isinstance(a, argparse._SubParsersAction)]
    assert name in action.choices and len(action.choices) <= 2


def test_gdx_serve_imports_no_other_command() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from exporter import cli; cli._parser('serve').parse_args(['serve']);"
        " print(sorted(m for m in sys.modules if m.split('.')[:2] in"
        " (['exporter', 'lint'], ['exporter', 'fix'], ['exporter', 'inject'])))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
