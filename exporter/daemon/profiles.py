"""Series profiles (`--metrics.profile`): how much of the three large sources a node puts on /metrics.

At the caps (docs/metrics.md) most of a node's series are the per-schema compile histograms, the
per-core CPU modes and the engines' own families passed through. `full` (the default) exposes them all;
`minimal` keeps what the shipped alerts, recording rules and dashboard read, and nothing else of those
three: the per-schema histograms' `le="0.005"` and `+Inf` buckets (with `_sum` and `_count`: the page
and the per-schema mean), the `idle` mode of each core (busy is 1 - idle), and the engines' families the
dashboard charts. Every other family (engine-level histograms, schema and family counters, findings,
routing) is the same in both. The unit tier checks that each query of the rules and the dashboard reads
only what `minimal` keeps; the live dashboard and alert tests run on it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    cpu_modes: frozenset[str] | None  # CPU modes exposed per core; None: every mode
    schema_les: frozenset[str] | None  # `le` buckets of the per-schema histogram; None: every bucket
    passthrough: frozenset[str] | None  # engine families passed through, by declared name; None: every one


FULL = Profile("full", None, None, None)
MINIMAL = Profile(
    "minimal",
    cpu_modes=frozenset({"idle"}),
    schema_les=frozenset({"0.005", "+Inf"}),  # the page's line: an exact bucket edge (wire.SCHEMA_BUCKETS)
    # by the name each page declares (# TYPE): a counter's ends in _total
    passthrough=frozenset(
        {
            "vllm:num_requests_waiting_by_reason",
            "vllm:time_to_first_token_seconds",
            "vllm:request_queue_time_seconds",
            "sglang:grammar_compilation_time_seconds",
            "sglang:num_grammar_total",
            "sglang:num_grammar_cache_hit_total",
            "sglang:num_grammar_queue_reqs",
        }
    ),
)
PROFILES = {p.name: p for p in (FULL, MINIMAL)}
