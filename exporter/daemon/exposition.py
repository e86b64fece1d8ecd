"""Rendering of the daemon's own families: byte for byte what prometheus-client's `generate_latest`
writes (text 0.0.4 and OpenMetrics 1.0; the tests compare both on the daemon's real families and on
hostile values), in about a third of the time.

Why: on the node the daemon is sized for (the series caps in docs/metrics.md: 8 engines x 51 schema
series, 128 cores, 8 GPUs) a page holds about 6,000 of our own samples; the library spends about
6 microseconds on each (it validates and escapes every label name of every sample), which made
rendering most of a scrape's CPU. Here label names are checked once per name, values escaped only
when they hold a character that needs it, and the value formatted by the library's own
`floatToGoString`. A family using anything this module does not write itself (timestamps,
exemplars, native histograms, units, `_created`/`_gsum`/`_gcount` samples, names outside the
legacy character set) is rendered by the library instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from prometheus_client import exposition as text_exposition
from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.openmetrics import exposition as openmetrics_exposition
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

_LEGACY_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LEGACY_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_TEXT_TYPES = {"counter": "counter", "gauge": "gauge", "histogram": "histogram", "summary": "summary",
               "info": "gauge", "unknown": "untyped", "untyped": "untyped"}  # fmt: skip
_OPENMETRICS_TYPES = {"counter", "gauge", "histogram", "summary", "info", "unknown", "stateset"}
_PLAIN = (None, None, None)  # a sample's timestamp, exemplar and native histogram: none


# A sample's label set rendered once (`{a="x",b="y"}`), keyed by its items in insertion order: a page
# repeats the same label sets at every scrape (and each histogram's within one). Bounded: cleared
# when full, so memory never grows with label churn.
_PAIRS: dict[tuple[tuple[str, str], ...], str] = {}
MAX_CACHED_LABEL_SETS = 100_000


class SharedLabels(dict[str, str]):
    """A label set a family builder keeps and hands out again at every scrape (never changed once
    made): it carries its own rendered text, so no key is built from its items."""

    __slots__ = ("text",)

    def __init__(self, *args: object, **kwargs: str) -> None:
        super().__init__(*args, **kwargs)
        self.text: str | None = None


class Heads:
    """One histogram series' samples as written: their names, label sets and line heads
    (`name{labels} `), made once per series and kept by the family builder."""

    __slots__ = ("labels", "names", "text")

    def __init__(self, names: tuple[str, ...], labels: tuple[SharedLabels, ...]) -> None:
        self.names = names
        self.labels = labels
        # () where a name or label name is not one this module writes: the samples are rendered instead
        written = all(_LEGACY_NAME.match(n) for n in names) and all(
            _LEGACY_LABEL.match(label) for one in labels for label in one
        )
        self.text = (
            tuple(f"{n}{{{_pairs(one)}}} " if one else f"{n} " for n, one in zip(names, labels, strict=True))
            if written
            else ()
        )


class Histograms(HistogramMetricFamily):
    """A histogram family kept as each series' values beside its Heads: written as head + value, without
    a Sample per line (at the caps 9,000 of a page's lines; building and reading their Samples was
    a third of a scrape). `samples` makes them when asked (the library's renderer, tests)."""

    def __init__(self, name: str, documentation: str, labels: Sequence[str] | None = None) -> None:
        self.series: list[tuple[Heads, list[float]]] = []
        super().__init__(name, documentation, labels=labels)

    @property
    def samples(self) -> list[Sample]:
        return [
            Sample(name, labels, value)
            for heads, values in self.series
            for name, labels, value in zip(heads.names, heads.labels, values, strict=True)
        ]

    @samples.setter
    def samples(self, value: list[Sample]) -> None:
        if value:  # Metric.__init__ sets an empty list; series come through `series`
            raise TypeError(f"{self.name}: add series to `series`, not samples")

    # `samples` is made anew at each read, so a sample appended to it would be lost without a word
    def add_metric(self, *args: object, **kwargs: object) -> None:
        raise TypeError(f"{self.name}: add series with metric_families.histogram, not add_metric")

    def add_sample(self, *args: object, **kwargs: object) -> None:
        raise TypeError(f"{self.name}: add series with metric_families.histogram, not add_sample")


def _histogram_lines(metric: Histograms) -> list[str] | None:
    lines: list[str] = []
    for heads, values in metric.series:
        if not heads.text:
            return None
        lines.extend([f"{head}{_value(value)}\n" for head, value in zip(heads.text, values, strict=True)])
    return lines


def _value(value: float) -> str:
    """floatToGoString's text; counts below a million (most samples) without a float round trip."""
    if type(value) is int and -1_000_000 < value < 1_000_000:
        return f"{value}.0"
    return floatToGoString(value)  # type: ignore[no-any-return,no-untyped-call]


def _pairs(labels: dict[str, str]) -> str:
    if type(labels) is SharedLabels:
        text = getattr(labels, "text", None)  # a copy is made without __init__
        if text is None:
            text = labels.text = _join(labels.items())
        return text
    key = tuple(labels.items())
    found = _PAIRS.get(key)
    if found is None:
        found = _join(key)
        if len(_PAIRS) >= MAX_CACHED_LABEL_SETS:
            _PAIRS.clear()
        _PAIRS[key] = found
    return found


def _join(items: Iterable[tuple[str, str]]) -> str:
    return ",".join([f'{label}="{_escape(text)}"' for label, text in sorted(items)])


def _escape(value: str) -> str:
    if '"' in value or "\\" in value or "\n" in value:
        return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return value


class _Single:
    """One family as a collector, for the library's renderer."""

    def __init__(self, metric: Metric) -> None:
        self.metric = metric

    def collect(self) -> list[Metric]:
        return [self.metric]


def _simple_family(metric: Metric, openmetrics: bool) -> bool:
    """True when this module writes the family's head exactly as the library would."""
    types = _OPENMETRICS_TYPES if openmetrics else _TEXT_TYPES
    if metric.type not in types or not _LEGACY_NAME.match(metric.name):
        return False
    return not (openmetrics and metric.unit)


def _samples(metric: Metric, labels_ok: set[str]) -> list[str] | None:
    """The family's sample lines, or None when one of them is not written as the library would (then
    the library renders the whole family). Checked while written: one walk over the samples."""
    created = (metric.name + "_created", metric.name + "_gsum", metric.name + "_gcount")
    names_ok: set[str] = set()  # per family: whether a name is `_created` depends on the family
    lines: list[str] = []
    append = lines.append
    for sample in metric.samples:
        name, labels, value = sample[0], sample[1], sample[2]
        if value is None or sample[3:] != _PLAIN:  # a timestamp, an exemplar or a native histogram
            return None
        if name not in names_ok:
            if name in created or not _LEGACY_NAME.match(name):
                return None
            names_ok.add(name)
        if not labels:
            append(f"{name} {_value(value)}\n")
            continue
        if not labels_ok.issuperset(labels):
            for label in labels:
                if label not in labels_ok:
                    if not _LEGACY_LABEL.match(label):
                        return None
                    labels_ok.add(label)
        append(f"{name}{{{_pairs(labels)}}} {_value(value)}\n")
    return lines


def _library(metric: Metric, openmetrics: bool) -> str:
    if openmetrics:
        page: bytes = openmetrics_exposition.generate_latest(_Single(metric))  # type: ignore[no-untyped-call]
        return page.decode()[: -len("# EOF\n")]
    return text_exposition.generate_latest(_Single(metric)).decode()


def render(metrics: Iterable[Metric], openmetrics: bool = False) -> bytes:
    """The families in the text format 0.0.4, or in OpenMetrics (with the closing `# EOF`)."""
    out: list[str] = []
    append = out.append
    labels_ok: set[str] = set()
    for metric in metrics:
        lines = None
        if _simple_family(metric, openmetrics):
            if type(metric) is Histograms:
                lines = _histogram_lines(metric)
            if lines is None:
                lines = _samples(metric, labels_ok)
        if lines is None:
            append(_library(metric, openmetrics))
            continue
        name = metric.name
        if openmetrics:
            append(f"# HELP {name} {_escape(metric.documentation)}\n# TYPE {name} {metric.type}\n")
        else:
            if metric.type == "counter":
                name += "_total"
            elif metric.type == "info":
                name += "_info"
            doc = metric.documentation.replace("\\", r"\\").replace("\n", r"\n")
            append(f"# HELP {name} {doc}\n# TYPE {name} {_TEXT_TYPES[metric.type]}\n")
        out.extend(lines)
    if openmetrics:
        append("# EOF\n")
    return "".join(out).encode("utf-8")
