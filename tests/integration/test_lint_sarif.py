# ruff: noqa: E501  (request bodies read better on one line)
"""`gdx lint --format sarif` and `--format github` as CI runs them: every finding of JSONSchemaBench's
development half, each schema written indented as a file of its own, validated by Microsoft's SARIF
multitool (the SARIF schema and GitHub code scanning's ingestion rules, `--rule-kind Sarif;Gh`: 0
errors); each result's line and column hold the key its pointer names; reindenting and reordering
every file's keys keeps every fingerprint; a request log's findings sit at their lines."""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from exporter.lint.rules import HELP

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "tests" / "support" / "data" / "jsonschemabench" / "schemas"
MULTITOOL = Path(
    os.environ.get(
        "GDX_SARIF_MULTITOOL",
        ROOT
        / ".cache"
        / "sarif"
        / "node_modules"
        / "@microsoft"
        / "sarif-multitool-linux"
        / "Sarif.Multitool",
    )
)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def gdx(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "exporter", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
        env=env,
    )


def validate(log: Path) -> list[dict[str, Any]]:
    """The multitool's own results on a SARIF file: what it finds wrong."""
    if not MULTITOOL.exists():
        raise FileNotFoundError(f"{MULTITOOL} is missing: run `make test` (it installs the SARIF multitool)")
    out = log.with_suffix(".validation.sarif")
    env = {**os.environ, "DOTNET_SYSTEM_GLOBALIZATION_INVARIANT": "1"}
    done = subprocess.run(
        [str(MULTITOOL), "validate", str(log), "--rule-kind", "Sarif;Gh", "--max-file-size-in-kb", "1000000",
         "-o", str(out)],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return list(json.loads(out.read_text(encoding="utf-8"))["runs"][0].get("results", []))


def schemas() -> list[tuple[str, Any]]:
    found = []
    for path in sorted(BENCH.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            for line in lines:
                item = json.loads(line)
                found.append((f"{item['category']}_{item['id']}", item["schema"]))
    return found


def shuffled(value: Any, rng: random.Random) -> Any:
    """The same JSON value with every object's keys in another order."""
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {k: shuffled(value[k], rng) for k in keys}
    if isinstance(value, list):
        return [shuffled(v, rng) for v in value]
    return value


def write(folder: Path, items: list[tuple[str, Any]], indent: int | None, reorder: bool = False) -> list[str]:
    """Each schema as a file of its own, its keys reordered at random if asked (the same schema the same
    way: two equal schemas written apart would be unstable_serialization); the paths relative to the
    folder's parent."""
    folder.mkdir()
    paths = []
    for name, schema in items:
        value = shuffled(schema, random.Random(json.dumps(schema, sort_keys=True))) if reorder else schema
        (folder / f"{name}.json").write_text(json.dumps(value, indent=indent) + "\n", encoding="utf-8")
        paths.append(f"{folder.name}/{name}.json")
    return paths


def node_at(value: Any, pointer: str) -> tuple[Any, str | None]:
    """(the parent of the pointer's node, the member's key or None for an item) in the value."""
    parent, key = None, None
    node = value
    for token in pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        parent = node
        if isinstance(node, dict) and token in node:
            node, key = node[token], token
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node, key = node[int(token)], None
        else:
            return parent, None
    return parent, key


def test_sarif_of_the_benchmark_is_valid_and_at_the_line(tmp_path: Path) -> None:
    items = schemas()
    assert len(items) > 4000
    paths = write(tmp_path / "schemas", items, 2)
    done = gdx("lint", "--format", "sarif", *paths, cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    log = json.loads(done.stdout)
    (tmp_path / "lint.sarif").write_text(done.stdout, encoding="utf-8")
    problems = validate(tmp_path / "lint.sarif")
    errors = [p for p in problems if p.get("level", "warning") == "error"]
    print(f"{len(items)} schemas, {len(log['runs'][0]['results'])} results, multitool: {len(problems)} "
          f"notes/warnings/errors, {len(errors)} errors")  # fmt: skip
    assert errors == [], json.dumps(errors[:5], indent=1)
    results = log["runs"][0]["results"]
    assert len(results) > 1000
    rules = {rule["id"] for rule in log["runs"][0]["tool"]["driver"]["rules"]}
    assert {r["ruleId"] for r in results} <= rules and rules == set(HELP)  # every rule, reported or not
    checked = 0
    files: dict[str, tuple[list[str], Any]] = {}  # each file read once: its lines and its value
    for result in results:
        region = result["locations"][0]["physicalLocation"]["region"]
        uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        if uri not in files:
            text = (tmp_path / uri).read_text(encoding="utf-8")
            files[uri] = (text.split("\n"), json.loads(text))
        lines, value = files[uri]
        line = lines[region["startLine"] - 1]
        pointer = result["properties"]["pointer"]
        parent, key = node_at(value, pointer)
        if key is not None and isinstance(parent, dict):
            assert line[region["startColumn"] - 1 :].startswith(json.dumps(key) + ":"), (uri, pointer, line)
            checked += 1
    assert checked > 1000


@pytest.fixture(scope="module")
def eighth(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, list[tuple[str, Any]], list[dict[str, Any]]]:
    """Every eighth schema, written indented under `json/`, and gdx lint's SARIF results for them: the
    run the reordered files and the YAML files are each compared with (made once)."""
    folder = tmp_path_factory.mktemp("eighth")
    items = schemas()[::8]
    paths = write(folder / "json", items, 2)
    done = gdx("lint", "--format", "sarif", *paths, cwd=folder)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    return folder, items, json.loads(done.stdout)["runs"][0]["results"]


def test_reindenting_and_reordering_keeps_every_fingerprint(
    eighth: tuple[Path, list[tuple[str, Any]], list[dict[str, Any]]],
) -> None:
    folder, items, indented = eighth
    paths = write(folder / "reordered", items, None, reorder=True)
    done = gdx("lint", "--format", "sarif", *paths, cwd=folder)
    assert done.returncode in (0, 1), done.stderr[-2000:]

    def keyed(results: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
        return sorted(
            (r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].split("/", 1)[1], r["ruleId"],
             r["partialFingerprints"]["gdxFinding/v1"])
            for r in results
        )  # fmt: skip

    runs = [keyed(indented), keyed(json.loads(done.stdout)["runs"][0]["results"])]
    assert len(runs[0]) > 100
    assert runs[0] == runs[1]


def test_yaml_schema_files_are_their_json_twins_with_findings_at_the_key(
    eighth: tuple[Path, list[tuple[str, Any]], list[dict[str, Any]]],
) -> None:
    """A schema kept as YAML is the schema its JSON is (one schema_hash, one fingerprint per finding), and
    each finding's line holds the key its pointer names."""
    tmp_path, items, indented = eighth
    (tmp_path / "yaml").mkdir()
    for name, schema in items:
        text = yaml.safe_dump(schema, sort_keys=False, allow_unicode=True, width=2**20)
        (tmp_path / "yaml" / f"{name}.yaml").write_text(text, encoding="utf-8")
    done = gdx("lint", "--format", "sarif", *[f"yaml/{name}.yaml" for name, _ in items], cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    runs = [indented, json.loads(done.stdout)["runs"][0]["results"]]

    def keyed(results: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
        return sorted(
            (PurePosixPath(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]).stem, r["ruleId"],
             r["partialFingerprints"]["gdxFinding/v1"])
            for r in results
        )  # fmt: skip

    assert len(runs[1]) > 100 and keyed(runs[0]) == keyed(runs[1])
    checked = 0
    files: dict[str, tuple[list[str], Any]] = {}  # each file read once: its lines and its value
    for result in runs[1]:
        where = result["locations"][0]["physicalLocation"]
        uri = where["artifactLocation"]["uri"]
        if uri not in files:
            text = (tmp_path / uri).read_text(encoding="utf-8")
            files[uri] = (text.split("\n"), yaml.load(text, Loader=yaml.CSafeLoader))
        lines, value = files[uri]
        line = lines[where["region"]["startLine"] - 1]
        parent, key = node_at(value, result["properties"]["pointer"])
        if key is not None and isinstance(parent, dict):
            rest = line[where["region"]["startColumn"] - 1 :]
            assert rest.startswith(key) or rest[:1] in "'\"", (where, result["properties"]["pointer"], line)
            checked += 1
    assert checked > 100


def test_a_request_logs_findings_sit_at_their_lines_and_github_annotates_them(tmp_path: Path) -> None:
    enum = {"type": "object", "properties": {"c": {"enum": [f"v{i}" for i in range(80)]}}}
    bodies = [
        {"model": "m", "messages": [], "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": enum}}},
        {"model": "m", "messages": [], "tools": [{"type": "function", "function": {"name": "f"}}],
         "tool_choice": {"type": "function", "function": {"name": "g"}}},
    ]  # fmt: skip
    (tmp_path / "requests, today.jsonl").write_text(
        "".join(json.dumps(b) + "\n" for b in bodies), encoding="utf-8"
    )
    done = gdx(
        "lint", "--format", "sarif", "--tool-call-parser", "pythonic", "requests, today.jsonl", cwd=tmp_path
    )
    assert done.returncode == 1, done.stderr
    (tmp_path / "log.sarif").write_text(done.stdout, encoding="utf-8")
    assert [p for p in validate(tmp_path / "log.sarif") if p.get("level", "warning") == "error"] == []
    results = {r["ruleId"]: r for r in json.loads(done.stdout)["runs"][0]["results"]}
    enum_at = results["large_enum"]["locations"][0]["physicalLocation"]
    assert enum_at["artifactLocation"]["uri"] == "requests%2C%20today.jsonl"
    line = json.dumps(bodies[0])
    assert enum_at["region"]["startLine"] == 1
    assert line[enum_at["region"]["startColumn"] - 1 :].startswith('"enum": ["v0"')
    assert results["request_rejected"]["locations"][0]["physicalLocation"]["region"]["startLine"] == 2
    github = gdx(
        "lint", "--format", "github", "--tool-call-parser", "pythonic", "requests, today.jsonl", cwd=tmp_path
    )
    lines = github.stdout.splitlines()
    assert any(
        line.startswith(f"::notice file=requests%2C today.jsonl,line=1,col={enum_at['region']['startColumn']},"
                        "title=large_enum::80 members")
        for line in lines
    ), lines  # fmt: skip
    assert any(line.startswith("::error file=requests%2C today.jsonl,line=2,title=request_rejected::") or
               line.startswith("::error file=requests%2C today.jsonl,line=2,col=1,title=request_rejected::")
               for line in lines), lines  # fmt: skip
