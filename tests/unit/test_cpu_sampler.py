"""The CPU sampler counts a process killed before anyone reaped it, by the program it was."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support import cpu_sampler


def test_a_killed_process_is_counted_by_its_program(tmp_path: Path) -> None:
    out = tmp_path / "samples.json"
    recorder = subprocess.Popen(
        [sys.executable, "-m", "tests.support.cpu_sampler", "record", str(out)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert recorder.stdout is not None
    assert recorder.stdout.readline().startswith("recording")  # its first reading taken
    burner = tmp_path / "burn.py"
    burner.write_text(
        "import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass\n"
        "print('burnt', flush=True)\ntime.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, str(burner)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "burnt\n"
    time.sleep(4 * cpu_sampler.INTERVAL)  # readings after it burnt
    proc.kill()  # never exits by itself: only the sampler can know what it spent
    proc.wait()
    recorder.send_signal(signal.SIGTERM)
    assert recorder.wait(10) == 0
    rows = {
        line.split(None, 2)[2]: float(line.split()[0]) for line in cpu_sampler.report(out).splitlines()[2:]
    }
    name = cpu_sampler.program(f"{sys.executable} {burner}")
    assert name.endswith("python burn.py"), name
    assert 0.5 <= rows[name] < 1.5, rows


def test_programs_are_named_without_their_arguments() -> None:
    program = cpu_sampler.program
    vllm = "/r/.venv-vllm/bin/python"
    assert program(f"{vllm} -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=32)") == (
        "multiprocessing child (vLLM)"
    )
    assert program(f"{vllm} -m vllm.entrypoints.openai.api_server --model m") == "vLLM API server"
    assert program("/r/.venv/bin/python -m exporter serve --web.listen-address 127.0.0.1:0") == "gdx serve"
    assert program("/r/.venv/bin/python -I -c import json") == ".venv python -c"
    assert program("/usr/bin/prometheus --config.file=x") == "prometheus"
