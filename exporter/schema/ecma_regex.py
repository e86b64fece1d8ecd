"""Every schema-supplied pattern the product evaluates goes through `search` here: RE2 (linear time,
memory bounded by its options) on the pattern as ECMA-262 reads it, never Python's backtracking `re`.

The pattern is read by exporter/schema/ecma_pattern.py (the dialect and its choices are documented
there) and written out as RE2 syntax with ECMA's meaning spelled out: `^`/`$` as `\\A`/`\\z`, every
class (`\\d`, `\\w`, `\\s`, `.`, `\\p{..}`, `[...]`) as explicit code point ranges. What RE2 cannot
run (a text with a lone surrogate, which UTF-8 cannot carry; a repeat nesting past RE2's limits)
goes to the same reader's own bounded automaton. What neither reads (lookaround, backreferences)
comes back unsupported, with the reason, for the caller to say "not checked" instead of guessing.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import re2  # type: ignore[import-untyped]

from exporter.schema.ecma_pattern import (
    ECMA_MAX_CODE,
    EcmaProgram,
    EcmaUnsupported,
    EcmaVerdict,
    Node,
    Ranges,
    ecma_program,
    parse_ecma,
)

MAX_MEMORY = 8 << 20  # bytes RE2 may take for one pattern's automata
MAX_TEXT = 1 << 20  # characters of a value matched; longer: unsupported
FALLBACK_BUDGET = 1_000_000  # steps of the reader's own automaton when RE2 cannot run the text
CACHED = 1_024  # compiled patterns kept
_NEVER = r"[^\x{0}-\x{10FFFF}]"

__all__ = ["EcmaVerdict", "search", "to_re2"]


@dataclass(frozen=True)
class _Compiled:
    regexp: object | None  # the RE2 object; None when RE2 refuses the translation
    why: str = ""  # why the pattern is not read at all (then neither engine runs)


def to_re2(tree: Node) -> str:
    """RE2 syntax with the tree's ECMA meaning (iterative over sequences; nesting is bounded by the
    reader)."""
    tag = tree[0]
    if tag == "set":
        return _ranges(tree[1])
    if tag == "seq":
        return "".join(f"(?:{to_re2(item)})" for item in tree[1])
    if tag == "alt":
        return "(?:" + "|".join(to_re2(branch) for branch in tree[1]) + ")"
    if tag == "rep":
        _, body, lo, hi = tree
        inner = f"(?:{to_re2(body)})"
        if hi is None:
            return inner + ("*" if lo == 0 else "+" if lo == 1 else f"{{{lo},}}")
        return inner + (f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}")
    return {"bol": r"\A", "eol": r"\z", "wordb": r"\b", "nwordb": r"\B"}[tag]


def _ranges(ranges: Ranges) -> str:
    """A class of explicit code points; surrogates left out (a text RE2 runs has none)."""
    kept: list[tuple[int, int]] = []
    for lo, hi in ranges:
        if lo <= 0xDFFF and hi >= 0xD800:
            if lo < 0xD800:
                kept.append((lo, 0xD7FF))
            if hi > 0xDFFF:
                kept.append((0xE000, hi))
        else:
            kept.append((lo, min(hi, ECMA_MAX_CODE)))
    if not kept:
        return _NEVER
    if len(kept) == 1 and kept[0][0] == kept[0][1]:
        return f"\\x{{{kept[0][0]:X}}}"
    return (
        "["
        + "".join(f"\\x{{{lo:X}}}" if lo == hi else f"\\x{{{lo:X}}}-\\x{{{hi:X}}}" for lo, hi in kept)
        + "]"
    )


@functools.lru_cache(maxsize=CACHED)
def _compile(pattern: str) -> _Compiled:
    try:
        tree = parse_ecma(pattern)
    except EcmaUnsupported as err:
        return _Compiled(None, f"not checked: {err}")
    options = re2.Options()
    options.max_mem = MAX_MEMORY
    options.log_errors = False
    try:
        return _Compiled(re2.compile(to_re2(tree), options))
    except (re2.error, RecursionError, MemoryError, ValueError, TypeError):
        return _Compiled(None)  # RE2's limits: the reader's automaton runs it, under a budget


def search(pattern: str, text: str) -> EcmaVerdict:
    """Whether the ECMA-262 `pattern` matches somewhere in `text` (as JSON Schema's `pattern` and
    `patternProperties` ask); matched None with the reason when it is not checked. Never raises."""
    if len(text) > MAX_TEXT:
        return EcmaVerdict(None, f"not checked: a value of more than {MAX_TEXT} characters")
    compiled = _compile(pattern)
    if compiled.why:
        return EcmaVerdict(None, compiled.why)
    if compiled.regexp is not None:
        try:
            return EcmaVerdict(compiled.regexp.search(text) is not None)  # type: ignore[attr-defined]
        except UnicodeEncodeError:
            pass  # a lone surrogate: the reader's automaton reads code points
    try:
        program: EcmaProgram = ecma_program(pattern)
    except EcmaUnsupported as err:
        return EcmaVerdict(None, f"not checked: {err}")
    return program.search(text, FALLBACK_BUDGET)
