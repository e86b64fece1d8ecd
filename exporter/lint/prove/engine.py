"""The engine side of a proof: real xgrammar over a real tokenizer, fed token by token as a model is.

`accepts()` is the verdict: the instance's text is tokenized with the model's tokenizer and every
token goes through `GrammarMatcher.accept_token`, then the end-of-text token, and the matcher must
have terminated: exactly what a decoding step allows. `sample()` walks the grammar at random, one
character-token at a time among those the token bitmask allows, to find what the grammar lets
through without knowing any keyword. Compiles as vLLM does by default: `any_whitespace=True`, no
cache (cold, so every compile is measured).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from exporter.lint import engines

MAX_SAMPLE_CHARS = 2000  # a walk that has not finished by then is dropped (objects of 20 fields fit)
APPETITES = (1.0, 1.0, 3.0, 8.0)  # most walks short, some long enough to fill the optional fields


@dataclass(frozen=True)
class CompiledGrammar:
    grammar: Any
    seconds: float


class XgrammarEngine:
    """One tokenizer, loaded once; compile per schema, then any number of checks and samples."""

    def __init__(self, tokenizer_json: str) -> None:
        import numpy
        import xgrammar
        from transformers import PreTrainedTokenizerFast

        self.version = metadata.version("xgrammar")
        self._tokenizer = PreTrainedTokenizerFast(tokenizer_file=tokenizer_json)  # type: ignore[no-untyped-call]
        stops = engines.end_of_text(self._tokenizer)
        if not stops:
            raise ValueError(f"{tokenizer_json}: no end-of-text token among {', '.join(engines.STOP_NAMES)}")
        self.stop = stops[0]
        self._info = xgrammar.TokenizerInfo.from_huggingface(
            self._tokenizer, vocab_size=len(self._tokenizer), stop_token_ids=[self.stop]
        )
        self._chars, self._char_ids = _character_tokens(self._info.decoded_vocab)
        self._np_ids = numpy.array(self._char_ids, dtype=numpy.int64)

    def compile(self, schema_text: str) -> CompiledGrammar:
        import xgrammar

        from exporter.schema import enginelogs

        compiler = xgrammar.GrammarCompiler(self._info, max_threads=8, cache_enabled=False)
        with engines.stderr_captured() as written:  # `gdx lint` already reports these logs
            started = time.perf_counter()
            grammar = compiler.compile_json_schema(schema_text, any_whitespace=True)
            seconds = time.perf_counter() - started
        engines.forward(enginelogs.parse("".join(written))[1])
        return CompiledGrammar(grammar, seconds)

    def cached_compiles(self, texts: list[str]) -> list[float]:
        """Seconds of each compile through one caching compiler, as an engine serves requests: the
        first of a text is a compile, the rest are cache hits."""
        import xgrammar

        compiler = xgrammar.GrammarCompiler(self._info, max_threads=8, cache_enabled=True)
        out = []
        with engines.stderr_captured():
            for text in texts:
                started = time.perf_counter()
                compiler.compile_json_schema(text, any_whitespace=True)
                out.append(time.perf_counter() - started)
        return out

    def tokens(self, text: str) -> list[int]:
        return list(self._tokenizer.encode(text, add_special_tokens=False))

    def accepts(self, compiled: CompiledGrammar, text: str) -> bool:
        """Token by token, then end of text: would a decoder constrained by this grammar emit it?"""
        import xgrammar

        matcher = xgrammar.GrammarMatcher(compiled.grammar)
        for token in self.tokens(text):
            if not matcher.accept_token(token):
                return False
        return bool(matcher.accept_token(self.stop) and matcher.is_terminated())

    def sample(self, compiled: CompiledGrammar, rng: random.Random) -> str | None:
        """A random text the grammar accepts, or None when the walk ran too long or got stuck."""
        import xgrammar

        matcher = xgrammar.GrammarMatcher(compiled.grammar)
        bitmask = xgrammar.allocate_token_bitmask(1, self._info.vocab_size)
        words = bitmask[0].numpy()
        state = _Lexer(rng.choice(APPETITES))
        out: list[str] = []
        for _ in range(MAX_SAMPLE_CHARS):
            matcher.fill_next_token_bitmask(bitmask)
            allowed = ((words[self._np_ids >> 5] >> (self._np_ids & 31)) & 1).nonzero()[0]
            stop_ok = bool((int(words[self.stop >> 5]) >> (self.stop & 31)) & 1)
            if stop_ok and (not len(allowed) or rng.random() < 0.9):
                return "".join(out) if matcher.accept_token(self.stop) else None
            if not len(allowed):
                return None
            choice = state.choose([self._chars[i] for i in allowed], rng)
            if not matcher.accept_token(self._char_ids[self._chars.index(choice)]):
                return None
            state.feed(choice)
            out.append(choice)
        return None


def _character_tokens(vocab: list[bytes]) -> tuple[list[str], list[int]]:
    """The printable ASCII characters that are a token of their own, and their ids (every
    byte-level BPE vocabulary has them): enough to spell any JSON text."""
    found: dict[str, int] = {}
    for token_id, raw in enumerate(vocab):
        if len(raw) == 1 and 0x20 <= raw[0] < 0x7F:
            found.setdefault(chr(raw[0]), token_id)
    chars = sorted(found)
    return chars, [found[c] for c in chars]


CLASSES = {
    **{c: "digit" for c in "0123456789"},
    **{c: "letter" for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"},
    **{c: "number" for c in "-+.eE"},
    '"': "quote", "[": "open", "{": "open", "]": "close", "}": "close", ",": "comma", ":": "colon",
    " ": "space", "\\": "escape",
}  # fmt: skip


class _Lexer:
    """Just enough JSON state to steer the walk: short strings, shallow nesting, few items, so a
    walk ends in a few hundred characters and most values it writes are short and varied."""

    def __init__(self, appetite: float = 1.0) -> None:
        self.appetite = appetite  # above 1: more fields and items, deeper (optional parts get filled)
        self.in_string = False
        self.escaped = False
        self.depth = 0
        self.length = 0  # of the current string
        self.steps = 0
        self.last = ""
        self.run = 0  # digits in a row outside strings: numbers end soon too

    def feed(self, char: str) -> None:
        self.steps += 1
        self.last = char
        self.run = self.run + 1 if not self.in_string and CLASSES.get(char) in ("digit", "number") else 0
        if self.in_string:
            if self.escaped:
                self.escaped = False
            elif char == "\\":
                self.escaped = True
            elif char == '"':
                self.in_string = False
            self.length += 1
            return
        if char == '"':
            self.in_string, self.length = True, 0
        elif char in "[{":
            self.depth += 1
        elif char in "]}":
            self.depth -= 1

    def weight(self, kind: str) -> float:
        if self.in_string:  # mostly words, ended soon
            if kind == "quote":
                return 1.0 + self.length * 0.5
            if kind in ("letter", "digit", "space", "escape"):
                return {"letter": 2.0, "digit": 1.0, "space": 0.3, "escape": 0.02}[kind]
            return 0.1 + 0.1 * self.length  # a long string: what ends its part (`@`, `.`, `:`)
        pressure = self.steps / (60 * self.appetite)
        if kind in ("digit", "number") and self.run:
            return (2.0 if kind == "digit" else 0.5) / (1 + self.run)
        if kind == "close":  # an empty container now and then, not half the time
            return ((0.3 if self.last in "[{" else 1.0) + 0.3 * self.depth + pressure) / self.appetite
        if kind == "open":
            return 1.0 / (1 + self.depth + pressure)
        if kind == "comma":
            return self.appetite / (1 + pressure)
        return {"quote": 2.0, "digit": 2.0, "letter": 2.0, "number": 0.5, "colon": 5.0, "space": 0.0}.get(
            kind, 0.2
        )

    def choose(self, allowed: list[str], rng: random.Random) -> str:
        """A class first (by weight), then a character of it: 52 letters must not drown `"`."""
        by_kind: dict[str, list[str]] = {}
        for char in allowed:
            by_kind.setdefault(CLASSES.get(char, "other"), []).append(char)
        kinds = list(by_kind)
        weights = [self.weight(kind) for kind in kinds]
        if not any(weights):
            weights = [1.0] * len(kinds)
        kind = rng.choices(kinds, weights)[0]
        return rng.choice(by_kind[kind])
