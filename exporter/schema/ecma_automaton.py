"""The bounded matcher of the ECMA-262 patterns exporter/schema/ecma_pattern.py reads: apart from
the reader so that each stays one readable module (the grammar and its Unicode classes there, what a
search costs and how it is bounded here). Standard library only: `gdx fix` inlines it after
ecma_pattern.py into the check.py it writes (exporter/fix/command.py), and exporter/schema/ecma_regex.py
runs it where RE2 cannot run a text.

Matching runs the pattern's Thompson automaton over the text, state sets memoised as a small lazy
DFA: linear in the text, each step charged to a budget; past it the verdict is "unsupported" too.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import cast

from exporter.schema.ecma_pattern import EcmaUnsupported, Node, parse_ecma

ECMA_MAX_STATES = 20_000  # automaton states (a counted repeat unrolls); more: unsupported
ECMA_DEFAULT_BUDGET = 1_000_000  # steps of one search when the caller gives none
_ECMA_CACHE_LIMIT = 4_096  # memoised transitions per compiled pattern
_ECMA_CACHED_STATES = 200_000  # states those transitions' sets may hold in all
_ECMA_PROGRAMS = 256  # automata kept between searches


@dataclass(frozen=True)
class EcmaVerdict:
    """A search's answer: `matched` True or False, or None with `why` (unsupported, over budget)."""

    matched: bool | None
    why: str = ""
    steps: int = 0


# The automaton: parallel lists, one entry per state.
_E_SET, _E_SPLIT, _E_ASSERT, _E_MATCH, _E_JUMP = range(5)


class EcmaProgram:
    """A Thompson automaton of one pattern, with its memoised state-set transitions."""

    def __init__(self, tree: Node) -> None:
        self.kind: list[int] = []
        self.arg: list[object] = []
        self.out1: list[int] = []
        self.out2: list[int] = []
        self.start = self._build(tree, self._add(_E_MATCH, None))
        self.cache: dict[tuple[object, ...], frozenset[int]] = {}
        self.cached = 0  # states held in the cache's sets
        self.cost = 0
        # anchored: from a position past the first, the start reaches nothing (every way starts `^`)
        self.anchored = all(
            not any(self.kind[s] in (_E_SET, _E_MATCH) for s in self._closure([self.start], ctx))
            for ctx in ((False, False, a, b) for a in (False, True) for b in (False, True))
        )

    def _add(self, kind: int, arg: object, out1: int = -1, out2: int = -1) -> int:
        if len(self.kind) >= ECMA_MAX_STATES:
            raise EcmaUnsupported(f"more than {ECMA_MAX_STATES} automaton states")
        self.kind.append(kind)
        self.arg.append(arg)
        self.out1.append(out1)
        self.out2.append(out2)
        return len(self.kind) - 1

    def _build(self, node: Node, then: int) -> int:
        """The state that matches `node` and goes on to `then` (built back to front, iteratively
        for sequences; nesting is bounded by the reader)."""
        tag = node[0]
        if tag == "set":
            ranges = node[1]
            return self._add(_E_SET, (tuple(r[0] for r in ranges), tuple(r[1] for r in ranges)), then)
        if tag == "seq":
            for item in reversed(node[1]):
                then = self._build(item, then)
            return then
        if tag == "alt":
            starts = [self._build(branch, then) for branch in node[1]]
            state = starts[-1]
            for other in reversed(starts[:-1]):
                state = self._add(_E_SPLIT, None, other, state)
            return state
        if tag == "rep":
            _, body, lo, hi = node
            if hi is None:
                loop = self._add(_E_SPLIT, None)
                self.out1[loop] = self._build(body, loop)
                self.out2[loop] = then
                then = loop
            else:
                for _ in range(hi - lo):
                    then = self._add(_E_SPLIT, None, self._build(body, then), then)
            for _ in range(lo):
                then = self._build(body, then)
            return then
        return self._add(_E_ASSERT, tag, then)

    def _closure(self, seeds: list[int], ctx: tuple[bool, bool, bool, bool]) -> frozenset[int]:
        """The states reachable without reading: ctx = (at start, at end, the character before is
        a word character, the one after is). `self.cost` counts the states it visited."""
        at_start, at_end, before, after = ctx
        seen: set[int] = set()
        stack = list(seeds)
        kind, out1, out2, arg = self.kind, self.out1, self.out2, self.arg
        while stack:
            state = stack.pop()
            if state in seen or state < 0:
                continue
            seen.add(state)
            k = kind[state]
            if k == _E_SPLIT:
                stack.append(out1[state])
                stack.append(out2[state])
            elif k == _E_ASSERT:
                tag = arg[state]
                if (
                    (tag == "bol" and at_start)
                    or (tag == "eol" and at_end)
                    or (tag == "wordb" and before != after)
                    or (tag == "nwordb" and before == after)
                ):
                    stack.append(out1[state])
        self.cost = len(seen) + 1
        return frozenset(s for s in seen if kind[s] in (_E_SET, _E_MATCH))

    def search(self, text: str, budget: int = ECMA_DEFAULT_BUDGET) -> EcmaVerdict:
        """Whether the pattern matches somewhere in `text` (ECMA `RegExp.prototype.test`), in at
        most `budget` steps (a step: a state visited, or a memoised transition taken)."""
        n = len(text)
        kind, out1, arg, cache = self.kind, self.out1, self.arg, self.cache
        match_state = 0  # the first state added

        def word(i: int) -> bool:
            return 0 <= i < n and text[i].isascii() and (text[i].isalnum() or text[i] == "_")

        current = self._closure([self.start], (True, n == 0, False, word(0)))
        steps = self.cost
        for i in range(n):
            if match_state in current:
                return EcmaVerdict(True, steps=steps)
            if self.anchored and not current:
                return EcmaVerdict(False, steps=steps)
            ch = text[i]
            ctx = (False, i + 1 == n, word(i), word(i + 1))
            key = (current, ch, ctx)
            found = cache.get(key)
            if found is None:
                code = ord(ch)
                moved = []
                for state in current:
                    if kind[state] == _E_SET:
                        los, his = cast(tuple[tuple[int, ...], tuple[int, ...]], arg[state])
                        at = bisect_right(los, code) - 1
                        if at >= 0 and code <= his[at]:
                            moved.append(out1[state])
                if not self.anchored:
                    moved.append(self.start)
                found = self._closure(moved, ctx)
                steps += len(current) + self.cost
                self.cached += len(found)
                if len(cache) >= _ECMA_CACHE_LIMIT or self.cached > _ECMA_CACHED_STATES:
                    cache.clear()
                    self.cached = len(found)
                cache[key] = found
            else:
                steps += 1
            if steps > budget:
                return EcmaVerdict(None, f"not checked: more than {budget} steps", steps)
            current = found
        return EcmaVerdict(match_state in current, steps=steps)


_ecma_programs: dict[str, EcmaProgram | str] = {}


def ecma_program(pattern: str) -> EcmaProgram:
    """The automaton of a pattern (kept for the next call); raises EcmaUnsupported, only that."""
    known = _ecma_programs.get(pattern)
    if known is None:
        try:
            known = EcmaProgram(parse_ecma(pattern))
        except EcmaUnsupported as err:
            known = str(err)
        except (RecursionError, MemoryError) as err:
            known = f"too large: {type(err).__name__}"
        if len(_ecma_programs) >= _ECMA_PROGRAMS:
            _ecma_programs.clear()
        _ecma_programs[pattern] = known
    if isinstance(known, str):
        raise EcmaUnsupported(known)
    return known


def ecma_search(pattern: str, text: str, budget: int = ECMA_DEFAULT_BUDGET) -> EcmaVerdict:
    """Whether an ECMA-262 pattern matches somewhere in `text`, within `budget` steps (building
    the automaton included); never raises."""
    try:
        program = ecma_program(pattern)
    except EcmaUnsupported as err:
        return EcmaVerdict(None, f"not checked: {err}", min(budget, len(pattern) + 1))
    verdict = program.search(text, budget - len(program.kind))
    why = f"not checked: more than {budget} steps" if verdict.why else ""
    return EcmaVerdict(verdict.matched, why, verdict.steps + len(program.kind))
