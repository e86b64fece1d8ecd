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
        with open(tokenizer_json, encoding="utf-8") as f:
            self._text = f.read()
        self._xgr: Any = None
        self._ll: Any = None
        self._stop: list[int] = []
        if "xgrammar" in names:
            import xgrammar as xgr
            from transformers import PreTrainedTokenizerFast

            tok = PreTrainedTokenizerFast(tokenizer_file=tokenizer_json)  # type: ignore[no-untyped-call]
            eos = [
                tok.convert_tokens_to_ids(t)
                for t in ("<|eot_id|>", "<|end_of_text|>", "</s>", "<|endoftext|>")
            ]
            self._stop = [i for i in eos if isinstance(i, int) and i >= 0 and i != tok.unk_token_id][:1]
            self._xgr = xgr.TokenizerInfo.from_huggingface(
                tok, vocab_size=len(tok), stop_token_ids=self._stop or None
            )
        if "llguidance" in names:
            import llguidance

            self._ll = llguidance.LLTokenizer(self._text)

    def compile(self, spec: str) -> list[CompileResult]:
        out = []
        for name in self.names:
            started = time.perf_counter()
            ok, error = self._compile(name, spec)
            out.append(CompileResult(name, ok, time.perf_counter() - started, error))
        return out

    def _compile(self, name: str, spec: str) -> tuple[bool, str]:
        if name == "xgrammar":
            import xgrammar as xgr

            try:
                xgr.GrammarCompiler(self._xgr, max_threads=8, cache_enabled=False).compile_json_schema(
                    spec, any_whitespace=False, separators=(",", ":")
                )
                return True, ""
            except Exception as err:
                return False, str(err).splitlines()[0][:300] if str(err) else type(err).__name__
        import llguidance

        matcher = llguidance.LLMatcher(self._ll, llguidance.LLMatcher.grammar_from_json_schema(spec))
        if matcher.is_error():
            return False, matcher.get_error().splitlines()[0][:300]
        return True, ""

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
        import xgrammar as xgr

        compiled = xgr.GrammarCompiler(self._xgr, max_threads=8, cache_enabled=False).compile_json_schema(
            json.dumps(schema), any_whitespace=False, separators=(",", ":")
        )
        matcher = xgr.GrammarMatcher(compiled)
        text = json.dumps(instance, separators=(",", ":"))
        accepted = matcher.accept_string(text) and (not self._stop or matcher.accept_token(self._stop[0]))
        return "unenforced" if accepted and matcher.is_terminated() else "enforced"
