"""Where a run's CPU went, counting every process: the census (census.py) hears only interpreters that
exit, so a server killed with its process group (a vLLM EngineCore and worker, a SIGKILLed daemon)
never reports. This reads every process's CPU seconds from /proc every half second, keeps each one's
last reading (and, for those already running at the start, its first), and sums them by program.
It found the vLLM servers' spinning EngineCores and workers (docs/measurements/runs.md).

Usage, beside a run (nothing else on the machine):
    python -m tests.support.cpu_sampler record .cache/cpu-samples.json &   # until SIGTERM or SIGINT
    CI=true bash .ci/run; kill %1
    python -m tests.support.cpu_sampler report .cache/cpu-samples.json
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
INTERVAL = 0.5


@dataclass
class Seen:
    command: str
    first: float  # CPU seconds at the first reading: the part spent before the record began (0: born after)
    last: float


def _read(pid: str) -> tuple[str, float, str] | None:
    """(key: pid and start time, CPU seconds, command) of one process, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        fields = stat[stat.rfind(")") + 2 :].split()
        cpu = (int(fields[11]) + int(fields[12])) / TICKS
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            command = f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:300]
    except (OSError, IndexError, ValueError):
        return None
    name = stat[stat.find("(") + 1 : stat.rfind(")")]
    return f"{pid}:{fields[19]}", cpu, command or f"[{name}]"


def sample(seen: dict[str, Seen], first: bool) -> None:
    for pid in os.listdir("/proc"):
        if pid.isdigit() and (read := _read(pid)) is not None:
            key, cpu, command = read
            if key in seen:
                seen[key].last = cpu
            else:  # the command as first seen: vLLM renames its processes later (VLLM::EngineCore)
                seen[key] = Seen(command, cpu if first else 0.0, cpu)


def record(out: Path, interval: float = INTERVAL) -> None:
    seen: dict[str, Seen] = {}
    stop = False

    def finish(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, finish)
    signal.signal(signal.SIGINT, finish)
    sample(seen, first=True)
    print(f"recording to {out} until SIGTERM or SIGINT", flush=True)
    while not stop:
        time.sleep(interval)
        sample(seen, first=False)
    out.write_text(json.dumps({key: asdict(s) for key, s in seen.items()}))


def program(command: str) -> str:
    """What a process is, without its arguments' values: a vLLM EngineCore or worker (spawned by
    multiprocessing), a `gdx` command, or the interpreter's virtualenv and script or module."""
    if "spawn_main" in command or "--multiprocessing-fork" in command:
        return "multiprocessing child" + (" (vLLM)" if ".venv-vllm" in command else "")
    if "vllm.entrypoints.openai.api_server" in command:
        return "vLLM API server"
    if "forkserver.py" in command:
        return "fork server" + (" (vLLM)" if ".venv-vllm" in command else "")
    if "exec(eval(sys.stdin.readline()))" in command:
        return "pytest-xdist worker"
    if match := re.search(r"-m exporter (\S+)", command):
        return f"gdx {match.group(1)}"
    words = command.split()
    if match := re.search(r"(\.venv[\w-]*)/bin/python\S*$", words[0] if words else ""):
        rest = next((w for w in words[1:] if not w.startswith("-") or w in ("-m", "-c")), "")
        return f"{match.group(1)} python {rest.rsplit('/', 1)[-1]}"
    return (words[0].rsplit("/", 1)[-1] if words else command)[:60]


def report(path: Path, top: int = 30) -> str:
    seen = {key: Seen(**s) for key, s in json.loads(path.read_text()).items()}
    cpu: Counter[str] = Counter()
    count: Counter[str] = Counter()
    for s in seen.values():
        cpu[program(s.command)] += s.last - s.first
        count[program(s.command)] += 1
    lines = [
        f"{sum(cpu.values()):.0f} CPU s over {len(seen)} processes",
        f"{'cpu s':>8} {'procs':>5}  program",
    ]
    lines += [f"{seconds:8.1f} {count[name]:5d}  {name}" for name, seconds in cpu.most_common(top)]
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "record":
        record(Path(sys.argv[2]))
    elif len(sys.argv) == 3 and sys.argv[1] == "report":
        print(report(Path(sys.argv[2])))
    else:
        print(__doc__)
        sys.exit(2)
