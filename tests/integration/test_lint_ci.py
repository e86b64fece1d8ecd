"""`gdx lint` wired into a repository's CI as users wire it: a configuration file found upward
([tool.gdx.lint] in pyproject.toml, `lint:` in .gdx.yaml), reviewed exceptions and stale ones, a
baseline that survives reformatting, and the pre-commit hook through the real `pre-commit try-repo`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COUNTRIES = {
    "type": "object",
    "properties": {
        "country": {"enum": [f"C{i:03d}" for i in range(100)]},
        "lines": {"type": "array", "maxItems": 50},
    },
}
REFUSED = {
    "type": "object",
    "properties": {"a": {"type": "string"}},
    "dependentSchemas": {"a": {"required": ["b"]}},
}
EXCEPTION = """
[[tool.gdx.lint.exceptions]]
path = "schemas/countries.json"
pointer = "/properties/country/enum"
rule = "large_enum"
reason = "reviewed: static ISO list, compiled once at boot"
"""


def gdx(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "exporter", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env=env,
    )


def service(tmp_path: Path) -> Path:
    repo = tmp_path / "service"
    (repo / "schemas").mkdir(parents=True)
    (repo / "schemas" / "countries.json").write_text(json.dumps(COUNTRIES, indent=2) + "\n", encoding="utf-8")
    return repo


def findings(out: subprocess.CompletedProcess[str]) -> list[tuple[str, str]]:
    report = json.loads(out.stdout)
    return sorted(
        (f["rule"], f["pointer"])
        for family in report["families"]
        for schema in family["schemas"]
        for f in schema["findings"]
    )


def test_a_pyproject_configuration_is_found_upward_and_flags_win(tmp_path: Path) -> None:
    repo = service(tmp_path)
    (repo / "pyproject.toml").write_text(
        '[project]\nname = "svc"\n\n[tool.gdx.lint]\nmax-items = 100\nignore = ["xgrammar_unenforced"]\n'
        + EXCEPTION,
        encoding="utf-8",
    )
    (repo / "sub").mkdir()
    out = gdx("lint", "--format", "json", "../schemas/countries.json", cwd=repo / "sub")
    assert out.returncode == 0, out.stderr
    # paths in the configuration are relative to its folder, wherever gdx runs
    assert findings(out) == [] and out.stderr == ""
    (repo / "pyproject.toml").write_text(
        (repo / "pyproject.toml")
        .read_text(encoding="utf-8")
        .replace("schemas/countries.json", "schemas/c*.jsonl"),
        encoding="utf-8",
    )
    out = gdx("lint", "--format", "json", "../schemas/countries.json", cwd=repo / "sub")
    assert findings(out) == [("large_enum", "/properties/country/enum")]
    assert "stale exception, it matches no finding: large_enum at schemas/c*.jsonl" in out.stderr
    (repo / "pyproject.toml").write_text(
        (repo / "pyproject.toml")
        .read_text(encoding="utf-8")
        .replace("schemas/c*.jsonl", "schemas/countries.json"),
        encoding="utf-8",
    )
    out = gdx("lint", "--format", "json", "schemas/countries.json", cwd=repo)
    assert findings(out) == [] and "stale" not in out.stderr  # max-items 100, the enum excepted
    out = gdx("lint", "--format", "json", "--lint.max-items", "20", "schemas/countries.json", cwd=repo)
    assert findings(out) == [("max_items", "/properties/lines/maxItems")]
    text = gdx("lint", "schemas/countries.json", cwd=repo).stdout
    assert f"left out: 1 by reviewed exceptions ({repo / 'pyproject.toml'})" in text


def test_a_gdx_yaml_configuration_and_per_path_ignores(tmp_path: Path) -> None:
    repo = service(tmp_path)
    (repo / ".gdx.yaml").write_text(
        "lint:\n  enum-size: 200\n  per-path-ignores:\n    'schemas/*.json': [max_items]\n", encoding="utf-8"
    )
    out = gdx("lint", "--format", "json", "schemas/countries.json", cwd=repo)
    assert out.returncode == 0 and findings(out) == []
    elsewhere = repo / "other.json"
    shutil.copy(repo / "schemas" / "countries.json", elsewhere)
    assert findings(gdx("lint", "--format", "json", "other.json", cwd=repo)) == [
        ("max_items", "/properties/lines/maxItems")
    ]


@pytest.mark.parametrize(
    ("config", "said"),
    [
        ("[tool.gdx.lint]\nmax-itemz = 3\n", "tool.gdx.lint.max-itemz: unknown key"),
        ('[tool.gdx.lint]\nselect = ["no_such_rule"]\n', "tool.gdx.lint.select: no such rule: no_such_rule"),
        ('[tool.gdx.lint]\ndepth = "deep"\n', "tool.gdx.lint.depth:"),
        (
            '[[tool.gdx.lint.exceptions]]\npath = "a.json"\nrule = "depth"\n',
            "tool.gdx.lint.exceptions[0].reason: required",
        ),
        (
            '[[tool.gdx.lint.exceptions]]\npath = "/abs/*.json"\nrule = "depth"\nreason = "x"\n',
            "tool.gdx.lint.exceptions[0].path: '/abs/*.json' is not a relative path glob",
        ),
        (
            '[[tool.gdx.lint.exceptions]]\npath = "[a.json"\nrule = "depth"\nreason = "x"\n',
            "unbalanced brackets",
        ),
        ("[tool.gdx.lint\n", "not TOML"),
    ],
)
def test_a_bad_configuration_is_exit_2_naming_the_file_and_the_key(
    tmp_path: Path, config: str, said: str
) -> None:
    repo = service(tmp_path)
    (repo / "pyproject.toml").write_text(config, encoding="utf-8")
    out = gdx("lint", "schemas/countries.json", cwd=repo)
    if config.startswith("[tool.gdx.lint\n"):  # not TOML at all: not found upward, so named
        out = gdx("lint", "--config", "pyproject.toml", "schemas/countries.json", cwd=repo)
    assert out.returncode == 2 and out.stdout == ""
    assert str(repo / "pyproject.toml") in out.stderr or "pyproject.toml" in out.stderr
    assert said in out.stderr, out.stderr


def test_a_baseline_keeps_todays_findings_out_across_reformatting_and_new_ones_in(tmp_path: Path) -> None:
    repo = service(tmp_path)
    first = gdx("lint", "--write-baseline", "gdx-baseline.json", "schemas/countries.json", cwd=repo)
    assert first.returncode == 0
    baseline = json.loads((repo / "gdx-baseline.json").read_text(encoding="utf-8"))
    assert {f["rule"] for f in baseline["findings"]} >= {"large_enum", "max_items"}
    # reindented, keys reordered: nothing new
    (repo / "schemas" / "countries.json").write_text(
        json.dumps(COUNTRIES, sort_keys=True, separators=(",", ":")), encoding="utf-8"
    )
    again = gdx(
        "lint", "--format", "json", "--baseline", "gdx-baseline.json", "schemas/countries.json", cwd=repo
    )
    assert again.returncode == 0 and findings(again) == []
    # a new schema with an error: only it, and it sets the exit code
    (repo / "schemas" / "refused.json").write_text(json.dumps(REFUSED, indent=2), encoding="utf-8")
    new = gdx(
        "lint",
        "--format",
        "json",
        "--baseline",
        "gdx-baseline.json",
        "schemas/countries.json",
        "schemas/refused.json",
        cwd=repo,
    )
    assert new.returncode == 1
    assert ("llguidance_refused", "/dependentSchemas") in findings(new)
    assert not any(rule in ("large_enum", "max_items") for rule, _ in findings(new))
    bad = gdx("lint", "--baseline", "schemas/countries.json", "schemas/countries.json", cwd=repo)
    assert bad.returncode == 2 and "not a gdx lint baseline" in bad.stderr


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def test_the_pre_commit_hook_fails_an_error_finding_and_passes_a_clean_schema(tmp_path: Path) -> None:
    """The real pre-commit (PyPI) installs the hook from this repository as a user's does
    (`pre-commit try-repo`: the working tree, uncommitted changes included) into a git repository."""
    repo = service(tmp_path)
    (repo / "schemas" / "refused.json").write_text(json.dumps(REFUSED, indent=2) + "\n", encoding="utf-8")
    (repo / "schemas" / "clean.json").write_text(
        json.dumps({"type": "object", "properties": {"a": {"type": "string"}}}, indent=2) + "\n",
        encoding="utf-8",
    )
    git("init", "-q", cwd=repo)
    git("add", ".", cwd=repo)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT"))}
    env["PRE_COMMIT_HOME"] = str(tmp_path / "pre-commit-home")
    tool = Path(sys.executable).parent / "pre-commit"

    def hook(*files: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(tool), "try-repo", str(ROOT), "gdx-lint", "--files", *files],
            capture_output=True, text=True, timeout=600, cwd=repo, env=env,
        )  # fmt: skip

    failed = hook("schemas/refused.json")
    assert failed.returncode == 1, failed.stdout[-3000:] + failed.stderr[-3000:]
    assert "gdx lint (structured-output schemas)" in failed.stdout and "Failed" in failed.stdout
    assert "llguidance_refused" in failed.stdout and "/dependentSchemas" in failed.stdout
    passed = hook("schemas/clean.json")
    assert passed.returncode == 0, passed.stdout[-3000:] + passed.stderr[-3000:]
    assert "Passed" in passed.stdout
