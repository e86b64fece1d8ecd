"""Schema patterns as ECMA-262 reads them, in linear time (exporter/schema/ecma_regex.py, RE2; and
exporter/schema/ecma_pattern.py and ecma_automaton.py, the standard-library reader and automaton
check.py carries): Python's `re` backtracked for minutes on a 350-byte schema and read `$`, `\\d`,
`\\w` its own way."""

from __future__ import annotations

import gzip
import json
import random
import re
import time
from collections.abc import Callable
from typing import Any

import pytest

from exporter.schema import ecma_regex
from exporter.schema.ecma_automaton import EcmaVerdict, ecma_search
from tools.harness import JSONSCHEMABENCH

ENGINES: dict[str, Callable[[str, str], EcmaVerdict]] = {
    "re2": ecma_regex.search,
    "automaton": lambda pattern, text: ecma_search(pattern, text),
}

# (pattern, text, ECMA's answer); each where Python's re.search answers otherwise is marked
SEMANTICS = [
    ("^abc$", "abc\n", False),  # re: True ($ before a final newline)
    (r"^\d+$", "١٢٣", False),  # re: True (Arabic-Indic digits)
    (r"^\w+$", "é", False),  # re: True
    (r"^\s$", "\x85", False),  # re: True (NEL is no ECMA white space)
    (r"^\s$", "\ufeff", True),  # re: False
    ("^.$", "\u2028", False),  # re: True
    ("[^]", "\n", True),  # re: error
    ("[]", "a", False),  # re: error
    (r"\u{1F600}", "😀", True),
    (r"\uD83D\uDE00", "😀", True),
    (r"^\cJ$", "\n", True),
    (r"\/", "/", True),
    (r"[\b]", "\b", True),
    (r"\bfoo\b", "a foo b", True),
    (r"\bfoo\b", "afoo", False),
    ("x{", "x{", True),
    (r"[\d-z]", "-", True),
    (r"^\p{Lu}+$", "ÀB", True),
    (r"^\p{Lu}+$", "Àb", False),
    (r"^a{2,3}$", "aaaa", False),
    (r"\1", "\x01", True),  # no group: a legacy octal escape
    ("a|", "zzz", True),
    ("^$", "", True),
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("pattern", "text", "expected"), SEMANTICS)
def test_patterns_mean_what_ecma_262_says(engine: str, pattern: str, text: str, expected: bool) -> None:
    assert ENGINES[engine](pattern, text).matched is expected


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    ("pattern", "text"),
    [("^(a+)+$", "a" * 40 + "!"), ("^(a|a)*$", "a" * 5000 + "!"), ("^(a|aa)+$", "a" * 5000 + "!"),
     (r"^([a-z]+ ?){1,40}$", "ab " * 3000 + "!"), ("^((a*)*)*b$", "a" * 20_000)],
)  # fmt: skip
def test_catastrophic_patterns_answer_in_milliseconds(engine: str, pattern: str, text: str) -> None:
    start = time.perf_counter()
    assert ENGINES[engine](pattern, text).matched is False
    assert time.perf_counter() - start < 0.5


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("pattern", [r"(a)\1", r"(?<n>a)\k<n>", "(?i)a", "(", "a**"])
def test_what_is_not_read_is_said_not_guessed(engine: str, pattern: str) -> None:
    verdict = ENGINES[engine](pattern, "aa")
    assert verdict.matched is None and verdict.why.startswith("not checked: ")


@pytest.mark.parametrize("pattern", ["(?=a)a", "(?<!a)b"])
def test_the_automaton_says_it_does_not_read_lookaround(pattern: str) -> None:
    verdict = ecma_search(pattern, "aa")
    assert verdict.matched is None and verdict.why.startswith("not checked: lookaround")


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [("^(?!foo)[a-z]+$", "foobar", False), ("^(?!foo)[a-z]+$", "barfoo", True), ("(?<=a)b", "ab", True),
     ("(?<=a)b", "cb", False), (r"^(?=.*\d)\w+$", "abc1", True), (r"^(?=.*\d)\w+$", "abc", False),
     (r"^(?=.*\d)\w+$", "abc\u0661", False),  # ECMA's \d is ASCII, in a lookahead too
     ("^(?=a)a$", "a\n", False),  # $ only at the end
     (r"(?=\bx)x", "\u00e9x", True)],  # an ASCII word boundary: é is not a word character
)  # fmt: skip
def test_lookaround_is_matched_as_ecma_262_reads_it(pattern: str, text: str, expected: bool) -> None:
    assert ecma_regex.search(pattern, text).matched is expected


@pytest.mark.parametrize("pattern", ["^(?=(a|aa)+$)", "^(?!(a|a?)+$)", r"(?<=(\w+\s?)+)!x"])
def test_a_lookaround_that_backtracks_is_stopped_and_said(pattern: str) -> None:
    start = time.perf_counter()
    verdict = ecma_regex.search(pattern, "a" * 5000 + "!")
    assert time.perf_counter() - start < 2.0  # unbounded, each backtracks for longer than a test runs
    assert verdict.matched is not True or verdict.why == ""
    if verdict.matched is None:
        assert "lookaround ran past" in verdict.why


def test_without_re2_and_regex_the_reader_answers_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The core imported where the package's dependencies are not (an engine's own environment)."""
    monkeypatch.setattr(ecma_regex, "re2", None)
    monkeypatch.setattr(ecma_regex, "regex", None)
    ecma_regex._compile.cache_clear()
    try:
        assert ecma_regex.search("^(a+)+$", "a" * 40 + "!").matched is False
        assert ecma_regex.search(r"^\d+$", "123").matched is True
        assert ecma_regex.search("(?=a)a", "a").why.startswith("not checked: lookaround")
    finally:
        ecma_regex._compile.cache_clear()


def test_the_automaton_stops_at_its_budget() -> None:
    verdict = ecma_search("^(a|b|ab)*c", "ab" * 5000, budget=1000)
    assert verdict.matched is None and "more than 1000 steps" in verdict.why
    assert ecma_search("^(a|b|ab)*c", "ab" * 5000).matched is False


def _strings(node: Any, out: set[str]) -> None:
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            out.update(k for k in item if isinstance(k, str))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            out.add(item)


def _bench() -> dict[str, set[str]]:
    """Each pattern of JSONSchemaBench (`pattern`, `patternProperties` names) with the strings of
    its own document: constants, enums, examples, test instances."""
    found: dict[str, set[str]] = {}
    for path in sorted(JSONSCHEMABENCH.glob("*/*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            for line in lines:
                row = json.loads(line)
                texts: set[str] = set()
                _strings(row["schema"], texts)
                _strings([t.get("data") for t in row.get("tests") or []], texts)
                stack = [row["schema"]]
                while stack:
                    node = stack.pop()
                    if isinstance(node, dict):
                        if isinstance(node.get("pattern"), str):
                            found.setdefault(node["pattern"], set()).update(texts)
                        if isinstance(node.get("patternProperties"), dict):
                            for name in node["patternProperties"]:
                                found.setdefault(name, set()).update(texts)
                        stack.extend(node.values())
                    elif isinstance(node, list):
                        stack.extend(node)
    return found


HOSTILE = ["", "\n", "a\n", "1\n", "١٢٣", "é", "\u2028", "\x85", "\ufeff", "😀", "a" * 300 + "!",
           "ab " * 100, "0" * 50, "A-Z_a-z 0-9", "\t\r\n ", "x" * 2000, "2024-01-01T00:00:00Z",
           "user@example.com"]  # fmt: skip


# The whole benchmark: about 20 s, so make test runs it and make check (the inner loop) does not.
@pytest.mark.slow
def test_re2_and_the_automaton_agree_on_jsonschemabench() -> None:
    """The RE2 path (the product) and the standard-library automaton (check.py) on every pattern of
    the vendored JSONSchemaBench, over its own document's strings, each with a trailing newline,
    a shared sample of the bench's strings and hostile ones."""
    bench = _bench()
    assert len(bench) > 1500
    rng = random.Random(47)
    shared = sorted({text for texts in bench.values() for text in texts if len(text) < 200})
    sample = rng.sample(shared, 40)
    compared = unread = looked = 0
    differ: list[str] = []
    for pattern, own in sorted(bench.items()):
        texts = sorted(t for t in own if len(t) < 2000)
        texts = rng.sample(texts, min(len(texts), 60))
        for text in [*texts, *(t + "\n" for t in texts[:20]), *sample, *HOSTILE]:
            ours, theirs = ecma_regex.search(pattern, text), ecma_search(pattern, text)
            if theirs.matched is None and "lookaround" in theirs.why:
                looked += ours.matched is not None  # the product reads it (`regex`, under a timeout)
                continue
            if ours.matched is None or theirs.matched is None:
                unread += 1
                assert (ours.matched is None) == (theirs.matched is None) or "steps" in theirs.why, pattern
                continue
            compared += 1
            if ours.matched != theirs.matched:
                differ.append(f"{pattern!r} on {text!r}: re2 {ours.matched}, automaton {theirs.matched}")
    print(f"{len(bench)} patterns, {compared} verdicts compared, {unread} not read, {looked} lookaround")
    assert compared > 100_000 and looked > 0
    assert differ == [], differ[:10]


def test_on_jsonschemabench_ecma_and_python_differ_only_where_the_dialects_do() -> None:
    """Where ECMA's reading and Python's re disagree on the bench's own instances, the text has a
    trailing newline or non-ASCII text (what this module exists for), never anything else."""
    bench = _bench()
    differ: list[str] = []
    for pattern, own in sorted(bench.items())[:800]:
        for text in sorted(own)[:30]:
            ours = ecma_regex.search(pattern, text).matched
            if ours is None or len(text) > 200:
                continue
            try:
                python = re.search(pattern, text) is not None
            except (re.error, RecursionError):
                continue
            if ours != python and text.isascii() and not text.endswith("\n"):
                differ.append(f"{pattern!r} on {text!r}: ecma {ours}, re {python}")
    assert differ == [], differ[:10]
