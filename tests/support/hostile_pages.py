"""Metrics pages a hostile pod on the node could serve to the daemon's engine scraper (issue 47, item 2).

Each page is one class of input that made, or could make, a real Prometheus refuse the daemon's whole
page: repeated or reserved label names, an added label's clash (`pod`, `namespace` and their
`exported_` forms), values Python's `float()` reads and Go's `ParseFloat` does not, the types and
sample names OpenMetrics is strict about. `DOWN` pages are not the text format at all (the target is
marked down); `DROPPED` pages lose samples, counted by reason; the rest come through.
"""

from __future__ import annotations

# page name -> (page text, the drop reasons the passthrough counts for it)
DROPPED: dict[str, tuple[str, dict[str, int]]] = {
    "repeated_label": ('vllm:a{model_name="m",model_name="x"} 1\n', {"duplicate_label": 1}),
    "repeated_pod": ('vllm:a{pod="p",pod="q"} 1\n', {"duplicate_label": 1}),
    "name_label": ('vllm:a{__name__="vllm:b"} 1\n', {"reserved_label": 1}),
    "reserved_label": ('vllm:a{__meta_x="y",ok="1"} 1\n', {"reserved_label": 1}),
    "bucket_without_le": (
        '# TYPE vllm:h histogram\nvllm:h_bucket{x="1"} 1\nvllm:h_bucket{le="+Inf"} 1\n'
        "vllm:h_count 1\nvllm:h_sum 1\n",
        {"missing_label": 1},
    ),
    "quantile_without_label": (
        "# TYPE vllm:q summary\nvllm:q 1\nvllm:q_count 1\nvllm:q_sum 1\n",
        {"missing_label": 1},
    ),
}
KEPT: dict[str, str] = {
    "pod_and_exported_pod": 'vllm:a{pod="p",exported_pod="q"} 1\n',
    "namespace_and_exported": (
        'vllm:a{namespace="p",exported_namespace="q",exported_exported_namespace="r"} 1\n'
    ),
    "info_type": '# TYPE vllm:i info\nvllm:i 1\nvllm:i_info{a="b"} 1\n',
    "stateset_type": "# TYPE vllm:s stateset\nvllm:s 1\n",
    "gaugehistogram_type": '# TYPE vllm:g gaugehistogram\nvllm:g_bucket{le="+Inf"} 1\nvllm:g_gcount 1\n',
    "unknown_type": "# TYPE vllm:u unknown\nvllm:u_total 1\nvllm:u 2\n",
    "counter_and_its_base_name": (
        "# TYPE vllm:b_total counter\nvllm:b_total 1\n# TYPE vllm:b gauge\nvllm:b 1\n"
    ),
    "help_with_escapes": '# HELP vllm:e a\\x b "q" \\\n# TYPE vllm:e gauge\nvllm:e 1\n',
    "label_value_escapes": 'vllm:l{x="\\q",y="a\\"b",z="\\\\"} 1\n',
    "infinities": 'vllm:f{k="1"} +Inf\nvllm:f{k="2"} -inf\nvllm:f{k="3"} NaN\nvllm:f{k="4"} Infinity\n',
}
DOWN: dict[str, str] = {
    "value_with_underscore": "vllm:a 1_000\n",
    "value_in_arabic_digits": "vllm:a \u0661\n",
    "value_with_carriage_return": "vllm:a 1\r\n",
    "value_with_vertical_tab": "vllm:a 1\x0b\n",
    "value_in_hex": "vllm:a 0x10\n",
    "signed_nan": "vllm:a +NaN\n",
}


def every_page() -> dict[str, str]:
    """Every hostile page by name."""
    return {**{k: v[0] for k, v in DROPPED.items()}, **KEPT, **DOWN}
