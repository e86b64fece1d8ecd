"""Pass an engine's own families through, unchanged, with a `pod` label added: the families whose
name starts with its prefix (`vllm:`, `sglang:`, `trtllm_`: exporter.daemon.targets.ENGINES); the rest of
the page is validated and dropped.

Why not prometheus-client's parser and renderer: on the real vLLM page (364 `vllm:` samples) its
text parser takes about 14 ms and its renderer about 3 ms, so 8 targets cost over 130 ms per scrape
against a 50 ms budget. This module keeps each sample as its original text (name, raw label string,
raw value string), checks it line by line with one regular expression, and renders by string
concatenation: values are never reformatted, so they pass through bit for bit. Its output is checked
against prometheus-client's parsers in the tests, in both formats.

Input is the Prometheus text format 0.0.4 (what vLLM, SGLang and TensorRT-LLM serve: the latter two
from prometheus-client's multiprocess mode, whose counters keep `_total` in the family name) and,
leniently, OpenMetrics text. Timestamps and exemplars are dropped (the engines emit neither).

Any pod may put any page here, and one bad sample on the daemon's page makes Prometheus refuse the
whole page (every series of the node). So what goes out is valid whatever comes in: a value must be
a float in the syntax both Go's `ParseFloat` and OpenMetrics read (Python's `float()` also takes
`1_0`, `\u0661` and trailing whitespace; Prometheus does not), else the target is down; a sample whose
label names repeat or are reserved (`__*`), or that lacks the label its family's type needs (`le`,
`quantile`), is dropped and counted by reason (`dropped`); an added label's clash is renamed the way
Prometheus does, `exported_` prepended until the name is free; types that engines never use (info,
stateset, gaugehistogram, unknown) are read as untyped samples.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from exporter.engines import vllm

# name, optional {labels}, value, optional timestamp, optional OpenMetrics exemplar.
_SAMPLE = re.compile(
    r"([a-zA-Z_:][a-zA-Z0-9_:]*)"
    r'(?:\{\s*((?:[a-zA-Z_][a-zA-Z0-9_]*\s*=\s*"(?:[^"\\\n]|\\.)*"\s*,?\s*)*)\})?'
    r"[ \t]+([^ \t#]+)(?:[ \t]+-?[0-9.eE+-]+)?(?:[ \t]+#[ \t].*)?[ \t]*$"
)
_LABEL_PAIR = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*("(?:[^"\\\n]|\\.)*")')
# A float as Go's strconv.ParseFloat and OpenMetrics both read it (no `_`, no hex, no whitespace,
# ASCII digits only; NaN unsigned, as Go takes a sign only before Inf).
_VALUE = re.compile(
    r"[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[Ii][Nn][Ff](?:[Ii][Nn][Ii][Tt][Yy])?)"
    r"|[Nn][Aa][Nn]",
    re.ASCII,
)
_TYPES = {
    "counter",
    "gauge",
    "histogram",
    "summary",
    "untyped",
    "unknown",
    "info",
    "stateset",
    "gaugehistogram",
}
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "gaugehistogram": ("_bucket", "_gcount", "_gsum"),
    "summary": ("_count", "_sum", "_created"),
    "info": ("_info",),
}


MAX_CACHED_LINES = 50_000
# Why a sample was dropped (the `reason` label of guided_decoding_passthrough_samples_dropped_total).
DUPLICATE_LABEL = "duplicate_label"
RESERVED_LABEL = "reserved_label"
MISSING_LABEL = "missing_label"  # a histogram bucket without `le`, a summary quantile without `quantile`
DROP_REASONS = (DUPLICATE_LABEL, RESERVED_LABEL, MISSING_LABEL)
# Types read as untyped samples: no engine declares them, and their sample-name rules are OpenMetrics'.
_UNTYPED = {"untyped", "unknown", "info", "stateset", "gaugehistogram"}


@dataclass(frozen=True)
class _Line:
    """A checked `name{labels}`: the sample name, its labels with pod (and namespace) added, and the
    names of its own labels; or the reason it is dropped."""

    sample: str
    labels: str
    names: frozenset[str] = frozenset()
    drop: str = ""


_SKIP = _Line("", "")  # cached verdict for a valid line of a family that is not passed through
LineCache = dict[str, _Line]  # a target's checked lines, kept between its scrapes


class ParseError(ValueError):
    """The page is not the Prometheus text format; names the line."""


class TooManySamples(ValueError):
    """The page has more samples to pass through than the configured cap."""


@dataclass
class Family:
    """One metric family as the page declared it; `samples` hold (name, labels-with-pod, value) text."""

    name: str
    type: str
    help: str
    samples: list[tuple[str, str, str]] = field(default_factory=list)


def escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _check_value(value: str, lineno: int) -> None:
    if _VALUE.fullmatch(value) is None:
        raise ParseError(f"line {lineno}: {value[:40]!r} is not a number")


def _exported(name: str, taken: set[str]) -> str:
    """The name a clashing label gets: `exported_` prepended until it is free (as Prometheus does)."""
    while name in taken:
        name = "exported_" + name
    return name


def _checked(sample: str, labels: str | None, pod_pair: str, added: tuple[str, ...]) -> _Line:
    """The sample's labels with ours (`added`, already rendered in `pod_pair`) in front, or why it
    is dropped. Values are kept as their original escaped text."""
    pairs = _LABEL_PAIR.findall(labels) if labels else []
    names = [name for name, _ in pairs]
    own = set(names)
    if len(own) != len(names):
        return _Line(sample, "", drop=DUPLICATE_LABEL)
    if any(name.startswith("__") for name in names):
        return _Line(sample, "", drop=RESERVED_LABEL)
    if not pairs:
        return _Line(sample, pod_pair)
    taken = own | set(added)
    renamed = [(_exported(name, taken) if name in added else name, value) for name, value in pairs]
    return _Line(sample, pod_pair + "," + ",".join(f"{n}={v}" for n, v in renamed), frozenset(own))


def _missing_label(family: Family, line: _Line) -> bool:
    """A sample that lacks the label its family's type requires (Prometheus' own types)."""
    if family.type == "histogram":
        return line.sample == family.name + "_bucket" and "le" not in line.names
    if family.type == "summary":
        return line.sample == family.name and "quantile" not in line.names
    return False


def parse(
    text: str,
    pod: str,
    prefix: str = vllm.PAGE.prefix,
    cache: LineCache | None = None,
    max_samples: int | None = None,
    namespace: str = "",
    dropped: Counter[str] | None = None,
) -> list[Family]:
    """Families whose name starts with `prefix`, each sample's labels prefixed with `pod="..."` (and
    `namespace="..."` first when the target's namespace is known).

    The whole page is validated, not only the kept families: a page with a broken line anywhere is
    garbage and the target is down. A `pod` label already on a sample is renamed `exported_pod` (and
    `namespace`, when one is added, `exported_namespace`), as Prometheus does on a conflict. Samples
    dropped for their labels are counted by reason in `dropped`.
    `cache` (one per target and pod, kept between scrapes) maps a line's `name{labels}` part to its
    checked result, so a series seen before costs a dict lookup and a float() of its value: this cuts
    parsing of the real vLLM page about fourfold. It is cleared when it reaches MAX_CACHED_LINES.
    More than `max_samples` kept samples is a `TooManySamples` error: a target must not be able to
    put an unbounded number of series on the daemon's page.
    """
    pod_pair = f'pod="{escape_label_value(pod)}"'
    added: tuple[str, ...] = ("pod",)
    if namespace:
        pod_pair = f'namespace="{escape_label_value(namespace)}",' + pod_pair
        added = ("namespace", "pod")
    families: dict[str, Family] = {}
    helps: dict[str, str] = {}
    current: Family | None = None
    accepted: tuple[str, ...] = ()
    kept = 0
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line or line.isspace():
            continue
        if line[0] == "#":
            parts = line.split(None, 3)
            if len(parts) < 2:
                continue
            keyword = parts[1]
            if keyword == "EOF":
                break
            if keyword not in ("HELP", "TYPE") or len(parts) < 3:
                continue  # a comment, or a UNIT line
            name = parts[2]
            if keyword == "HELP":
                helps[name] = parts[3] if len(parts) > 3 else ""
                if current is not None and current.name == name:
                    current.help = helps[name]
                continue
            kind = parts[3].strip() if len(parts) > 3 else ""
            if kind not in _TYPES:
                raise ParseError(f"line {lineno}: unknown metric type {kind[:20]!r}")
            if not name.startswith(prefix) or kind in _UNTYPED:
                current, accepted = None, ()
                continue
            current = families.get(name)
            if current is None:
                current = families[name] = Family(name, kind, helps.get(name, ""))
            accepted = (name, *(name + s for s in _SUFFIXES.get(kind, ())))
            if kind == "counter" and name.endswith("_total"):
                accepted += (name[:-6] + "_created",)
            continue
        key, _, value = line.rpartition(" ")
        known = cache.get(key) if cache is not None else None
        if known is None:
            match = _SAMPLE.match(line)
            if match is None:
                raise ParseError(f"line {lineno}: not a sample: {line[:60]!r}")
            sample, labels, value = match.group(1), match.group(2), match.group(3)
            _check_value(value, lineno)
            known = _checked(sample, labels, pod_pair, added) if sample.startswith(prefix) else _SKIP
            # Cache only plain `key value` lines, so a hit means: same series, only the value to check.
            if cache is not None and match.end(3) == len(line) and line == f"{key} {value}":
                if len(cache) >= MAX_CACHED_LINES:
                    cache.clear()
                cache[key] = known
        else:
            _check_value(value, lineno)
        if known is _SKIP:
            continue
        if known.drop:
            if dropped is not None:
                dropped[known.drop] += 1
            continue
        sample = known.sample
        kept += 1
        if max_samples is not None and kept > max_samples:
            raise TooManySamples(f"more than {max_samples} {prefix}* samples")
        if current is None or sample not in accepted:
            # A sample with no TYPE of its own: an untyped family of that name.
            current = families.get(sample)
            if current is None:
                current = families[sample] = Family(sample, "untyped", helps.get(sample, ""))
            accepted = (sample,)
        elif current.type in ("histogram", "summary") and _missing_label(current, known):
            if dropped is not None:
                dropped[MISSING_LABEL] += 1
            continue
        current.samples.append((sample, known.labels, value))
    return list(families.values())


def merge(pages: Iterable[Sequence[Family]]) -> tuple[list[Family], list[str]]:
    """One family per name across targets (first declaration wins); conflicting types are dropped."""
    merged: dict[str, Family] = {}
    conflicts: list[str] = []
    for families in pages:
        for fam in families:
            have = merged.get(fam.name)
            if have is None:
                merged[fam.name] = Family(fam.name, fam.type, fam.help, list(fam.samples))
            elif have.type != fam.type:
                conflicts.append(fam.name)
            else:
                have.samples.extend(fam.samples)
    return list(merged.values()), conflicts


def render_text(families: Sequence[Family]) -> str:
    """Prometheus text format 0.0.4, as the families were declared."""
    out: list[str] = []
    for fam in families:
        if not fam.samples:
            continue
        kind = "untyped" if fam.type in ("unknown", "info", "stateset", "gaugehistogram") else fam.type
        out.append(f"# HELP {fam.name} {fam.help}\n# TYPE {fam.name} {kind}\n")
        out.extend(f"{name}{{{labels}}} {value}\n" for name, labels, value in fam.samples)
    return "".join(out)


def _openmetrics_counter(fam: Family) -> bool:
    return all(sample[0].endswith(("_total", "_created")) for sample in fam.samples)


def render_openmetrics(families: Sequence[Family]) -> str:
    """OpenMetrics text (without `# EOF`): the same series, the way prometheus-client's own
    OpenMetrics exposition writes them.

    The text format writes a counter's creation time as a separate gauge family `X_created`; in
    OpenMetrics it is a sample of the counter (or histogram, or summary) family, so such gauges are
    folded back into their owner. A family OpenMetrics cannot express with its series names unchanged
    (a counter without `_total` samples) is written as `unknown`.
    """
    by_name = {fam.name: fam for fam in families}
    folded: set[str] = set()
    owners: dict[str, str] = {}
    for fam in families:
        if fam.type in ("histogram", "summary") or (fam.type == "counter" and _openmetrics_counter(fam)):
            base = fam.name[:-6] if fam.type == "counter" and fam.name.endswith("_total") else fam.name
            gauge = by_name.get(base + "_created")
            if gauge is not None and gauge.type == "gauge":
                folded.add(gauge.name)
                owners[fam.name] = gauge.name
    out: list[str] = []
    written: set[str] = set()
    for fam in families:
        if fam.name in folded or not fam.samples:
            continue
        samples = fam.samples
        name, kind = fam.name, fam.type
        if kind == "counter":
            if _openmetrics_counter(fam):
                name = name[:-6] if name.endswith("_total") else name
            else:
                kind = "unknown"
        elif kind == "untyped":
            kind = "unknown"
        if name in written:  # a counter `x_total` and a family `x`: one name in OpenMetrics, first kept
            continue
        written.add(name)
        help_text = fam.help.replace('"', '\\"')
        out.append(f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n")
        owner = owners.get(fam.name)
        created = {labels: value for _, labels, value in by_name[owner].samples} if owner else {}
        closer = "_total" if fam.type == "counter" else "_sum"
        for sname, labels, value in samples:
            out.append(f"{sname}{{{labels}}} {value}\n")
            if created and sname.endswith(closer) and labels in created:
                out.append(f"{name}_created{{{labels}}} {created.pop(labels)}\n")
    return "".join(out)
