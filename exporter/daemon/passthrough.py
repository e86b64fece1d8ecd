"""Pass an engine's own families through, unchanged, with a `pod` label added: the families whose
name starts with its prefix (`vllm:`, `sglang:`, `trtllm_`: exporter.daemon.config.ENGINES); the rest of the
page is validated and dropped.

Why not prometheus-client's parser and renderer: on the real vLLM page (364 `vllm:` samples) its
text parser takes about 14 ms and its renderer about 3 ms, so 8 targets cost over 130 ms per scrape
against a 50 ms budget. This module keeps each sample as its original text (name, raw label string,
raw value string), checks it line by line with one regular expression, and renders by string
concatenation: values are never reformatted, so they pass through bit for bit. Its output is checked
against prometheus-client's parsers in the tests, in both formats.

Input is the Prometheus text format 0.0.4 (what vLLM, SGLang and TensorRT-LLM serve: the latter two
from prometheus-client's multiprocess mode, whose counters keep `_total` in the family name) and,
leniently, OpenMetrics text. Timestamps and exemplars are dropped (the engines emit neither).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

# name, optional {labels}, value, optional timestamp, optional OpenMetrics exemplar.
_SAMPLE = re.compile(
    r"([a-zA-Z_:][a-zA-Z0-9_:]*)"
    r'(?:\{\s*((?:[a-zA-Z_][a-zA-Z0-9_]*\s*=\s*"(?:[^"\\\n]|\\.)*"\s*,?\s*)*)\})?'
    r"[ \t]+([^ \t#]+)(?:[ \t]+-?[0-9.eE+-]+)?(?:[ \t]+#[ \t].*)?[ \t]*$"
)
_POD_LABEL = re.compile(r"(^|,)\s*pod\s*=")
_NAMESPACE_LABEL = re.compile(r"(^|,)\s*namespace\s*=")
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
_SKIP = ("", "")  # cached verdict for a valid line of a family that is not passed through


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
    try:
        float(value)
    except ValueError:
        raise ParseError(f"line {lineno}: {value[:40]!r} is not a number") from None


def _with_pod(labels: str | None, pod_pair: str, namespaced: bool = False) -> str:
    labels = (labels or "").strip().rstrip(",").strip()
    if not labels:
        return pod_pair
    if _POD_LABEL.search(labels):
        labels = _POD_LABEL.sub(r"\1exported_pod=", labels)
    if namespaced and _NAMESPACE_LABEL.search(labels):
        labels = _NAMESPACE_LABEL.sub(r"\1exported_namespace=", labels)
    return pod_pair + "," + labels


def parse(
    text: str,
    pod: str,
    prefix: str = "vllm:",
    cache: dict[str, tuple[str, str]] | None = None,
    max_samples: int | None = None,
    namespace: str = "",
) -> list[Family]:
    """Families whose name starts with `prefix`, each sample's labels prefixed with `pod="..."` (and
    `namespace="..."` first when the target's namespace is known).

    The whole page is validated, not only the kept families: a page with a broken line anywhere is
    garbage and the target is down. A `pod` label already on a sample is renamed `exported_pod` (and
    `namespace`, when one is added, `exported_namespace`), as Prometheus does on a conflict.
    `cache` (one per target and pod, kept between scrapes) maps a line's `name{labels}` part to its
    checked result, so a series seen before costs a dict lookup and a float() of its value: this cuts
    parsing of the real vLLM page about fourfold. It is cleared when it reaches MAX_CACHED_LINES.
    More than `max_samples` kept samples is a `TooManySamples` error: a target must not be able to
    put an unbounded number of series on the daemon's page.
    """
    pod_pair = f'pod="{escape_label_value(pod)}"'
    if namespace:
        pod_pair = f'namespace="{escape_label_value(namespace)}",' + pod_pair
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
            if not name.startswith(prefix):
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
            known = (
                (sample, _with_pod(labels, pod_pair, bool(namespace))) if sample.startswith(prefix) else _SKIP
            )
            # Cache only plain `key value` lines, so a hit means: same series, only the value to check.
            if cache is not None and match.end(3) == len(line) and line == f"{key} {value}":
                if len(cache) >= MAX_CACHED_LINES:
                    cache.clear()
                cache[key] = known
        else:
            _check_value(value, lineno)
        if known is _SKIP:
            continue
        sample, labels = known
        kept += 1
        if max_samples is not None and kept > max_samples:
            raise TooManySamples(f"more than {max_samples} {prefix}* samples")
        if current is None or sample not in accepted:
            # A sample with no TYPE of its own: an untyped family of that name.
            current = families.get(sample)
            if current is None:
                current = families[sample] = Family(sample, "untyped", helps.get(sample, ""))
            accepted = (sample,)
        current.samples.append((sample, labels, value))
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
