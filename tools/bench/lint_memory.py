"""`gdx lint` on a large request log: wall time and peak memory (`python -m tools.bench.lint_memory`).

Writes a request log of `--lines` chat requests (about 2.8 KB each, the size of a real request with a
prompt) over `--distinct` JSON Schemas of JSONSchemaBench, one drawn per line in a fixed order, and
lints it in a child process (`python -m exporter lint LOG --format json`, no tokenizer: the analysis,
not the compiles), measured with wait4's rusage: its peak RSS and its wall time. With `--before REV`,
the same log is linted by REV's tree too (a git worktree of it), side by side in this run.
Targets (issue 53): under 500 MB for 100,000 lines; a 1,000,000-line log completes in the same bound.
`--dev-half`: instead, the 4,828 schemas of the JSONSchemaBench development half as one JSONL file, linted
with `--jobs 1` and with the default (one process per CPU), each tree; target 10 s on 2 CPUs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tools.bench.machine import header
from tools.bench.schemas import DATA, read
from tools.harness import ROOT

TARGET_BYTES = 500 * 2**20
PROMPT = "Extract the fields of this document as the schema says. " * 40  # about 2.3 KB of prompt


def write_log(path: Path, lines: int, distinct: int, seed: int = 7) -> int:
    """The log: `lines` request bodies, each with one of the first `distinct` schemas; its size."""
    schemas = [doc["schema"] for _, doc in zip(range(distinct), read(DATA / "schemas"), strict=False)]
    chooser = random.Random(seed)
    with path.open("w", encoding="utf-8") as out:
        for i in range(lines):
            schema = schemas[chooser.randrange(len(schemas))]
            body = {
                "model": "m",
                "messages": [{"role": "user", "content": f"{PROMPT} request {i}"}],
                "response_format": {"type": "json_schema", "json_schema": {"name": "out", "schema": schema}},
            }
            out.write(json.dumps(body) + "\n")
    return path.stat().st_size


def lint_in_child(log: Path, tree: Path, *flags: str) -> tuple[float, int, int]:
    """(wall seconds, peak RSS bytes, exit status) of `gdx lint LOG --format json` run from `tree`."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "exporter", "lint", str(log), "--format", "json", *flags],
        cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    said = child.stderr.read().decode(errors="replace") if child.stderr else ""
    if child.returncode not in (0, 1):
        print(said[-2000:], file=sys.stderr)
    return wall, usage.ru_maxrss * 1024, child.returncode


def dev_half(folder: Path, trees: list[tuple[str, Path]]) -> int:
    log = folder / "dev-half.jsonl"
    with log.open("w", encoding="utf-8") as out:
        for doc in read(DATA / "schemas"):
            out.write(json.dumps({"id": doc["id"], "schema": doc["schema"]}) + "\n")
    print(f"{'input':<34} {'tree':<22} {'jobs':>7} {'wall':>8} {'peak RSS':>10}  target")
    for name, tree in trees:
        for jobs in ("1", "0"):
            wall, peak, code = lint_in_child(log, tree, "--jobs", jobs)
            label = {"0": "default"}.get(jobs, jobs)
            verdict = "ok" if wall <= 10 and code in (0, 1) else "missed"
            what = "development half, 4,828 schemas"
            row = f"{what:<34} {name:<22} {label:>7} {wall:>7.1f}s {peak / 2**20:>7,.0f} MB"
            print(f"{row}  <= 10 s: {verdict}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lines", type=int, action="append", help="log lines (repeatable; default 100000)")
    parser.add_argument("--distinct", type=int, default=347, help="distinct schemas in the log (default 347)")
    parser.add_argument(
        "--before", metavar="REV", help="also lint with this git revision's tree, side by side"
    )
    parser.add_argument(
        "--dev-half", action="store_true", help="time the development half instead (see above)"
    )
    args = parser.parse_args(argv)
    print(header("tools.bench.lint_memory", argv), flush=True)
    with tempfile.TemporaryDirectory(prefix="gdx-lint-memory-") as folder:
        trees = [("this tree", ROOT)]
        if args.before:
            old = Path(folder) / "before"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(old), args.before],
                           check=True, capture_output=True)  # fmt: skip
            trees.insert(0, (f"before ({args.before})", old))
        try:
            if args.dev_half:
                return dev_half(Path(folder), trees)
            print(f"{'log':<34} {'tree':<22} {'wall':>8} {'peak RSS':>10}  target")
            for lines in args.lines or [100_000]:
                log = Path(folder) / f"requests-{lines}.jsonl"
                size = write_log(log, lines, args.distinct)
                for name, tree in trees:
                    wall, peak, code = lint_in_child(log, tree)
                    verdict = "ok" if peak < TARGET_BYTES and code in (0, 1) else "missed"
                    what = f"{lines:,} lines, {size / 2**20:,.0f} MB, {args.distinct} distinct"
                    row = f"{what:<34} {name:<22} {wall:>7.1f}s {peak / 2**20:>7,.0f} MB"
                    print(f"{row}  < 500 MB: {verdict}", flush=True)
                log.unlink()
        finally:
            if args.before:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(trees[0][1])],
                               capture_output=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
