"""`gdx lint --tokenizer`: compile a schema with the real engines and probe the keywords it uses.

Imports xgrammar / llguidance lazily (they are optional for the daemon). The keyword probes compile
each keyword's reference example from `exporter.schema.backends` with the installed engine and feed
its must-reject instance, so a user learns what *their* engine version does, keyword by keyword.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from exporter.schema import backends


@dataclass
class CompileResult:
    engine: str
    ok: bool
    seconds: float
    error: str = ""

    def doc(self) -> dict[str, Any]:
        return {"engine": self.engine, "ok": self.ok, "seconds": round(self.seconds, 6), "error": self.error}


@dataclass
class ProbeResult:
    engine: str
    keyword: str
    outcome: str  # "unenforced" (accepted a must-reject instance), "enforced", "refused", "compiles"

    def doc(self) -> dict[str, str]:
        return {"engine": self.engine, "keyword": self.keyword, "outcome": self.outcome}


class Engines:
    """The real engines over one tokenizer; each compile uses a fresh cache (a cold compile)."""

    def __init__(self, tokenizer_json: str, names: list[str]) -> None:
        self.names = names
        with open(tokenizer_json, encoding="utf-8") as handle:
            self._text = handle.read()
        self._xgrammar_tokenizer: Any = None
        self._llguidance_tokenizer: Any = None
        self._stop: list[int] = []  # the end-of-text token, fed after an instance to finish it
        if "xgrammar" in names:
            import xgrammar
            from transformers import PreTrainedTokenizerFast

            tokenizer = PreTrainedTokenizerFast(tokenizer_file=tokenizer_json)  # type: ignore[no-untyped-call]
            end_ids = [
                tokenizer.convert_tokens_to_ids(token)
                for token in ("<|eot_id|>", "<|end_of_text|>", "</s>", "<|endoftext|>")
            ]
            self._stop = [
                token_id
                for token_id in end_ids
                if isinstance(token_id, int) and token_id >= 0 and token_id != tokenizer.unk_token_id
            ][:1]
            self._xgrammar_tokenizer = xgrammar.TokenizerInfo.from_huggingface(
                tokenizer, vocab_size=len(tokenizer), stop_token_ids=self._stop or None
            )
        if "llguidance" in names:
            import llguidance

            self._llguidance_tokenizer = llguidance.LLTokenizer(self._text)

    def compile(self, spec: str) -> list[CompileResult]:
        out = []
        for name in self.names:
            started = time.perf_counter()
            ok, error = self._compile(name, spec)
            out.append(CompileResult(name, ok, time.perf_counter() - started, error))
        return out

    def _compile(self, name: str, spec: str) -> tuple[bool, str]:
        if name == "xgrammar":
            try:
                self._xgrammar_compile(spec)
                return True, ""
            except Exception as err:
                return False, str(err).splitlines()[0][:300] if str(err) else type(err).__name__
        import llguidance

        grammar = llguidance.LLMatcher.grammar_from_json_schema(spec)
        matcher = llguidance.LLMatcher(self._llguidance_tokenizer, grammar)
        if matcher.is_error():
            return False, matcher.get_error().splitlines()[0][:300]
        return True, ""

    def _xgrammar_compile(self, spec: str) -> Any:
        """A cold compile (no cache), as vLLM sends the schema: compact separators, no whitespace."""
        import xgrammar

        compiler = xgrammar.GrammarCompiler(self._xgrammar_tokenizer, max_threads=8, cache_enabled=False)
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
        import xgrammar

        matcher = xgrammar.GrammarMatcher(self._xgrammar_compile(json.dumps(schema)))
        text = json.dumps(instance, separators=(",", ":"))
        accepted = matcher.accept_string(text) and (not self._stop or matcher.accept_token(self._stop[0]))
        return "unenforced" if accepted and matcher.is_terminated() else "enforced"
