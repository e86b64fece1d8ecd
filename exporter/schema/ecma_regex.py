"""Every schema-supplied pattern the product evaluates goes through `search` here: RE2 (linear time,
memory bounded by its options) on the pattern as ECMA-262 reads it, never Python's backtracking `re`.

The pattern is read by exporter/schema/ecma_pattern.py (the dialect and its choices are documented
there) and written out as RE2 syntax with ECMA's meaning spelled out: `^`/`$` as `\\A`/`\\z`, every
class (`\\d`, `\\w`, `\\s`, `.`, `\\p{..}`, `[...]`) as explicit code point ranges. What RE2 cannot
run (a text with a lone surrogate, which UTF-8 cannot carry; a repeat nesting past RE2's limits)
goes to the same reader's own bounded automaton. Lookaround, which neither runs, goes to the `regex`
package (backtracking, so under a timeout: LOOK_TIMEOUT per search) with the same explicit classes;
past the timeout, and for what nothing here reads (backreferences), the verdict is unsupported, with
the reason, for the caller to say "not checked" instead of guessing.

RE2 and `regex` are this package's dependencies; where only the schema core is imported without them
(an engine's own environment, as the tests run vLLM's code beside it), the reader's automaton answers
alone and lookaround is unsupported.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

try:
    import re2  # type: ignore[import-untyped]
except ImportError:  # the core imported without the package's dependencies
    re2 = None
try:
    import regex  # type: ignore[import-untyped]
except ImportError:
    regex = None

from exporter.schema.ecma_automaton import EcmaProgram, EcmaVerdict, ecma_program
from exporter.schema.ecma_pattern import ECMA_MAX_CODE, EcmaUnsupported, Node, Ranges, parse_ecma

MAX_MEMORY = 8 << 20  # bytes RE2 may take for one pattern's automata
LOOK_TIMEOUT = 0.05  # seconds one lookaround search may backtrack
MAX_TEXT = 1 << 20  # characters of a value matched; longer: unsupported
FALLBACK_BUDGET = 1_000_000  # steps of the reader's own automaton when RE2 cannot run the text
CACHED = 1_024  # compiled patterns kept
_NEVER = r"[^\x{0}-\x{10FFFF}]"

__all__ = ["EcmaVerdict", "search", "to_re2"]


@dataclass(frozen=True)
class _Compiled:
    regexp: object | None  # the RE2 object; None when RE2 refuses the translation
    why: str = ""  # why the pattern is not read at all (then neither engine runs)
    look: Any = None  # the `regex` object of a pattern with lookaround (RE2 and the automaton do not run)


@dataclass(frozen=True)
class _Syntax:
    """How one engine writes what the tree means: a class of code points, and the assertions."""

    ranges: Callable[[Ranges], str]
    anchors: dict[str, str]


def _write(tree: Node, syntax: _Syntax) -> str:
    """The tree in `syntax`, with its ECMA meaning spelled out (nesting is bounded by the reader)."""
    tag = tree[0]
    if tag == "set":
        return syntax.ranges(tree[1])
    if tag == "seq":
        return "".join(f"(?:{_write(item, syntax)})" for item in tree[1])
    if tag == "alt":
        return "(?:" + "|".join(_write(branch, syntax) for branch in tree[1]) + ")"
    if tag == "rep":
        _, body, lo, hi = tree
        inner = f"(?:{_write(body, syntax)})"
        if hi is None:
            return inner + ("*" if lo == 0 else "+" if lo == 1 else f"{{{lo},}}")
        return inner + (f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}")
    if tag == "look":  # only `regex` gets such a tree
        _, behind, negative, body = tree
        return f"(?{'<' if behind else ''}{'!' if negative else '='}{_write(body, syntax)})"
    return syntax.anchors[tag]


def _re2_ranges(ranges: Ranges) -> str:
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


def _python_ranges(ranges: Ranges) -> str:
    if not ranges:
        return r"[^\x00-\U0010FFFF]"
    parts = (f"\\U{lo:08X}" if lo == hi else f"\\U{lo:08X}-\\U{hi:08X}" for lo, hi in ranges)
    return "[" + "".join(parts) + "]"


_RE2 = _Syntax(_re2_ranges, {"bol": r"\A", "eol": r"\z", "wordb": r"\b", "nwordb": r"\B"})
# `regex`: `\Z` is the end only there; ASCII word boundaries come from the ASCII flag.
_PYTHON = _Syntax(_python_ranges, {"bol": r"\A", "eol": r"\Z", "wordb": r"\b", "nwordb": r"\B"})


def to_re2(tree: Node) -> str:
    """RE2 syntax with the tree's ECMA meaning."""
    return _write(tree, _RE2)


def to_python(tree: Node) -> str:
    """The `regex` package's syntax with the tree's ECMA meaning, lookaround included."""
    return _write(tree, _PYTHON)


def _lookaround(pattern: str, why: str) -> _Compiled:
    """A pattern the reader refused for its lookaround, compiled for `regex` (or refused: `why`)."""
    if regex is None or "lookaround" not in why:
        return _Compiled(None, f"not checked: {why}")
    try:
        tree = parse_ecma(pattern, lookaround=True)
        return _Compiled(None, look=regex.compile(to_python(tree), regex.ASCII | regex.V0))
    except EcmaUnsupported as err:
        return _Compiled(None, f"not checked: {err}")
    except (regex.error, RecursionError, MemoryError, ValueError, OverflowError) as err:
        return _Compiled(None, f"not checked: {type(err).__name__}")


@functools.lru_cache(maxsize=CACHED)
def _compile(pattern: str) -> _Compiled:
    try:
        tree = parse_ecma(pattern)
    except EcmaUnsupported as err:
        return _lookaround(pattern, str(err))
    if re2 is None:
        return _Compiled(None)  # the reader's automaton, under its budget
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
    if compiled.look is not None:
        try:
            return EcmaVerdict(compiled.look.search(text, timeout=LOOK_TIMEOUT) is not None)
        except TimeoutError:
            return EcmaVerdict(None, f"not checked: its lookaround ran past {LOOK_TIMEOUT:g} s")
        except (RecursionError, MemoryError, ValueError):
            return EcmaVerdict(None, "not checked: its lookaround could not run")
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
