"""`gdx warm`: compile a replica's static schemas before its first user request.

A new replica's grammar cache is empty: the first request of each family pays its compile while a
user waits. `gdx warm --url URL SCHEMA...` waits until the engine answers `/health`, then sends one
minimal request per schema (`max_tokens` 1, the schema as `response_format`), so that the engine
compiles and caches each grammar; the requests users send with the same schema then hit. SCHEMA is a
JSON Schema file, a folder (its `*.json` files: `gdx fix`'s `registry/`, a mounted ConfigMap; and
every `*/schema.json` under it: `gdx fix --out`), or a daemon's `/schemas/registry` URL (its node's
most requested static schemas). The schema is sent as the file holds it (key order kept): the engine
caches by the string it serialises from it, which is the one a service sending the same file gets.

Standard library only, so that it can run inside the engine's container from the probe's copied
tree (`gdx inject --warm-configmap` makes it the engine's `postStart` hook). Exit 0: every schema
warmed; 1: some request failed (each said); 2: bad input, or the engine not ready within
--ready-timeout; `--exit-zero` makes each of them 0 (a failing postStart hook kills the container).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any


class WarmError(Exception):
    """Bad input or an engine that never got ready: exit 2 with the message."""


def schemas(paths: Sequence[str]) -> list[tuple[str, Any]]:
    """(name, parsed schema) of every file, and of the `*.json` and `*/schema.json` of a folder (not
    its hidden entries: a ConfigMap volume's `..data`), in order."""
    found: list[tuple[str, Any]] = []
    for raw in paths:
        if raw.startswith(("http://", "https://")):
            found.extend(from_daemon(raw))
            continue
        path = Path(raw)
        files = [path]
        if path.is_dir():
            listed = sorted([*path.glob("*.json"), *path.glob("*/schema.json")])
            files = [f for f in listed if not f.relative_to(path).parts[0].startswith(".") and f.is_file()]
            if not files:
                raise WarmError(f"{raw}: no *.json or */schema.json in it (gdx fix --out writes them)")
        for file in files:
            try:
                found.append((str(file), json.loads(file.read_text(encoding="utf-8"))))
            except (OSError, UnicodeDecodeError, ValueError) as err:
                raise WarmError(f"{file}: {err}") from err
    return found


def from_daemon(url: str, timeout: float = 30.0) -> list[tuple[str, Any]]:
    """The static schemas a daemon lists at /schemas/registry (`--web.schemas-registry N`): its
    node's most requested, each named by its URL and schema_hash."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            listed = json.loads(response.read()).get("schemas")
    except (urllib.error.URLError, OSError, ValueError, AttributeError) as err:
        raise WarmError(f"{url}: {getattr(err, 'reason', err)}") from err
    if not isinstance(listed, list) or not all(isinstance(e, dict) and "schema" in e for e in listed):
        raise WarmError(f"{url}: not a registry (a daemon's /schemas/registry lists {{schemas: [...]}})")
    return [(f"{url}#{entry.get('schema_hash', i)}", entry["schema"]) for i, entry in enumerate(listed)]


def wait_ready(url: str, timeout: float, interval: float = 1.0) -> None:
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=5) as response:
                if response.status == 200:
                    return
                last = f"HTTP {response.status}"
        except (urllib.error.URLError, OSError) as err:
            last = str(getattr(err, "reason", err))
        time.sleep(interval)
    raise WarmError(f"{url}/health not ready within {timeout:g} s ({last})")


def _post(url: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        answer: dict[str, Any] = json.loads(response.read())
        return answer


def model_of(url: str, timeout: float) -> str:
    with urllib.request.urlopen(f"{url}/v1/models", timeout=timeout) as response:
        models = json.loads(response.read()).get("data") or []
    if not models or not isinstance(models[0], dict) or "id" not in models[0]:
        raise WarmError(f"{url}/v1/models lists no model: name one with --model")
    return str(models[0]["id"])


def warm(url: str, model: str, schema: Any, timeout: float) -> float:
    """One request that makes the engine compile `schema`; its seconds."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "."}],
        "max_tokens": 1,
        "response_format": {"type": "json_schema", "json_schema": {"name": "warm", "schema": schema}},
    }
    started = time.perf_counter()
    _post(f"{url}/v1/chat/completions", body, timeout)
    return time.perf_counter() - started


def main(args: argparse.Namespace) -> int:
    with contextlib.ExitStack() as stack:
        log = None
        if args.log:
            try:
                log = stack.enter_context(open(args.log, "a", encoding="utf-8"))
            except OSError as err:
                print(f"gdx warm: --log {args.log}: {err}", file=sys.stderr)
        code = _warm_all(args, lambda line, err=False: _say(line, err, log))
    return 0 if args.exit_zero else code


def _say(line: str, err: bool, log: Any) -> None:
    print(line, file=sys.stderr if err else sys.stdout, flush=True)
    if log is not None:
        with contextlib.suppress(OSError):
            log.write(line + "\n")
            log.flush()


def _warm_all(args: argparse.Namespace, say: Any) -> int:
    url = args.url.rstrip("/")
    try:
        found = schemas(args.schemas)
        wait_ready(url, args.ready_timeout)
        model = args.model or model_of(url, args.timeout)
    except (WarmError, urllib.error.URLError, OSError, ValueError) as err:
        say(f"gdx warm: {err}", True)
        return 2
    failed = 0
    for name, schema in found:
        try:
            seconds = warm(url, model, schema, args.timeout)
            say(f"warmed {name} in {seconds:.3f} s")
        except urllib.error.HTTPError as err:
            failed += 1
            detail = err.read()[:300].decode("utf-8", "replace")
            say(f"gdx warm: {name}: HTTP {err.code}: {detail}", True)
        except (urllib.error.URLError, OSError, ValueError) as err:
            failed += 1
            say(f"gdx warm: {name}: {err}", True)
    say(f"{len(found) - failed} of {len(found)} schemas warmed on {url} ({model})")
    return 1 if failed else 0


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "warm",
        help="compile static schemas on a new replica before its first user request",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    parser.add_argument(
        "schemas", nargs="+", metavar="SCHEMA",
        help="a JSON Schema file, a folder of them (gdx fix's registry/ or --out, a ConfigMap), or a "
        "daemon's http://NODE:PORT/schemas/registry",
    )  # fmt: skip
    parser.add_argument(
        "--url", required=True, help="the engine's OpenAI-compatible server, e.g. http://127.0.0.1:8000"
    )
    parser.add_argument("--model", help="the served model name (default: the first of /v1/models)")
    parser.add_argument("--ready-timeout", type=float, default=600.0, metavar="SECONDS",
                        help="how long to wait for /health (default 600)")  # fmt: skip
    parser.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS",
                        help="per request (default 120: a slow compile is what warming is for)")  # fmt: skip
    parser.add_argument(
        "--exit-zero", action="store_true",
        help="exit 0 whatever happened (a postStart hook that fails kills the container)",
    )  # fmt: skip
    parser.add_argument(
        "--log", metavar="FILE", help="also append each line here (in a hook, /proc/1/fd/1: the pod's log)"
    )


if __name__ == "__main__":  # python -m exporter.fix.warm, where gdx is not installed
    _parser = argparse.ArgumentParser(prog="gdx warm")
    add_parser(_parser.add_subparsers(dest="command", required=True))
    sys.exit(main(_parser.parse_args(["warm", *sys.argv[1:]])))
