"""`gdx lint --tokenizer`: compile a schema with the real engines and probe the keywords it uses.

Imports xgrammar / llguidance lazily (they are optional for the daemon). The keyword probes compile
each keyword's reference example from `exporter.engines.grammars.backends` with the installed engine and feed
its must-reject instance, so a user learns what *their* engine version does, keyword by keyword.
Each compile also keeps what the engine said (exporter/engines/grammars/enginelogs.py makes findings of it):
xgrammar's log lines, written by its C++ to fd 2 and captured around the compile, and llguidance's
error or warnings.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from exporter.engines.grammars import backends, enginelogs

_FD2 = threading.Lock()  # one capture of fd 2 at a time


@dataclass
class CompileResult:
    engine: str
    ok: bool
    seconds: float
    error: str = ""
    version: str = ""
    warnings: tuple[str, ...] = ()  # xgrammar's log messages, or llguidance's grammar warnings

    def doc(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "version": self.version,
            "ok": self.ok,
            "seconds": round(self.seconds, 6),
            "error": self.error,
            "warnings": list(self.warnings),
        }


@dataclass
class ProbeResult:
    engine: str
    keyword: str
    outcome: str  # "unenforced" (accepted a must-reject instance), "enforced", "refused", "compiles"

    def doc(self) -> dict[str, str]:
        return {"engine": self.engine, "keyword": self.keyword, "outcome": self.outcome}


class Engines:
    """The real engines over one tokenizer; each compile uses a fresh compiler (a cold compile).
    `vllm_defaults`: compile as vLLM does by default (any whitespace, the compiler's cache on), which
    the maskbench measurement needs: with compact separators xgrammar 0.2.7/0.2.8 reject valid output
    for formatting reasons, and some of their compile failures only happen with the cache on."""

    def __init__(self, tokenizer_json: str, names: list[str], *, vllm_defaults: bool = False) -> None:
        self.names = names
        self.versions = {name: _version(name) for name in names}  # as installed (metadata)
        self.vllm_defaults = vllm_defaults
        with open(tokenizer_json, encoding="utf-8") as handle:
            self._text = handle.read()
        self._xgrammar_tokenizer: Any = None
        self._llguidance_tokenizer: Any = None
        self._stop: list[int] = []  # the end-of-text token, fed after an instance to finish it
        if "xgrammar" in names:
            _tokenizer, stops, self._xgrammar_tokenizer = xgrammar_tokenizer(tokenizer_json)
            self._stop = stops[:1]
        if "llguidance" in names:
            import llguidance

            self._llguidance_tokenizer = llguidance.LLTokenizer(self._text)

    def compile(self, spec: str) -> list[CompileResult]:
        """Each engine's cold compile of `spec`, timed, with what the engine said about it."""
        out = []
        for name in self.names:
            if name == "xgrammar":
                with stderr_captured() as written:
                    started = time.perf_counter()
                    ok, error = self._compile(name, spec)
                    seconds = time.perf_counter() - started
                warnings, other = enginelogs.parse("".join(written))
                forward(other)
            else:
                started = time.perf_counter()
                ok, error, warnings = self._llguidance_compile(spec)
                seconds = time.perf_counter() - started
            out.append(CompileResult(name, ok, seconds, error, self.versions.get(name, ""), warnings))
        return out

    def _compile(self, name: str, spec: str) -> tuple[bool, str]:
        if name == "xgrammar":
            try:
                self.xgrammar_compile(spec)
                return True, ""
            except Exception as err:
                return False, str(err).splitlines()[0][:300] if str(err) else type(err).__name__
        ok, error, _ = self._llguidance_compile(spec)
        return ok, error

    def _llguidance_compile(self, spec: str) -> tuple[bool, str, tuple[str, ...]]:
        """As vLLM compiles it: strict unless the schema's "x-guidance" asks for lenient or
        coerce_one_of (then it compiles and warns of what it drops). The error on one line."""
        import llguidance

        grammar = llguidance.LLMatcher.grammar_from_json_schema(spec)
        matcher = llguidance.LLMatcher(self._llguidance_tokenizer, grammar)
        if matcher.is_error():
            return False, " ".join(matcher.get_error().split())[:300], ()
        return True, "", tuple(matcher.get_grammar_warnings())

    def xgrammar_compile(self, spec: str) -> Any:
        """A cold compile: compact separators and no whitespace, or vLLM's defaults (above)."""
        import xgrammar

        compiler = xgrammar.GrammarCompiler(
            self._xgrammar_tokenizer, max_threads=8, cache_enabled=self.vllm_defaults
        )
        if self.vllm_defaults:
            return compiler.compile_json_schema(spec, any_whitespace=True)
        return compiler.compile_json_schema(spec, any_whitespace=False, separators=(",", ":"))

    def probe(self, name: str, keyword: str) -> ProbeResult | None:
        """What this engine does with the reference example of `keyword`."""
        if name == "xgrammar":
            behaviour = backends.XGRAMMAR_UNENFORCED.get(keyword)
            if behaviour is None:
                return None
            return ProbeResult(name, keyword, self.xgrammar_accepts(behaviour.example, behaviour.must_reject))
        behaviour = backends.LLGUIDANCE_REFUSED.get(keyword)
        if behaviour is None:
            return None
        ok, _ = self._compile("llguidance", json.dumps(behaviour.example))
        return ProbeResult(name, keyword, "compiles" if ok else "refused")

    def xgrammar_accepts(self, schema: Any, instance: Any) -> str:
        with stderr_captured() as written:  # what the reference example logs is not the user's schema's
            compiled = self.xgrammar_compile(json.dumps(schema))
        forward(enginelogs.parse("".join(written))[1])
        return self.xgrammar_verdict(compiled, instance)

    def xgrammar_verdict(self, compiled: Any, instance: Any) -> str:
        """ "unenforced" when a compiled grammar takes the instance (compact JSON) and the end token."""
        import xgrammar

        matcher = xgrammar.GrammarMatcher(compiled)
        text = json.dumps(instance, separators=(",", ":"))
        accepted = matcher.accept_string(text) and (not self._stop or matcher.accept_token(self._stop[0]))
        return "unenforced" if accepted and matcher.is_terminated() else "enforced"


@contextlib.contextmanager
def stderr_captured() -> Iterator[list[str]]:
    """What is written to fd 2 during the block (xgrammar's C++ logs there, not to sys.stderr), in the
    yielded list once the block ends; fd 2 is restored even when the block raises. fd 2 belongs to the
    process: a write by another thread meanwhile is captured too, so only the CLI, whose compiles run
    one after another, does this (the daemon never redirects the engine's output stream)."""
    written: list[str] = []
    with _FD2, tempfile.TemporaryFile() as sink:
        if sys.stderr is not None:
            sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(sink.fileno(), 2)
            yield written
        finally:
            if sys.stderr is not None:
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            written.append(sink.read().decode("utf-8", "replace"))


STOP_NAMES = ("<|eot_id|>", "<|end_of_text|>", "</s>", "<|endoftext|>")


@functools.lru_cache(maxsize=4)
def xgrammar_tokenizer(tokenizer_json: str) -> tuple[Any, list[int], Any]:
    """(the Hugging Face tokenizer, its end-of-text ids, xgrammar's TokenizerInfo over it with the
    first of them as stop): loaded once per process and file, for lint's compiles and its prover alike
    (each load of the Llama 3 vocabulary is about 4 s)."""
    import xgrammar
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast(tokenizer_file=tokenizer_json)
    stops = end_of_text(tokenizer)
    info = xgrammar.TokenizerInfo.from_huggingface(
        tokenizer, vocab_size=len(tokenizer), stop_token_ids=stops[:1] or None
    )
    return tokenizer, stops, info


def end_of_text(tokenizer: Any) -> list[int]:
    """The ids of the end-of-text tokens this tokenizer has, the likeliest first: fed after an
    instance, they tell whether the grammar lets the output end there."""
    ids = [tokenizer.convert_tokens_to_ids(name) for name in STOP_NAMES]
    return [i for i in ids if isinstance(i, int) and i >= 0 and i != tokenizer.unk_token_id]


def forward(text: str) -> None:
    """Back to fd 2: what was captured there that is not an engine log line."""
    if text:
        os.write(2, text.encode("utf-8", "replace"))


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return ""
