"""The engine side of a proof: real xgrammar or llguidance over a real tokenizer, fed token by token
as a model is.

`accepts()` is the verdict: the instance's text is tokenized with the model's tokenizer and every
token goes through the engine's matcher, then the end-of-text token, and the matcher must have
finished: exactly what a decoding step allows. `sample()` walks the grammar at random, one
character-token at a time among those the token bitmask allows, to find what the grammar lets
through without knowing any keyword. Both compile as vLLM does by default: xgrammar with
`any_whitespace=True` and no cache (cold, so every compile is measured), llguidance with
`whitespace_flexible` (vLLM's guidance backend builds an `LLMatcher` per request).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Protocol

from exporter.lint import engines

MAX_SAMPLE_CHARS = 2000  # a walk that has not finished by then is dropped (objects of 20 fields fit)
APPETITES = (1.0, 1.0, 3.0, 8.0)  # most walks short, some long enough to fill the optional fields


@dataclass(frozen=True)
class CompiledGrammar:
    grammar: Any
    seconds: float


class ProofEngine(Protocol):
    """What a proof needs of an engine: xgrammar and llguidance alike."""

    name: str  # "xgrammar", "llguidance"
    version: str  # as installed
    caches: bool  # vLLM keeps its compiled grammars across requests (xgrammar) or not (llguidance)

    def compile(self, schema_text: str) -> CompiledGrammar: ...

    def accepts(self, compiled: CompiledGrammar, text: str) -> bool: ...

    def sample(self, compiled: CompiledGrammar, rng: random.Random) -> str | None: ...

    def request_compiles(self, texts: list[str]) -> list[float]: ...


class XgrammarEngine:
    """One tokenizer, loaded once; compile per schema, then any number of checks and samples."""

    name = "xgrammar"
    caches = True  # vLLM's xgrammar backend compiles through one caching GrammarCompiler

    def __init__(self, tokenizer_json: str) -> None:
        self.version = metadata.version("xgrammar")
        self._tokenizer, stops, self._info = engines.xgrammar_tokenizer(tokenizer_json)
        if not stops:
            raise ValueError(f"{tokenizer_json}: no end-of-text token among {', '.join(engines.STOP_NAMES)}")
        self.stop = stops[0]
        self._chars = _CharacterGrammars(_character_tokens(self._info.decoded_vocab)[0])

    def compile(self, schema_text: str, kind: str = "json") -> CompiledGrammar:
        """`kind` "structural_tag": a structural tag's text, compiled as vLLM's xgrammar backend does."""
        import xgrammar

        from exporter.engines.grammars import enginelogs

        compiler = xgrammar.GrammarCompiler(self._info, max_threads=8, cache_enabled=False)
        with engines.stderr_captured() as written:  # `gdx lint` already reports these logs
            started = time.perf_counter()
            grammar = _compile(compiler, schema_text, kind)
            seconds = time.perf_counter() - started
        engines.forward(enginelogs.parse("".join(written))[1])
        return CompiledGrammar(grammar, seconds)

    def request_compiles(self, texts: list[str], kind: str = "json") -> list[float]:
        """Seconds of each request's compile through one caching compiler, as vLLM serves them: the
        first of a text is a compile, the rest are cache hits."""
        import xgrammar

        compiler = xgrammar.GrammarCompiler(self._info, max_threads=8, cache_enabled=True)
        out = []
        with engines.stderr_captured():
            for text in texts:
                started = time.perf_counter()
                _compile(compiler, text, kind)
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
        """A random text the grammar accepts, or None when the walk ran too long or got stuck. The walk
        only ever takes character-tokens, so it runs on the same grammar compiled over those alone
        (`_CharacterGrammars`): the same texts, at a fraction of a mask over the whole vocabulary."""
        import xgrammar

        grammar = self._chars.compiled(compiled)
        matcher = xgrammar.GrammarMatcher(grammar)
        bitmask = xgrammar.allocate_token_bitmask(1, self._chars.size)
        return self._chars.walk(lambda: matcher.fill_next_token_bitmask(bitmask), matcher.accept_token,
                                bitmask[0].numpy(), rng)  # fmt: skip


class _CharacterGrammars:
    """xgrammar grammars recompiled over a vocabulary of the character-tokens alone, for the random
    walk. xgrammar allows a token when its bytes continue what the grammar accepts, so a one-character
    token is allowed over this vocabulary exactly when it is over the model's: the walk, which takes
    nothing else (xgrammar's has no `decode`), makes the same texts from the same seed. Why: a mask
    over the whole vocabulary is most of a proof's time (xgrammar 0.2.8, which vLLM 0.32 pins: 0.67 ms
    a step over Llama 3's 128,256 tokens, a `gdx fix` of the demo's log 26 of its 44 s); over the
    printable characters it is microseconds. The last few grammars are kept: a proof samples each one
    several times in a row."""

    KEPT = 4

    def __init__(self, chars: list[str]) -> None:
        import xgrammar

        self.size = len(chars) + 1  # the characters, then the end of text
        info = xgrammar.TokenizerInfo([*chars, "</s>"], vocab_size=self.size, stop_token_ids=[len(chars)])
        self._compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self.walk = _RandomWalk(chars, list(range(len(chars))), len(chars))
        self._kept: list[tuple[CompiledGrammar, Any]] = []

    def compiled(self, compiled: CompiledGrammar) -> Any:
        for known, grammar in self._kept:
            if known is compiled:
                return grammar
        with engines.stderr_captured():  # logged already, when the model's vocabulary compiled it
            grammar = self._compiler.compile_grammar(compiled.grammar.grammar)
        self._kept = [(compiled, grammar), *self._kept[: self.KEPT - 1]]
        return grammar


def _compile(compiler: Any, text: str, kind: str) -> Any:
    if kind == "structural_tag":
        return compiler.compile_structural_tag(_legacy_tag(text) or text)
    return compiler.compile_json_schema(text, any_whitespace=True)


def _legacy_tag(text: str) -> Any:
    """A legacy tag (`structures`, `triggers`, SGLang's `at_least_one`) as SGLang's xgrammar backend
    compiles it (sglang/srt/constrained/xgrammar_backend.py `dispatch_structural_tag`); None for the
    `format` form, which xgrammar reads as it is."""
    from xgrammar import StructuralTag, StructuralTagItem

    value = json.loads(text)
    if not isinstance(value, dict) or "structures" not in value or "format" in value:
        return None
    items = [
        StructuralTagItem(begin=s["begin"], schema=json.dumps(s.get("schema") or {}), end=s["end"])
        for s in value["structures"]
    ]
    tag = StructuralTag.from_legacy_structural_tag(items, value["triggers"])
    tag.format.at_least_one = bool(value.get("at_least_one", False))
    return tag


class LlguidanceEngine:
    """llguidance over the same tokenizer.json, as vLLM's guidance backend runs it: the JSON Schema
    turned into a grammar with flexible whitespace, then an `LLMatcher`, which is the compile; the
    end-of-text token the same as xgrammar's."""

    name = "llguidance"
    caches = False  # vLLM's guidance backend builds an LLMatcher per request: every request compiles

    def __init__(self, tokenizer_json: str) -> None:
        import llguidance

        self.version = metadata.version("llguidance")
        with open(tokenizer_json, encoding="utf-8") as handle:
            text = handle.read()
        stops = _stop_tokens(json.loads(text))
        if not stops:
            raise ValueError(f"{tokenizer_json}: no end-of-text token among {', '.join(engines.STOP_NAMES)}")
        self.stop = stops[0]
        self._tokenizer = llguidance.LLTokenizer(text, eos_token=self.stop)
        single = {chr(c): self._tokenizer.tokenize_bytes(bytes([c])) for c in range(0x20, 0x7F)}
        chars = [c for c, ids in single.items() if len(ids) == 1]  # every byte-level BPE vocabulary: all
        self._walk = _RandomWalk(chars, [single[c][0] for c in chars], self.stop, self._decode)

    def _decode(self, token: int) -> str:
        return str(self._tokenizer.decode_str([token]))

    def compile(self, schema_text: str) -> CompiledGrammar:
        """The grammar and its matcher, timed; a schema llguidance refuses raises ValueError."""
        started = time.perf_counter()
        matcher = self._matcher(schema_text)
        seconds = time.perf_counter() - started
        if matcher.is_error():
            raise ValueError(" ".join(matcher.get_error().split())[:300])
        return CompiledGrammar(matcher, seconds)

    def _matcher(self, schema_text: str) -> Any:
        import llguidance

        grammar = llguidance.LLMatcher.grammar_from_json_schema(
            schema_text, defaults={"whitespace_flexible": True}
        )
        return llguidance.LLMatcher(self._tokenizer, grammar, log_level=0)

    def request_compiles(self, texts: list[str]) -> list[float]:
        """Seconds of each request's compile as vLLM serves them: no cache, each one a compile."""
        out = []
        for text in texts:
            started = time.perf_counter()
            self._matcher(text)
            out.append(time.perf_counter() - started)
        return out

    def tokens(self, text: str) -> list[int]:
        return list(self._tokenizer.tokenize_str(text))

    def accepts(self, compiled: CompiledGrammar, text: str) -> bool:
        """Token by token, then end of text (the matcher stops there, or had stopped already)."""
        matcher = compiled.grammar.deep_copy()
        return bool(
            matcher.consume_tokens(self.tokens(text))
            and matcher.consume_token(self.stop)
            and matcher.is_stopped()
            and not matcher.is_error()
        )

    def sample(self, compiled: CompiledGrammar, rng: random.Random) -> str | None:
        import llguidance.numpy

        matcher = compiled.grammar.deep_copy()
        bitmask = llguidance.numpy.allocate_token_bitmask(1, self._tokenizer.vocab_size)
        return self._walk(lambda: llguidance.numpy.fill_next_token_bitmask(matcher, bitmask),
                          matcher.consume_token, bitmask[0], rng)  # fmt: skip


def _stop_tokens(tokenizer: dict[str, Any]) -> list[int]:
    """The ids of the end-of-text tokens a tokenizer.json has, the likeliest first (as
    engines.end_of_text finds them with the Hugging Face tokenizer)."""
    ids = {t.get("content"): t.get("id") for t in tokenizer.get("added_tokens") or []}
    vocab = (tokenizer.get("model") or {}).get("vocab")
    if isinstance(vocab, dict):
        ids = {**vocab, **ids}
    return [i for i in (ids.get(name) for name in engines.STOP_NAMES) if isinstance(i, int) and i >= 0]


class _RandomWalk:
    """The random walk both engines share: at each step the engine fills its token bitmask, the
    walk picks the end of text (often, when allowed) or one of the character-tokens allowed. Where
    the grammar forces a text, llguidance allows only its canonical tokens (after `{"` with one
    required property, the token of its name): with `decode`, the walk then takes one of those."""

    def __init__(self, chars: list[str], char_ids: list[int], stop: int,
                 decode: Callable[[int], str] | None = None) -> None:  # fmt: skip
        import numpy

        self.chars, self.stop, self.decode = chars, stop, decode
        self.ids = dict(zip(chars, char_ids, strict=True))
        np_ids = numpy.array(char_ids, dtype=numpy.int64)
        self.word, self.bit = np_ids >> 5, np_ids & 31  # where each character-token's bit is
        self.groups: dict[bytes, dict[str, list[str]]] = {}  # the allowed characters by class, per set

    def __call__(self, fill: Callable[[], Any], accept: Callable[[int], bool], words: Any,
                 rng: random.Random) -> str | None:  # fmt: skip
        """`words`: the int32 bitmask `fill` writes into; `accept` feeds the matcher one token."""
        state = _Lexer(rng.choice(APPETITES))
        out: list[str] = []
        for _ in range(MAX_SAMPLE_CHARS):
            fill()
            allowed = ((words[self.word] >> self.bit) & 1).nonzero()[0]
            stop_ok = bool((int(words[self.stop >> 5]) >> (self.stop & 31)) & 1)
            if stop_ok and (not len(allowed) or rng.random() < 0.9):
                return "".join(out) if accept(self.stop) else None
            if not len(allowed):
                token = self._other(words, rng)
                if token is None or not accept(token):
                    return None
                for char in (text := self.decode(token) if self.decode else ""):
                    state.feed(char)
                out.append(text)
                continue
            key = allowed.tobytes()
            if (by_kind := self.groups.get(key)) is None:
                by_kind = self.groups[key] = _by_kind([self.chars[i] for i in allowed])
            choice = state.pick(by_kind, rng)
            if not accept(self.ids[choice]):
                return None
            state.feed(choice)
            out.append(choice)
        return None

    def _other(self, words: Any, rng: random.Random) -> int | None:
        """One of the tokens the bitmask allows besides the end of text, None when none is."""
        import numpy

        if self.decode is None:
            return None
        tokens = numpy.unpackbits(words.view(numpy.uint8), bitorder="little").nonzero()[0]
        tokens = tokens[tokens != self.stop]
        return int(rng.choice(tokens.tolist())) if len(tokens) else None


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

    def pick(self, by_kind: dict[str, list[str]], rng: random.Random) -> str:
        """A class first (by weight), then a character of it: 52 letters must not drown `"`."""
        kinds = list(by_kind)
        weights = [self.weight(kind) for kind in kinds]
        if not any(weights):
            weights = [1.0] * len(kinds)
        kind = rng.choices(kinds, weights)[0]
        return rng.choice(by_kind[kind])


def _by_kind(allowed: list[str]) -> dict[str, list[str]]:
    """The allowed characters by class, each class in the order its first character came."""
    by_kind: dict[str, list[str]] = {}
    for char in allowed:
        by_kind.setdefault(CLASSES.get(char, "other"), []).append(char)
    return by_kind
