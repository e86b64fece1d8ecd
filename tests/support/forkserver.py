"""Run `python SCRIPT ARGS` (or `python -m MODULE ARGS`) the way `subprocess.run` would, without paying
that Python's heavy imports every time: a fork server (this file, run by that Python) imports the named
modules once, then forks one child per run, which starts from those modules already loaded and
otherwise sets itself up as the fresh interpreter would be: `sys.path` (the script's folder or, with
-m, the working directory; PYTHONPATH; then the interpreter's own), `sys.argv`, `os.environ`, the
working directory, stdin from /dev/null, stdout and stderr to files, the exit status Python gives, the
atexit handlers run. Each run is a process of its own: nothing one run does reaches the next.

Why: the vLLM drivers (tests/support/engines/vllm_*.py) spend about 10 CPU seconds each importing
vLLM's stack (torch, transformers, openai, fastapi, xgrammar), and the agreement tests start one per
release; the same modules, from the same site-packages, each time. Only vLLM itself differs between
releases (each release's files go first on PYTHONPATH), so it is never preloaded. A run whose first
folders (the script's, PYTHONPATH) would give it a module the server loaded from elsewhere is refused
by the server and run as a plain subprocess instead. `gdx` (test_lint_toolcalls) likewise: 19 runs of
`python -m exporter`, two of them importing xgrammar.

`run(python, argv, env=..., cwd=..., timeout=..., preload=...)` returns a CompletedProcess (text) or
raises subprocess.TimeoutExpired, like `subprocess.run(..., capture_output=True, text=True)`.
GDX_NO_FORKSERVER=1 runs every one as a plain subprocess.

CPU accounting: a child's CPU seconds are the server's children's, so they reach the test process's
RUSAGE_CHILDREN when the server is reaped: `stop_all` (the modules that use it call it at their
teardown; at the latest, at exit)."""

from __future__ import annotations

import atexit
import contextlib
import json
import locale
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# What the vLLM drivers import besides vLLM, heaviest first; vLLM's env_override imports torch, then
# sets these variables before anything else of torch's is imported (every supported release alike).
VLLM_PRELOAD_FIRST = ("torch",)
VLLM_PRELOAD_ENV = {"PYTORCH_NVML_BASED_CUDA_CHECK": "1", "TORCHINDUCTOR_COMPILE_THREADS": "1"}
VLLM_PRELOAD_ENV_DEFAULTS = {"TRITON_CACHE_AUTOTUNING": "1", "TILELANG_CLEANUP_TEMP_FILES": "1"}
VLLM_PRELOAD = (
    "torch._dynamo",
    "torch._dynamo.repro.after_dynamo",
    "torch._inductor.compile_fx",
    "torch._inductor.custom_graph_pass",
    "torch.utils.cpp_extension",
    "transformers",
    "transformers.modeling_gguf_pytorch_utils",
    "transformers.models.auto.image_processing_auto",
    "transformers.models.auto.modeling_auto",
    "transformers.models.auto.tokenization_auto",
    "openai",
    "openai.types.chat",
    "openai.types.responses",
    "fastapi",
    "xgrammar",
    "cv2",
    "requests",
    "uvloop",
    "aiohttp",
    "huggingface_hub",
    "numpy",
    "pydantic",
    "sympy",
    "networkx",
    # then what vLLM's entrypoints and tool parsers import on top (the lighter part)
    "transformers.models.auto.processing_auto",
    "transformers.models.whisper.tokenization_whisper",
    "mistral_common.protocol.instruct.request",
    "mistral_common.tokens.tokenizers.base",
    "zmq.asyncio",
    "prometheus_client",
    "openai_harmony",
    "msgspec.json",
    "msgspec.msgpack",
    "partial_json_parser",
    "llguidance",
    "ijson",
    "jsonschema",
    "pybase64",
    "cbor2",
    "cloudpickle",
    "cpuinfo",
    "cachetools",
)


@dataclass(frozen=True)
class Preload:
    """What the server imports: `first`, then `env` set (and `env_defaults` where unset), then `then`."""

    first: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    env_defaults: dict[str, str] = field(default_factory=dict)
    then: tuple[str, ...] = ()

    def key(self) -> str:
        return json.dumps([self.first, self.env, self.env_defaults, self.then], sort_keys=True)


VLLM = Preload(VLLM_PRELOAD_FIRST, VLLM_PRELOAD_ENV, VLLM_PRELOAD_ENV_DEFAULTS, VLLM_PRELOAD)


def server_env(env: dict[str, str]) -> dict[str, str]:
    """The environment the server imports under: the script's, less PYTHONPATH (the server's own
    sys.path is the interpreter's), what only the script's own code reads (VLLM_*; GDX_*, the probe's
    socket and pod, new for every driver) and the name of the test running (PYTEST_CURRENT_TEST, new
    for every test). The child gets all of `env`."""
    return {
        k: v
        for k, v in env.items()
        if k not in ("PYTHONPATH", "PYTEST_CURRENT_TEST") and not k.startswith(("VLLM_", "GDX_"))
    }


class _Server:
    def __init__(self, python: Path, env: dict[str, str], preload: Preload) -> None:
        self.lock = threading.Lock()
        self.proc = subprocess.Popen(
            [str(python), __file__, preload.key()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd="/",
        )
        self.buffer = b""
        try:
            ready = self._read(600)
            if ready.get("ready") is not True:
                raise RuntimeError(f"fork server did not start: {ready}")
        except BaseException:
            self.proc.kill()
            self.proc.wait()
            raise

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _read(self, timeout: float | None) -> dict[str, Any]:
        """The server's next reply line (unbuffered reads: select sees what has not been read)."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buffer:
            if deadline is not None:
                readable, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
                if not readable:
                    raise TimeoutError
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError("fork server exited")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        reply: dict[str, Any] = json.loads(line)
        return reply

    def run(
        self, python: Path, argv: list[str], env: dict[str, str], cwd: Path, timeout: float | None
    ) -> subprocess.CompletedProcess[str] | None:
        """The script's CompletedProcess, or None when the server refuses it (run it plainly)."""
        with self.lock, tempfile.TemporaryDirectory(prefix="gdx-fork-") as tmp:
            out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
            assert self.proc.stdin is not None
            command = {"argv": argv, "env": env, "cwd": str(cwd), "stdout": str(out), "stderr": str(err)}
            self.proc.stdin.write(json.dumps(command).encode() + b"\n")
            self.proc.stdin.flush()
            started = self._read(60)
            if "refused" in started:
                return None
            pid = started["pid"]
            reaped = False
            try:
                try:
                    done = self._read(timeout)
                    reaped = True
                except TimeoutError:
                    _kill_group(pid)
                    self._read(60)
                    reaped = True
                    raise subprocess.TimeoutExpired(
                        [str(python), *argv], timeout or 0, _text(out), _text(err)
                    ) from None
            finally:
                if not reaped:  # interrupted (a pytest timeout): the child goes, the server waits on
                    _kill_group(pid)
                    with contextlib.suppress(Exception):
                        self._read(60)
            return subprocess.CompletedProcess(
                [str(python), *argv], done["returncode"], _text(out), _text(err)
            )

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _text(path: Path) -> str:
    """The file as `subprocess.run(text=True)` reads a pipe: the locale's encoding, universal newlines."""
    if not path.exists():
        return ""
    text = path.read_bytes().decode(locale.getpreferredencoding(False))
    return text.replace("\r\n", "\n").replace("\r", "\n")


_servers: dict[tuple[str, str, str], _Server] = {}
_servers_lock = threading.Lock()


def stop_all() -> None:
    """Stop every server (and so reap the CPU its children used): at exit, or after a test module."""
    with _servers_lock:
        for server in _servers.values():
            server.stop()
        _servers.clear()


atexit.register(stop_all)


def run(
    python: Path,
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: Path,
    timeout: float | None = None,
    preload: Preload = VLLM,
) -> subprocess.CompletedProcess[str]:
    """`subprocess.run([python, *argv], env=env, cwd=cwd, timeout=timeout, capture_output=True,
    text=True)`, forked from a server of `python` that has imported `preload` (one server per python,
    environment and preload)."""
    if os.environ.get("GDX_NO_FORKSERVER") != "1":
        key_env = server_env(env)
        key = (str(python), json.dumps(key_env, sort_keys=True), preload.key())
        with _servers_lock:
            server = _servers.get(key)
            if server is None or not server.alive():
                try:
                    server = _servers[key] = _Server(python, key_env, preload)
                except (OSError, RuntimeError, TimeoutError):
                    server = None
        done = None if server is None else server.run(python, argv, env, cwd, timeout)
        if done is not None:
            return done
    return subprocess.run(
        [str(python), *argv], env=env, cwd=cwd, timeout=timeout, capture_output=True, text=True
    )


# --- the server, run by the other virtualenv's Python: `python forkserver.py PRELOAD_JSON` ---


def _top_level_names(folder: str) -> set[str]:
    """The modules and packages a sys.path entry provides."""
    names = set()
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            name = entry.name
            if entry.is_dir():
                names.add(name)
            elif "." in name and name.rsplit(".", 1)[1] in ("py", "pyc", "so", "pyd"):
                names.add(name.split(".", 1)[0])
    return names


def _first_folders(command: dict[str, Any]) -> list[str]:
    """What Python puts before its own sys.path: the script's folder (`-m`: the working directory),
    then PYTHONPATH."""
    argv, cwd = command["argv"], command["cwd"]
    first = cwd if argv[0] == "-m" else os.path.dirname(os.path.join(cwd, argv[0]))
    pythonpath = [p for p in command["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    return [os.path.abspath(first), *pythonpath]


def shadowed(command: dict[str, Any]) -> list[str]:
    """The modules the server has loaded that the child's own first folders would give it from
    elsewhere (another release's vLLM...): such a child is refused, and run as a plain subprocess."""
    folders = [(folder, _top_level_names(folder)) for folder in _first_folders(command)]
    out = []
    for name in sorted({name.split(".", 1)[0] for name in sys.modules}):
        folder = next((folder for folder, names in folders if name in names), None)
        if folder is None:
            continue  # found where the server found it
        module = sys.modules.get(name)
        origin = getattr(module, "__file__", None) or next(iter(getattr(module, "__path__", []) or []), None)
        inside = os.path.join(os.path.abspath(folder), "")
        if origin is None or not os.path.abspath(origin).startswith(inside):
            out.append(name)
    return out


def become(command: dict[str, Any], base_path: list[str]) -> int:
    """In a forked child whose standard streams are set: become `python SCRIPT ARGS` (or `python -m
    MODULE ARGS`) in the command's working directory, environment and sys.path, and run it; returns the
    exit status Python would give, after the atexit handlers (tests/support/spawnserver.py too)."""
    import importlib
    import runpy
    import traceback

    os.chdir(command["cwd"])
    env: dict[str, str] = command["env"]
    os.environ.clear()
    os.environ.update(env)
    sys.path[:] = [*_first_folders(command), *base_path]
    importlib.invalidate_caches()
    try:
        if command["argv"][0] == "-m":  # python -m MODULE ARGS
            sys.argv = ["-m", *command["argv"][2:]]
            runpy.run_module(command["argv"][1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(command["argv"])
            runpy.run_path(command["argv"][0], run_name="__main__")
        code = 0
    except SystemExit as exit_:
        if exit_.code is None:
            code = 0
        elif isinstance(exit_.code, int):
            code = exit_.code
        else:
            print(exit_.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    return code


def _child(command: dict[str, Any], base_path: list[str], replies: int) -> None:
    """In the forked child: become `python SCRIPT ARGS` and run; never returns."""
    code = 1
    try:
        os.close(replies)
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        out = os.open(command["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        err = os.open(command["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        for fd in (null, out, err):
            os.close(fd)
        code = become(command, base_path)
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):
                stream.flush()
        os._exit(code)


def _serve(preload_json: str) -> None:
    import importlib

    first, env, env_defaults, then = json.loads(preload_json)
    sys.path.pop(0)  # this file's folder: not the scripts'
    base_path = list(sys.path)
    # replies on a descriptor of their own: what the imports print goes to /dev/null
    replies = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)

    def reply(message: dict[str, Any]) -> None:
        os.write(replies, json.dumps(message).encode() + b"\n")

    for name in first:
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    os.environ.update(env)
    for key, value in env_defaults.items():
        os.environ.setdefault(key, value)
    for name in then:
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    sys.stdout.flush()
    reply({"ready": True})
    commands = os.fdopen(0, "rb", buffering=0)
    while line := commands.readline():
        command = json.loads(line)
        if refused := shadowed(command):
            reply({"refused": f"the script's path holds {refused}"})
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(command, base_path, replies)
        reply({"pid": pid})
        _, status = os.waitpid(pid, 0)
        reply({"returncode": os.waitstatus_to_exitcode(status)})


if __name__ == "__main__":
    _serve(sys.argv[1])
