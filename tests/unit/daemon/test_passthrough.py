"""The passthrough parser/renderer against prometheus-client's own parsers, on the real vLLM page."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from exporter.daemon import passthrough
from tests.support import hostile_pages


def _samples(families: object) -> set[tuple[str, tuple[tuple[str, str], ...], float]]:
    return {
        (s.name, tuple(sorted(s.labels.items())), s.value)
        for f in families  # type: ignore[attr-defined]
        for s in f.samples
    }


def _reference(page: str, pod: str) -> set[tuple[str, tuple[tuple[str, str], ...], float]]:
    """What the library reads from the original page, with the pod label added."""
    return {
        (name, tuple(sorted({**dict(labels), "pod": pod}.items())), value)
        for name, labels, value in _samples(f for f in parse_text(page) if f.name.startswith("vllm:"))
    }


def test_text_keeps_every_vllm_sample_with_pod(vllm_page: str) -> None:
    families = passthrough.parse(vllm_page, "vllm-0")
    got = _samples(parse_text(passthrough.render_text(families)))
    assert len(got) == 364
    assert got == _reference(vllm_page, "vllm-0")


def test_values_pass_through_as_written(vllm_page: str) -> None:
    rendered = passthrough.render_text(passthrough.parse(vllm_page, "p"))
    line = next(x for x in vllm_page.splitlines() if x.startswith("vllm:request_success_created{"))
    value = line.rsplit(" ", 1)[1]
    assert f" {value}\n" in rendered and "1.79594840977141e+09" in rendered


def test_openmetrics_keeps_every_sample_and_folds_created(vllm_page: str) -> None:
    families = passthrough.parse(vllm_page, "vllm-0")
    text = passthrough.render_openmetrics(families) + "# EOF\n"
    parsed = list(parse_openmetrics(text))  # the library raises on clashing names or bad order
    assert _samples(parsed) == _reference(vllm_page, "vllm-0")
    kinds = {f.name: f.type for f in parsed}
    assert kinds["vllm:request_success"] == "counter"
    assert "vllm:request_success_created" not in kinds  # a sample of the counter now, not a gauge
    assert kinds["vllm:time_to_first_token_seconds"] == "histogram"


def test_merge_of_targets_declares_each_family_once(vllm_page: str) -> None:
    pages = [passthrough.parse(vllm_page, f"vllm-{i}") for i in range(3)]
    merged, conflicts = passthrough.merge(pages)
    text = passthrough.render_text(merged)
    types = [line for line in text.splitlines() if line.startswith("# TYPE")]
    assert len(types) == len(set(types)) and not conflicts
    samples = _samples(parse_text(text))
    assert len(samples) == 3 * 364
    assert {dict(labels)["pod"] for _, labels, _ in samples} == {"vllm-0", "vllm-1", "vllm-2"}
    om = list(parse_openmetrics(passthrough.render_openmetrics(merged) + "# EOF\n"))
    assert len(_samples(om)) == 3 * 364


def test_only_vllm_families_are_kept(vllm_page: str) -> None:
    names = {f.name for f in passthrough.parse(vllm_page, "p")}
    assert names and all(n.startswith("vllm:") for n in names)
    assert "process_resident_memory_bytes" in vllm_page


def test_existing_pod_label_is_renamed() -> None:
    page = '# TYPE vllm:x gauge\nvllm:x{pod="inner",a="1"} 3\nvllm:y 4\n'
    text = passthrough.render_text(passthrough.parse(page, "outer"))
    samples = _samples(parse_text(text))
    assert ("vllm:x", (("a", "1"), ("exported_pod", "inner"), ("pod", "outer")), 3.0) in samples
    assert ("vllm:y", (("pod", "outer"),), 4.0) in samples


def test_pod_name_is_escaped() -> None:
    text = passthrough.render_text(passthrough.parse("vllm:x 1\n", 'we"ird\\pod'))
    assert _samples(parse_text(text)) == {("vllm:x", (("pod", 'we"ird\\pod'),), 1.0)}


def test_type_conflict_keeps_the_first() -> None:
    a = passthrough.parse("# TYPE vllm:x gauge\nvllm:x 1\n", "a")
    b = passthrough.parse("# TYPE vllm:x counter\nvllm:x 2\n", "b")
    merged, conflicts = passthrough.merge([a, b])
    assert conflicts == ["vllm:x"]
    assert _samples(parse_text(passthrough.render_text(merged))) == {("vllm:x", (("pod", "a"),), 1.0)}


@pytest.mark.parametrize(
    "page",
    [
        'vllm:x{a="1" 2\n',
        "vllm:x one\n",
        "\x00\x01binary junk\n",
        "<html><body>502 Bad Gateway</body></html>\n",
        "# TYPE vllm:x sometype\nvllm:x 1\n",
        'vllm:x{a="unterminated} 1\n',
    ],
)
def test_garbage_raises_parse_error(page: str) -> None:
    with pytest.raises(passthrough.ParseError):
        passthrough.parse(page, "p")


def test_openmetrics_input_is_read_leniently() -> None:
    page = (
        "# HELP vllm:c A counter.\n# TYPE vllm:c counter\n# UNIT vllm:c seconds\n"
        'vllm:c_total{a="1"} 2.0 # {trace_id="x"} 1.0\nvllm:c_created{a="1"} 1.7e9\n# EOF\n'
    )
    families = passthrough.parse(page, "p")
    assert [(f.name, f.type, len(f.samples)) for f in families] == [("vllm:c", "counter", 2)]


def test_line_cache_gives_the_same_result_and_sees_new_values(vllm_page: str) -> None:
    cache: dict[str, tuple[str, str]] = {}
    plain = passthrough.render_text(passthrough.parse(vllm_page, "p"))
    assert passthrough.render_text(passthrough.parse(vllm_page, "p", cache=cache)) == plain
    assert cache  # filled on the first pass
    assert passthrough.render_text(passthrough.parse(vllm_page, "p", cache=cache)) == plain
    changed = vllm_page.replace(
        'finished_reason="stop",model_name="tiny"} 29.0', 'finished_reason="stop",model_name="tiny"} 30.0'
    )
    samples = _samples(parse_text(passthrough.render_text(passthrough.parse(changed, "p", cache=cache))))
    assert (
        "vllm:request_success_total",
        (("engine", "0"), ("finished_reason", "stop"), ("model_name", "tiny"), ("pod", "p")),
        30.0,
    ) in samples


def test_line_cache_still_checks_values_and_skips_timestamped_lines() -> None:
    cache: dict[str, tuple[str, str]] = {}
    passthrough.parse("vllm:x 1\nvllm:y 2 1700000000000\n", "p", cache=cache)
    assert "vllm:x" in cache and "vllm:y 2" not in cache
    with pytest.raises(passthrough.ParseError, match="not a number"):
        passthrough.parse("vllm:x NaNa\n", "p", cache=cache)


def test_line_cache_is_bounded() -> None:
    cache: dict[str, tuple[str, str]] = {}
    page = "".join(f'vllm:x{{i="{i}"}} 1\n' for i in range(passthrough.MAX_CACHED_LINES + 10))
    passthrough.parse(page, "p", cache=cache)
    assert len(cache) <= passthrough.MAX_CACHED_LINES


def test_namespace_goes_first_and_an_engine_namespace_label_is_renamed() -> None:
    page = '# TYPE vllm:x gauge\nvllm:x{namespace="inner",pod="p",a="1"} 3\nvllm:y 4\n'
    text = passthrough.render_text(passthrough.parse(page, "vllm-0", namespace="team-a"))
    samples = _samples(parse_text(text))
    x = (("a", "1"), ("exported_namespace", "inner"), ("exported_pod", "p"))
    assert ("vllm:x", (*x, ("namespace", "team-a"), ("pod", "vllm-0")), 3.0) in samples
    assert ("vllm:y", (("namespace", "team-a"), ("pod", "vllm-0")), 4.0) in samples
    assert text.index('namespace="team-a",pod="vllm-0"') > 0
    # two pods of one name in two namespaces stay two series once merged
    pages = [passthrough.parse("vllm:y 1\n", "vllm-0", namespace=ns) for ns in ("a", "b")]
    merged, _ = passthrough.merge(pages)
    assert len(_samples(parse_text(passthrough.render_text(merged)))) == 2


# --- Hostile pages (issue 47): whatever a pod serves, what the daemon writes is valid exposition. ---

_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\\n]|\\.)*"')
_GO_FLOAT = re.compile(
    r"[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|(?i:inf(?:inity)?))|(?i:nan)"
)


def _valid_lines(text: str) -> None:
    """What Prometheus checks that prometheus-client's parsers do not: each sample's label names are
    unique and none is reserved, and its value is in Go's float syntax."""
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        names = _LABEL.findall(head[head.index("{") :]) if "{" in head else []
        assert len(names) == len(set(names)), line
        assert not any(n.startswith("__") for n in names), line
        assert _GO_FLOAT.fullmatch(value), line


@pytest.mark.parametrize("name", sorted(hostile_pages.DROPPED) + sorted(hostile_pages.KEPT))
def test_a_hostile_page_renders_valid_exposition(name: str, vllm_page: str) -> None:
    page = hostile_pages.every_page()[name]
    dropped: Counter[str] = Counter()
    families = passthrough.parse(page, "p", namespace="ns", dropped=dropped)
    assert dict(dropped) == (hostile_pages.DROPPED[name][1] if name in hostile_pages.DROPPED else {})
    merged, _ = passthrough.merge([families, passthrough.parse(vllm_page, "good")])
    text = passthrough.render_text(merged)
    om = passthrough.render_openmetrics(merged) + "# EOF\n"
    _valid_lines(text)
    _valid_lines(om)
    assert len(_samples(parse_text(text))) >= 364  # the good target's samples all there
    assert len(_samples(parse_openmetrics(om))) >= 364  # raises on OpenMetrics' stricter rules


@pytest.mark.parametrize("name", sorted(hostile_pages.DOWN))
def test_a_value_prometheus_cannot_read_marks_the_page_broken(name: str) -> None:
    with pytest.raises(passthrough.ParseError, match="is not a number"):
        passthrough.parse(hostile_pages.DOWN[name], "p")


def test_a_clashing_label_is_renamed_until_free() -> None:
    page = 'vllm:a{pod="p",exported_pod="q",namespace="n"} 1\n'
    (family,) = passthrough.parse(page, "mine", namespace="ns")
    ((_, labels, _),) = family.samples
    assert labels == (
        'namespace="ns",pod="mine",exported_exported_pod="p",exported_pod="q",exported_namespace="n"'
    )


def test_drops_are_counted_from_the_line_cache_too() -> None:
    cache: passthrough.LineCache = {}
    page = 'vllm:a{x="1",x="2"} 1\nvllm:a{x="3"} 1\n'
    for _ in range(2):
        dropped: Counter[str] = Counter()
        (family,) = passthrough.parse(page, "p", cache=cache, dropped=dropped)
        assert dropped == {"duplicate_label": 1} and len(family.samples) == 1
