"""JSON Schema's `pattern` as ECMA-262 reads it, matched in bounded time. Standard library only:
`gdx fix` inlines this file, then its matcher (exporter/schema/ecma_automaton.py), into the check.py
it writes (exporter/fix/command.py), and the product reads patterns with the same reader before RE2
runs them (exporter/schema/ecma_regex.py).

Why not Python's `re`: it backtracks (`^(a+)+$` on forty `a`s and a `!` runs for minutes without
releasing the GIL), its `$` matches before a trailing newline, and its `\\d`, `\\w`, `\\s` take
non-ASCII digits, letters and spaces, so outputs an ECMA-262 engine refuses would pass.

The dialect read: a pattern has no flags in JSON Schema; as 2020-12 asks ("built with the u flag or
equivalent"), it is matched over code points, and `\\u{...}` and `\\p{...}` (general categories,
from Python's own Unicode database) are read as under the u flag; `\\uD83D\\uDE00` is one code point.
Everything else the u flag would refuse is read as Annex B does (identity escapes such as `\\-` or
`\\/`, a lone `{` or `]`, legacy octal escapes, `\\c` not followed by a letter). `^` and `$` are the
input's ends only; `.` is any code point but \\n, \\r, U+2028, U+2029; `\\d` is [0-9], `\\w` is
[A-Za-z0-9_], `\\s` is ECMA's white space and line terminators, `\\b` ASCII word boundaries.
Lookaround, backreferences and Unicode script properties are not matched here: the verdict then
says so ("unsupported") instead of guessing. (`parse_ecma(..., lookaround=True)` reads lookaround
into the tree for a backtracking engine with a timeout to run: exporter/schema/ecma_regex.py.)

This module reads a pattern into a tree (`parse_ecma`); exporter/schema/ecma_automaton.py matches
that tree in time linear in the text, within a budget (`ecma_search`).
"""

from __future__ import annotations

import unicodedata
from typing import Any

ECMA_MAX_CODE = 0x10FFFF
ECMA_MAX_PATTERN = 10_000  # characters of a pattern read; longer: unsupported
ECMA_MAX_COUNT = 1_000  # the largest {n,m} read, as RE2's own limit

Ranges = tuple[tuple[int, int], ...]


class EcmaUnsupported(Exception):
    """A pattern this reader does not match (lookaround, a backreference) or that is not ECMA-262."""


# The pattern's tree: ("set", ranges) | ("seq", [node]) | ("alt", [node]) | ("rep", node, lo, hi|None)
# | ("bol",) | ("eol",) | ("wordb",) | ("nwordb",); read with lookaround also ("look", behind, negative, node)
Node = tuple[Any, ...]


def _ecma_norm(ranges: list[tuple[int, int]]) -> Ranges:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return tuple(out)


def _ecma_negate(ranges: Ranges) -> Ranges:
    out: list[tuple[int, int]] = []
    start = 0
    for lo, hi in ranges:
        if lo > start:
            out.append((start, lo - 1))
        start = hi + 1
    if start <= ECMA_MAX_CODE:
        out.append((start, ECMA_MAX_CODE))
    return tuple(out)


ECMA_DIGIT: Ranges = ((0x30, 0x39),)
ECMA_WORD: Ranges = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
ECMA_SPACE: Ranges = _ecma_norm([(0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680),
                                 (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F),
                                 (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF)])  # fmt: skip
ECMA_DOT: Ranges = _ecma_negate(_ecma_norm([(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)]))
_ECMA_CLASSES = {"d": ECMA_DIGIT, "w": ECMA_WORD, "s": ECMA_SPACE}
_ECMA_CONTROL = {"f": 0x0C, "n": 0x0A, "r": 0x0D, "t": 0x09, "v": 0x0B}
_ECMA_SYNTAX = frozenset("^$\\.*+?()[]{}|")
_ECMA_CATEGORY_NAMES = {
    "Letter": "L", "Cased_Letter": "LC", "Uppercase_Letter": "Lu", "Lowercase_Letter": "Ll",
    "Titlecase_Letter": "Lt", "Modifier_Letter": "Lm", "Other_Letter": "Lo", "Mark": "M",
    "Combining_Mark": "M", "Nonspacing_Mark": "Mn", "Spacing_Mark": "Mc", "Enclosing_Mark": "Me",
    "Number": "N", "Decimal_Number": "Nd", "digit": "Nd", "Letter_Number": "Nl", "Other_Number": "No",
    "Punctuation": "P", "punct": "P", "Connector_Punctuation": "Pc", "Dash_Punctuation": "Pd",
    "Open_Punctuation": "Ps", "Close_Punctuation": "Pe", "Initial_Punctuation": "Pi",
    "Final_Punctuation": "Pf", "Other_Punctuation": "Po", "Symbol": "S", "Math_Symbol": "Sm",
    "Currency_Symbol": "Sc", "Modifier_Symbol": "Sk", "Other_Symbol": "So", "Separator": "Z",
    "Space_Separator": "Zs", "Line_Separator": "Zl", "Paragraph_Separator": "Zp", "Other": "C",
    "Control": "Cc", "cntrl": "Cc", "Format": "Cf", "Surrogate": "Cs", "Private_Use": "Co",
    "Unassigned": "Cn",
}  # fmt: skip
_ecma_category_cache: dict[str, Ranges] = {}
_ECMA_EMPTY_PLANES = (0x40000, 0xDFFFF)


def _ecma_category(name: str) -> Ranges:
    """The code points of a general category (one letter: its group; LC: Lu, Ll, Lt), as Python's
    Unicode database has them. The first use walks every code point once (about half a second)."""
    short = _ECMA_CATEGORY_NAMES.get(name, name)
    if short in _ecma_category_cache:
        return _ecma_category_cache[short]
    wanted = {"Lu", "Ll", "Lt"} if short == "LC" else None
    if not _ecma_category_cache:
        spans: dict[str, list[tuple[int, int]]] = {}
        low, high = _ECMA_EMPTY_PLANES  # planes 4 to 13: no assigned code point, one Cn run
        for code in (*range(low), *range(high + 1, ECMA_MAX_CODE + 1)):
            cat = unicodedata.category(chr(code))
            runs = spans.setdefault(cat, [])
            if runs and runs[-1][1] == code - 1:
                runs[-1] = (runs[-1][0], code)
            else:
                runs.append((code, code))
        spans["Cn"] = list(_ecma_norm([*spans.get("Cn", []), (low, high)]))
        for cat, runs in spans.items():
            _ecma_category_cache[cat] = tuple(runs)
        groups: dict[str, list[tuple[int, int]]] = {}
        for cat, runs in spans.items():
            groups.setdefault(cat[0], []).extend(runs)
        for letter, runs in groups.items():
            _ecma_category_cache[letter] = _ecma_norm(runs)
    if wanted:
        found = _ecma_norm([r for cat in wanted for r in _ecma_category_cache.get(cat, ())])
        _ecma_category_cache[short] = found
        return found
    if short not in _ecma_category_cache:
        if len(short) in (1, 2) and short[0] in "LMNPSZC":
            return ()  # a category with no code point in this database
        raise EcmaUnsupported(f"Unicode property {name!r} is not read")
    return _ecma_category_cache[short]


def _ecma_property(body: str) -> Ranges:
    """`\\p{...}`: a general category (`L`, `Lu`, `gc=Lu`, `General_Category=Letter`), `Any`,
    `ASCII`, `ASCII_Hex_Digit`; scripts and other binary properties are not read."""
    if "=" in body:
        key, _, value = body.partition("=")
        if key not in ("gc", "General_Category"):
            raise EcmaUnsupported(f"Unicode property {key!r} is not read")
        return _ecma_category(value)
    fixed = {"Any": ((0, ECMA_MAX_CODE),), "ASCII": ((0, 0x7F),),
             "ASCII_Hex_Digit": ((0x30, 0x39), (0x41, 0x46), (0x61, 0x66))}  # fmt: skip
    if body in fixed:
        return fixed[body]
    return _ecma_category(body)


def _ecma_count(digits: str) -> int:
    """A repeat count; one of more than eight digits reads as 10**8 (past ECMA_MAX_COUNT: refused)."""
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) <= 8 else 10**8


class _EcmaReader:
    """A recursive-descent reader of ECMA-262's Pattern grammar (Annex B leniency, u-flag code
    points). Nesting is bounded so that a hostile pattern cannot exhaust the stack."""

    MAX_NESTING = 100

    def __init__(self, pattern: str, lookaround: bool = False) -> None:
        self.text = pattern
        self.lookaround = lookaround
        self.at = 0
        self.nesting = 0
        self.groups, self.named = self._count_groups()

    def _count_groups(self) -> tuple[int, bool]:
        text, i, count, named, in_class = self.text, 0, 0, False, False
        while i < len(text):
            ch = text[i]
            if ch == "\\":
                i += 2
                continue
            if in_class:
                in_class = ch != "]"
            elif ch == "[":
                in_class = True
            elif ch == "(":
                if not text.startswith("?", i + 1):
                    count += 1
                elif text.startswith("?<", i + 1) and text[i + 3 : i + 4] not in ("=", "!"):
                    count += 1
                    named = True
            i += 1
        return count, named

    def fail(self, why: str) -> EcmaUnsupported:
        return EcmaUnsupported(f"{why} at {self.at}")

    def peek(self, n: int = 0) -> str:
        i = self.at + n
        return self.text[i] if i < len(self.text) else ""

    def read(self) -> Node:
        node = self.disjunction()
        if self.at < len(self.text):
            raise self.fail("unbalanced )")
        return node

    def disjunction(self) -> Node:
        self.nesting += 1
        if self.nesting > self.MAX_NESTING:
            raise self.fail("nested too deep")
        branches = [self.alternative()]
        while self.peek() == "|":
            self.at += 1
            branches.append(self.alternative())
        self.nesting -= 1
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def alternative(self) -> Node:
        items: list[Node] = []
        while self.at < len(self.text) and self.peek() not in ("|", ")"):
            items.append(self.term())
        return items[0] if len(items) == 1 else ("seq", items)

    def term(self) -> Node:
        ch = self.peek()
        if ch == "^":
            self.at += 1
            return ("bol",)
        if ch == "$":
            self.at += 1
            return ("eol",)
        if ch == "\\" and self.peek(1) in ("b", "B"):
            self.at += 2
            return ("wordb",) if self.text[self.at - 1] == "b" else ("nwordb",)
        if ch == "(" and self.text.startswith(("(?=", "(?!", "(?<=", "(?<!"), self.at):
            if not self.lookaround:
                raise self.fail("lookaround is not read")
            behind = self.text[self.at + 2] == "<"
            negative = self.text[self.at + 2 + behind] == "!"
            self.at += 3 + behind
            node = self.disjunction()
            if self.peek() != ")":
                raise self.fail("missing )")
            self.at += 1
            return ("look", behind, negative, node)
        atom = self.atom()
        return self.quantified(atom)

    def quantified(self, atom: Node) -> Node:
        ch = self.peek()
        if ch in ("*", "+", "?"):
            self.at += 1
            lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[ch]
        elif ch == "{" and (bounds := self._braces()) is not None:
            lo, hi = bounds
        else:
            return atom
        if self.peek() == "?":
            self.at += 1  # lazy: the same language, and a search only asks whether one matches
        if self.peek() in ("*", "+", "?") or (self.peek() == "{" and self._braces(peek=True) is not None):
            raise self.fail("nothing to repeat")
        if (hi is not None and lo > hi) or lo > ECMA_MAX_COUNT or (hi or 0) > ECMA_MAX_COUNT:
            raise self.fail("repeat count out of range" if hi is None or lo <= hi else "numbers out of order")
        return ("rep", atom, lo, hi)

    def _braces(self, peek: bool = False) -> tuple[int, int | None] | None:
        """`{n}`, `{n,}`, `{n,m}` at the cursor (consumed unless peek); None: a literal `{`."""
        text, i = self.text, self.at + 1
        j = i
        while j < len(text) and text[j].isascii() and text[j].isdigit():
            j += 1
        if j == i:
            return None
        lo_text, hi_text = text[i:j], None
        if j < len(text) and text[j] == ",":
            k = j + 1
            while k < len(text) and text[k].isascii() and text[k].isdigit():
                k += 1
            hi_text, j = text[j + 1 : k], k
        if j >= len(text) or text[j] != "}":
            return None
        if not peek:
            self.at = j + 1
        lo = _ecma_count(lo_text)
        if hi_text is None:
            return lo, lo
        return lo, _ecma_count(hi_text) if hi_text else None

    def atom(self) -> Node:
        ch = self.peek()
        if ch in ("*", "+", "?") or (ch == "{" and self._braces(peek=True) is not None):
            raise self.fail("nothing to repeat")
        if ch == "(":
            self.at += 1
            if self.text.startswith("?:", self.at):
                self.at += 2
            elif self.text.startswith("?<", self.at):
                end = self.text.find(">", self.at)
                if end < 0 or not self.text[self.at + 2 : end]:
                    raise self.fail("bad group name")
                self.at = end + 1
            elif self.peek() == "?":
                raise self.fail("invalid group")
            node = self.disjunction()
            if self.peek() != ")":
                raise self.fail("missing )")
            self.at += 1
            return node
        if ch == ")":
            raise self.fail("unbalanced )")
        if ch == ".":
            self.at += 1
            return ("set", ECMA_DOT)
        if ch == "[":
            return ("set", self.char_class())
        if ch == "\\":
            return ("set", self.atom_escape())
        self.at += 1
        code = ord(ch)
        return ("set", ((code, code),))

    def _hex(self, count: int) -> int | None:
        digits = self.text[self.at : self.at + count]
        if len(digits) == count and all(c in "0123456789abcdefABCDEF" for c in digits):
            self.at += count
            return int(digits, 16)
        return None

    def _unicode_escape(self) -> int | None:
        """After `\\u`: `{hex}` or four hex digits (a surrogate pair of escapes is one code point)."""
        if self.peek() == "{":
            end = self.text.find("}", self.at)
            body = self.text[self.at + 1 : end] if end > 0 else ""
            if body and len(body) <= 8 and all(c in "0123456789abcdefABCDEF" for c in body):
                code = int(body, 16)
                if code <= ECMA_MAX_CODE:
                    self.at = end + 1
                    return code
            raise self.fail("bad \\u{...} escape")
        value = self._hex(4)
        if value is not None and 0xD800 <= value <= 0xDBFF and self.text.startswith("\\u", self.at):
            save = self.at
            self.at += 2
            low = self._hex(4)
            if low is not None and 0xDC00 <= low <= 0xDFFF:
                return 0x10000 + ((value - 0xD800) << 10) + (low - 0xDC00)
            self.at = save
        return value

    def atom_escape(self) -> Ranges:
        """`\\` and what follows, outside a class."""
        self.at += 1
        ch = self.peek()
        if not ch:
            raise self.fail("\\ at the end of the pattern")
        if ch.isascii() and ch.isdigit() and ch != "0":
            j = self.at
            while j < len(self.text) and self.text[j].isascii() and self.text[j].isdigit():
                j += 1
            if _ecma_count(self.text[self.at : j]) <= self.groups:
                raise self.fail("a backreference is not read")
        if ch == "k" and self.named:
            raise self.fail("a backreference is not read")
        return self.char_escape(in_class=False)

    def char_escape(self, in_class: bool) -> Ranges:
        """The escape at the cursor (just past the `\\`): a class escape or one code point."""
        ch = self.peek()
        self.at += 1
        if ch in _ECMA_CLASSES:
            return _ECMA_CLASSES[ch]
        if ch in ("D", "W", "S"):
            return _ecma_negate(_ECMA_CLASSES[ch.lower()])
        if ch in ("p", "P") and self.peek() == "{":
            end = self.text.find("}", self.at)
            if end < 0:
                raise self.fail("bad \\p{...}")
            found = _ecma_property(self.text[self.at + 1 : end])
            self.at = end + 1
            return _ecma_negate(found) if ch == "P" else found
        code = self._escaped_code(ch, in_class)
        return ((code, code),)

    def _escaped_code(self, ch: str, in_class: bool) -> int:
        if ch in _ECMA_CONTROL:
            return _ECMA_CONTROL[ch]
        if ch == "b" and in_class:
            return 0x08
        if ch == "c":
            letter = self.peek()
            if (
                letter
                and letter.isascii()
                and (letter.isalpha() or (in_class and (letter.isdigit() or letter == "_")))
            ):
                self.at += 1
                return ord(letter) % 32
            self.at -= 1  # Annex B: `\c` not followed by a letter is a backslash, then `c`
            return ord("\\")
        if ch == "0" and not (self.peek().isascii() and self.peek().isdigit()):
            return 0
        if ch in "01234567":  # Annex B legacy octal: up to three digits, at most \377
            digits = ch
            while (
                len(digits) < 3 and self.peek() in tuple("01234567") and int(digits + self.peek(), 8) <= 0o377
            ):
                digits += self.peek()
                self.at += 1
            return int(digits, 8)
        if ch == "x":
            value = self._hex(2)
            return ord("x") if value is None else value
        if ch == "u":
            value = self._unicode_escape()
            return ord("u") if value is None else value
        return ord(ch)  # an identity escape: `\/`, `\-`, `\.`, and Annex B's any other character

    def char_class(self) -> Ranges:
        self.at += 1
        negate = self.peek() == "^"
        if negate:
            self.at += 1
        ranges: list[tuple[int, int]] = []
        while True:
            if self.at >= len(self.text):
                raise self.fail("missing ]")
            if self.peek() == "]":
                self.at += 1
                break
            lo = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.at += 1
                hi = self.class_atom()
                if len(lo) == 1 and lo[0][0] == lo[0][1] and len(hi) == 1 and hi[0][0] == hi[0][1]:
                    if lo[0][0] > hi[0][0]:
                        raise self.fail("range out of order in character class")
                    ranges.append((lo[0][0], hi[0][0]))
                    continue
                ranges.extend((*lo, (0x2D, 0x2D), *hi))  # Annex B: `[\d-z]` is \d, `-`, z
                continue
            ranges.extend(lo)
        found = _ecma_norm(ranges)
        return _ecma_negate(found) if negate else found

    def class_atom(self) -> Ranges:
        ch = self.peek()
        if ch == "\\":
            self.at += 1
            if not self.peek():
                raise self.fail("\\ at the end of the pattern")
            return self.char_escape(in_class=True)
        self.at += 1
        return ((ord(ch), ord(ch)),)


def parse_ecma(pattern: str, lookaround: bool = False) -> Node:
    """The pattern's tree; raises EcmaUnsupported (never anything else) when it cannot be read.
    `lookaround`: read it into "look" nodes (which the automaton does not run) instead of refusing."""
    if len(pattern) > ECMA_MAX_PATTERN:
        raise EcmaUnsupported(f"longer than {ECMA_MAX_PATTERN} characters")
    try:
        return _EcmaReader(pattern, lookaround).read()
    except (RecursionError, ValueError, OverflowError, IndexError) as err:
        raise EcmaUnsupported(f"cannot be read: {type(err).__name__}") from None
