"""The API server's validation of a schema `auto` sends to outlines, run bounded in a child process.

vLLM (0.32.0 and 0.33.0, `validate_structured_output_request_outlines`) validates such a schema on the
API server's request path before EngineCore sees it: outlines_core builds a regex from the schema, then
Python's own regex parser reads that regex (`re._parser.parse`, the step vLLM's
`validate_regex_is_buildable` starts with) and vLLM walks the parsed tree for what outlines cannot do
(lookarounds, backreferences, anchors before the first character). None has a time or memory bound
there: while they run, the server answers no request, and a regex too large for memory aborts the
process. This module runs the same library steps, and one walk of the whole parsed tree like vLLM's
checks, in a child with an address-space limit and a wall-clock timeout, so that
`gdx lint` measures the stall or the crash instead of suffering it. The child is a fresh interpreter
(never a fork of a threaded parent); the schema reaches it on stdin, the verdict comes back as one
JSON line on stdout; a child that dies or runs out of time is the verdict.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

DEFAULT_MEMORY_BYTES = 4 << 30
DEFAULT_TIMEOUT_SECONDS = 30.0
STALL_WARNING_SECONDS = 0.1  # a warning: every request on the server waits this long
STALL_ERROR_SECONDS = 1.0
OUTCOMES = ("validated", "rejected", "died", "timeout", "unavailable")
_ALLOCATION = re.compile(r"memory allocation of (\d+) bytes failed")

# The child: limit its own address space, then the two steps vLLM's API server runs, timed.
_CHILD = r"""
import json, resource, signal, sys, time
limit, step = int(sys.argv[1]), float(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
try:
    from importlib.metadata import version
    from outlines_core import json_schema
    found = version("outlines_core")
except ImportError as err:
    print(json.dumps({"outcome": "unavailable", "detail": str(err)}), flush=True)
    sys.exit(0)
import re._parser as parser


def walk(parsed):  # every node of the parsed regex once, as vLLM's checks of it (lookarounds, anchors) do
    stack, nodes = [parsed], 0
    while stack:
        for op, arg in stack.pop().data:
            nodes += 1
            subs = arg[1] if op is parser.BRANCH else arg if isinstance(arg, tuple) else (arg,)
            stack.extend(sub for sub in subs if isinstance(sub, parser.SubPattern))
    return nodes


import re._constants as const

REFUSED = {parser.GROUPREF: "backreferences", parser.GROUPREF_EXISTS: "backreferences",
           const.ASSERT: "lookarounds", const.ASSERT_NOT: "lookarounds"}
CONSUMERS = (parser.LITERAL, parser.IN, parser.ANY)


def refused(parsed):  # what vLLM's check of the parsed regex refuses anywhere in it
    stack = [parsed]
    while stack:
        for op, arg in stack.pop().data:
            if op in REFUSED:
                return f"the regex uses {REFUSED[op]}"
            if op is parser.AT and arg in (const.AT_BOUNDARY, const.AT_NON_BOUNDARY):
                return "the regex uses word boundaries"
            subs = arg[1] if op is parser.BRANCH else arg if isinstance(arg, tuple) else (arg,)
            stack.extend(sub for sub in subs if isinstance(sub, parser.SubPattern))
    return ""


def consumes(sub):  # a character can be matched inside, by vLLM's reading (its consumers only)
    for op, arg in sub.data:
        if op in CONSUMERS:
            return True
        if op is parser.MAX_REPEAT and arg[1] != 0 and consumes(arg[2]):
            return True
        if op is parser.BRANCH and any(consumes(b) for b in arg[1]):
            return True
        if op is parser.SUBPATTERN and consumes(arg[3]):
            return True
    return False


def needs_context(sub):  # an anchor or lookaround before the first character matched
    for op, arg in sub.data:
        if op is parser.AT or op in (const.ASSERT, const.ASSERT_NOT):
            return True
        if op is parser.SUBPATTERN or op is parser.MAX_REPEAT:
            inner = arg[3] if op is parser.SUBPATTERN else arg[2]
            if needs_context(inner):
                return True
            if consumes(inner):
                return False
        elif op is parser.BRANCH:
            if any(needs_context(b) for b in arg[1]):
                return True
            if any(consumes(b) for b in arg[1]):
                return False
        elif op in CONSUMERS:
            return False
    return False


text = sys.stdin.read()
if step > 0:  # the steps' own CPU seconds, the interpreter's start left out: SIGPROF ends the child
    signal.setitimer(signal.ITIMER_PROF, step)
started = time.perf_counter()
pattern = None
try:
    pattern = json_schema.build_regex_from_schema(text)
    built = time.perf_counter()
    tree = parser.parse(pattern)
    walk(tree)
    why = refused(tree) or (needs_context(tree) and "the regex needs context before its first character")
    outcome, detail = ("rejected", why) if why else ("validated", "")
except Exception as err:  # MemoryError too: Python's, unlike Rust's abort, fails only the request
    built = time.perf_counter()
    step = "Failed to transform json schema into a regex: " if pattern is None else "Error parsing regex: "
    pattern, outcome, detail = "", "rejected", (step + type(err).__name__ + ": " + str(err))[:300]
ended = time.perf_counter()
doc = {"outcome": outcome, "detail": detail, "seconds": ended - started, "regex_seconds": built - started,
       "regex_chars": len(pattern or ""), "version": found}
print(json.dumps(doc), flush=True)
"""


@dataclass(frozen=True, slots=True)
class BoundedRun:
    """What the API server's outlines validation of one schema did in the bounded child."""

    outcome: str  # one of OUTCOMES
    seconds: float  # wall time of the two steps (validated, rejected), else until the child ended
    detail: str = ""  # the library's error, how the child died, or why nothing ran
    allocation_bytes: int = 0  # the allocation that failed, where the library said (Rust's abort)
    regex_chars: int = 0
    version: str = ""  # outlines_core's

    @property
    def crashed(self) -> bool:
        return self.outcome == "died"

    @property
    def stall(self) -> float:
        """Seconds the server is blocked for (a timeout: at least the bound)."""
        return self.seconds if self.outcome in ("validated", "rejected", "timeout") else 0.0


def run(
    text: str,
    memory_bytes: int = DEFAULT_MEMORY_BYTES,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
    python: str = sys.executable,
    step_timeout: float = 0.0,
) -> BoundedRun:
    """Validates `text` (a JSON Schema) as vLLM's API server does for outlines, bounded. Never raises
    for what the child does; it is killed at `timeout`. `step_timeout` (> 0) bounds the CPU seconds of
    the two steps alone, the child's start and imports left out: past it the outcome is "timeout" at
    that many seconds (the probe's guard: its bound of about a second is the work, not how long a
    loaded node kept the child waiting for a core, nor its imports)."""
    started = time.perf_counter()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GDX_PROBE")} | {"GDX_PROBE": "0"}
    try:
        child = subprocess.Popen(
            [python, "-I", "-c", _CHILD, str(memory_bytes), repr(float(step_timeout))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
    except OSError as err:
        return BoundedRun("unavailable", 0.0, f"cannot start {python}: {err}")
    try:
        out, errors = child.communicate(text.encode("utf-8", "replace"), timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        return BoundedRun(
            "timeout", time.perf_counter() - started, f"still running after {timeout:g} s: killed"
        )
    elapsed = time.perf_counter() - started
    if step_timeout > 0 and child.returncode == -signal.SIGPROF:
        return BoundedRun("timeout", step_timeout, f"still running after {step_timeout:g} CPU s: stopped")
    said = errors.decode("utf-8", "replace")
    lines = out.decode("utf-8", "replace").strip().splitlines()
    if child.returncode == 0 and lines:
        try:
            doc = json.loads(lines[-1])
            return BoundedRun(
                str(doc["outcome"]),
                float(doc.get("seconds", elapsed)),
                str(doc.get("detail", "")),
                regex_chars=int(doc.get("regex_chars", 0)),
                version=str(doc.get("version", "")),
            )
        except (ValueError, KeyError, TypeError):
            pass
    found = _ALLOCATION.search(said)
    how = f"signal {-child.returncode}" if child.returncode < 0 else f"exit status {child.returncode}"
    tail = said.strip().splitlines()[-1][:300] if said.strip() else ""
    return BoundedRun("died", elapsed, f"{how}: {tail}" if tail else how, int(found.group(1)) if found else 0)
