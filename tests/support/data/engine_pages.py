"""Renders the SGLang and TensorRT-LLM fixture pages beside this file from the engines' metric code.

    PYTHONPATH=.cache/sglang:. .venv/bin/python tests/support/data/engine_pages.py sglang \
        > tests/support/data/sglang-0.5.23-metrics.txt
    .venv/bin/python tests/support/data/engine_pages.py trtllm > tests/support/data/trtllm-metrics.txt

Both engines serve their page the same way, and so does this script: prometheus-client in
multiprocess mode (PROMETHEUS_MULTIPROC_DIR set before it is imported, as both engines require), then
a fresh `CollectorRegistry` holding one `MultiProcessCollector`, rendered with `generate_latest`
(SGLang: `add_prometheus_middleware` in sglang/srt/utils/common.py, at `/metrics`; TensorRT-LLM:
`OpenAIServer.mount_metrics` in tensorrt_llm/serve/openai_server.py, at `/prometheus/metrics`, its
`/metrics` being JSON iteration stats).

SGLang 0.5.23 (`make sglang` installs it under .cache/sglang): the metric classes are SGLang's own
code, executed. `sglang/srt/observability/metrics_collector.py` cannot be imported on a machine
without CUDA: two of its imports (`DisaggregationMode`, `ForwardMode`) pull in
`sglang.srt.configs`, which imports torchvision, and no CPU build of torchvision matches the CPU
torch here. So the module's own source is executed without those two import statements (nothing the
collectors' constructors or the methods called below uses), and the runtime-context getters it reads
its configuration through (`get_observability`, `get_schedule`, ...) answer the defaults ServerArgs
declares (SGLang's own `_declared_default`), as an engine started without metric flags has them.
Everything else (prometheus-client, the bucket helpers, GaugeHistogram, ServerArgs) is the real
package. The collectors are fed through their own methods (`log_stats`, `emit_constants`,
`observe_one_finished_request`, ...). One exception: SGLang 0.5.23 declares its grammar families
(`sglang:grammar_compilation_time_seconds`, `sglang:num_grammar_total`, cache hits, timeouts,
aborts, schema count, EBNF size, tree traversal time) but no code of 0.5.23 ever records into them,
so its real page never shows them (multiprocess mode renders only series that were written). They
are recorded here through the collector's own metric objects, as a release that records grammar
statistics would, so the fixture carries them; `sglang:num_grammar_queue_reqs` is recorded by
0.5.23 itself (`log_stats`).

TensorRT-LLM is not installed here (it needs CUDA). Its metric names, types, help texts, labels and
buckets are read from its source, NVIDIA/TensorRT-LLM at commit
050f80def8df236e326949c8bd9dee10fd896a83: tensorrt_llm/metrics/collector.py (`MetricsCollector`,
labels `{"model_name": "undefined", "engine_type": "undefined"}` as openai_server.py creates it) and
tensorrt_llm/metrics/batch_metrics.py (`trtllm_scheduled_batch_size`, multiprocess mode "all", so
a `pid` label). Gauges there keep prometheus-client's default multiprocess mode, "all": each gauge
sample carries `pid`. The config-info gauges (`trtllm_*_config_info`), whose labels are whatever
the server's configuration holds, are left out.
"""

from __future__ import annotations

import ast
import os
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

SGLANG_COLLECTOR = "sglang/srt/observability/metrics_collector.py"
# The two imports of the collector module that need torchvision (through sglang.srt.configs).
NEEDS_TORCHVISION = {"sglang.srt.disaggregation.utils", "sglang.srt.model_executor.forward_batch_info"}
SCHEDULER_LABELS = {
    "model_name": "tiny",
    "engine_type": "unified",
    "tp_rank": 0,
    "pp_rank": 0,
    "moe_ep_rank": 0,
}
TOKENIZER_LABELS = {"model_name": "tiny", "engine_type": "unified"}


def _sglang_module(root: Path) -> Any:
    """SGLang's metrics_collector module, executed from its source (see the module docstring)."""
    from sglang.srt.server_args import _declared_default

    source = root / SGLANG_COLLECTOR
    tree = ast.parse(source.read_text(encoding="utf-8"), str(source))
    tree.body = [
        node
        for node in tree.body
        if not (isinstance(node, ast.ImportFrom) and node.module in NEEDS_TORCHVISION)
    ]
    name = "sglang.srt.observability.metrics_collector"
    module = types.ModuleType(name)
    module.__file__ = str(source)
    sys.modules[name] = module  # dataclasses look their module up there
    exec(compile(tree, str(source), "exec"), module.__dict__)

    class Declared:
        """A config namespace of an engine started with the defaults."""

        def __getattr__(self, field: str) -> Any:
            return _declared_default(field)

    for getter in ("get_observability", "get_schedule", "get_serving", "get_disagg"):
        setattr(module, getter, Declared)
    # sglang/srt/runtime_context.py: exports_expert_balancedness_to_prometheus reads this field.
    module.exports_expert_balancedness_to_prometheus = lambda: (
        _declared_default("expert_balancedness_report_mode") in ("prometheus", "both")
    )
    return module


def record_sglang(root: Path) -> None:
    """One SGLang scheduler and tokenizer manager after 13 structured-output requests."""
    mc = _sglang_module(root)
    scheduler = mc.SchedulerMetricsCollector(labels=dict(SCHEDULER_LABELS), server_args=None)
    tokenizer = mc.TokenizerMetricsCollector(server_args=None, labels=dict(TOKENIZER_LABELS))
    scheduler.emit_constants(
        max_total_num_tokens=145_000,
        max_total_num_tokens_swa=None,
        weight_memory_usage_gb=15.1,
        kv_cache_memory_usage_gb=17.75,
        graph_memory_usage_gb={"decode": 0.5},
        max_running_requests_under_SLO=None,
        page_size=1,
        num_pages=145_000,
        context_len=8192,
        startup_available_gpu_memory_gb=78.5,
    )
    scheduler.log_stats(
        mc.SchedulerStats(
            num_running_reqs=mc.QueueCount(total=3),
            num_queue_reqs=mc.QueueCount(total=1),
            num_grammar_queue_reqs=2,
            gen_throughput=412.5,
            cache_hit_rate=0.25,
            token_usage=0.125,
            full_token_usage=0.125,
            num_used_tokens=18_125,
            kv_available_tokens=120_000,
            kv_evictable_tokens=6_875,
            kv_used_tokens=18_125,
            utilization=0.5,
            new_token_ratio=0.75,
            is_cuda_graph=1,
        )
    )
    for seconds in (0.004, 0.012, 0.25):
        scheduler.observe_queue_time(seconds)
    scheduler.observe_per_stage_req_latency("prefill_forward", 0.031)
    scheduler.increment_realtime_tokens(None, prefill_compute_tokens=1_300, decode_tokens=260)
    scheduler.increment_scheduler_idle_seconds(12.5)
    labels = scheduler.labels
    # Declared by SGLang 0.5.23, never written by it (see the module docstring): 13 requests, 9 of
    # them grammar-cache hits, 4 compiles, one of which timed out.
    scheduler.num_grammar_total.labels(**labels).inc(13)
    scheduler.num_grammar_cache_hit.labels(**labels).inc(9)
    scheduler.num_grammar_timeout.labels(**labels).inc(1)
    scheduler.num_grammar_aborted.labels(**labels).inc(0)
    for seconds, schemas, ebnf in ((0.018, 3, 420), (0.045, 5, 910), (0.3, 12, 4100), (31.5, 40, 26_000)):
        scheduler.grammar_compilation_time.labels(**labels).observe(seconds)
        scheduler.grammar_schema_count.labels(**labels).observe(schemas)
        scheduler.grammar_ebnf_size.labels(**labels).observe(ebnf)
    scheduler.grammar_tree_traversal_time_avg.labels(**labels).observe(0.002)
    scheduler.grammar_tree_traversal_time_max.labels(**labels).observe(0.011)
    for n in range(13):
        tokenizer.observe_one_finished_request(
            dict(TOKENIZER_LABELS),
            prompt_tokens=100 + n,
            generation_tokens=20,
            cached_tokens=64 if n else 0,
            e2e_latency=0.5 + n / 10,
            has_grammar=True,
        )
        tokenizer.observe_time_to_first_token(dict(TOKENIZER_LABELS), 0.05 + n / 100, stream=n % 2 == 0)
        tokenizer.observe_inter_token_latency(dict(TOKENIZER_LABELS), 0.2, 19)


# tensorrt_llm/metrics/collector.py (commit 050f80d), MetricsCollector.__init__: kind, name without
# the trtllm_ prefix, documentation, labels beyond model_name and engine_type, buckets.
_E2E = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
        480.0, 960.0, 1920.0, 7680.0]  # fmt: skip
_TTFT = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
         40.0, 80.0, 160.0, 640.0, 2560.0]  # fmt: skip
_TPOT = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
         40.0, 80.0]  # fmt: skip
_PREFILL = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0,
            640.0, 2560.0]  # fmt: skip
_PERPLEXITY = [1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 500.0, 1000.0]
C, G, H = "counter", "gauge", "histogram"
TRTLLM_METRICS: tuple[tuple[str, str, str, tuple[str, ...], list[float] | None], ...] = (
    (C, "request_success_total", "Count of successfully processed requests.", ("finished_reason",), None),
    (H, "e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", (), _E2E),
    (H, "time_to_first_token_seconds", "Histogram of time to first token in seconds.", (), _TTFT),
    (H, "time_per_output_token_seconds", "Histogram of time per output token in seconds.", (), _TPOT),
    (H, "request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", (), _E2E),
    (H, "request_prefill_time_seconds",
     "Histogram of prefill (context) phase duration in seconds (first_token_time - first_scheduled_time).",
     (), _PREFILL),
    (H, "request_decode_time_seconds",
     "Histogram of decode (generation) phase duration in seconds (last_token_time - first_token_time).",
     (), _E2E),
    (H, "request_inference_time_seconds",
     "Histogram of total inference duration in seconds (last_token_time - first_scheduled_time).", (), _E2E),
    (C, "prompt_tokens_total", "Cumulative number of prompt (input) tokens processed.", (), None),
    (C, "generation_tokens_total", "Cumulative number of generation (output) tokens produced.", (), None),
    (G, "kv_cache_hit_rate", "KV cache hit rate", (), None),
    (C, "kv_cache_reused_blocks", "Cumulative number of KV cache blocks reused (cache hits)", (), None),
    (C, "kv_cache_missed_blocks", "Cumulative number of KV cache blocks missed (cache misses)", (), None),
    (G, "kv_cache_utilization", "KV cache utilization", (), None),
    (G, "kv_cache_iter_reuse_rate", "Per-iteration KV cache block reuse rate", (), None),
    (G, "num_requests_running", "Number of active requests", (), None),
    (G, "num_requests_waiting", "Number of queued requests", (), None),
    (C, "num_requests_completed_total", "Total number of completed requests across iterations", (), None),
    (G, "max_num_active_requests", "Maximum number of active requests", (), None),
    (G, "iteration_latency_seconds", "Iteration latency in seconds", (), None),
    (G, "gpu_memory_usage_bytes", "GPU memory usage in bytes", (), None),
    (G, "kv_cache_max_blocks", "Maximum number of KV cache blocks", (), None),
    (G, "kv_cache_free_blocks", "Number of free KV cache blocks", (), None),
    (G, "kv_cache_used_blocks", "Number of used KV cache blocks", (), None),
    (G, "kv_cache_tokens_per_block", "Number of tokens per KV cache block", (), None),
    (G, "num_context_requests", "Number of context (prefill) requests", (), None),
    (G, "num_generation_requests", "Number of generation (decode) requests", (), None),
    (C, "prompt_cached_tokens_total",
     "Process-lifetime total prompt tokens served from KV cache. Resets only when the serving process "
     "restarts, not when the KV cache is flushed or evicted.", (), None),
    (H, "prompt_cached_tokens_per_request", "Histogram of cached prompt tokens per request.", (),
     [0, 64, 128, 256, 512, 1024, 2048, 4096, 8192]),
    (H, "prefill_perplexity", "Histogram of prefill perplexity per request.", (), _PERPLEXITY),
    (H, "generation_perplexity", "Histogram of generation perplexity per request.", (), _PERPLEXITY),
    (G, "prefill_batch_occupancy", "Fraction of max active slots occupied by context requests.", (), None),
    (H, "prefill_batch_tokens", "Histogram of total context tokens per iteration.", (),
     [64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768]),
    (C, "request_error_total", "Total request errors, labeled by HTTP status code.", ("http_code",), None),
)  # fmt: skip
TRTLLM_LABELS = {"model_name": "undefined", "engine_type": "undefined"}


def record_trtllm() -> None:
    """A TensorRT-LLM server after 13 requests and one iteration-stats report."""
    from prometheus_client import Counter, Gauge, Histogram

    kinds: dict[str, Any] = {C: Counter, G: Gauge, H: Histogram}
    metrics: dict[str, Any] = {}
    for kind, name, help_text, extra, buckets in TRTLLM_METRICS:
        kwargs: dict[str, Any] = {"buckets": buckets} if buckets else {}
        labelnames = [*TRTLLM_LABELS, *extra]
        metrics[name] = kinds[kind](
            name="trtllm_" + name, documentation=help_text, labelnames=labelnames, **kwargs
        )
    # tensorrt_llm/metrics/batch_metrics.py: BatchMetrics, one executor rank.
    batch = Gauge(
        "trtllm_scheduled_batch_size",
        "Number of real context and generation requests in the latest scheduled batch on this executor"
        " rank; zero when no batch is submitted. Under pipeline parallelism, other microbatches may still"
        " be running.",
        labelnames=("model_name", "engine_type", "rank"),
        registry=None,
        multiprocess_mode="all",
    )
    batch.labels(model_name="undefined", engine_type="undefined", rank="0").set(3)

    def plain(name: str) -> Any:
        return metrics[name].labels(**TRTLLM_LABELS)

    plain("prompt_cached_tokens_total")  # created up front by MetricsCollector, so 0 until a hit
    for n in range(13):  # log_request_metrics_dict, per finished request
        metrics["request_success_total"].labels(**TRTLLM_LABELS, finished_reason="stop").inc()
        plain("e2e_request_latency_seconds").observe(0.5 + n / 10)
        plain("time_to_first_token_seconds").observe(0.05 + n / 100)
        plain("time_per_output_token_seconds").observe(0.02)
        plain("request_queue_time_seconds").observe(0.01)
        plain("request_prefill_time_seconds").observe(0.04)
        plain("request_decode_time_seconds").observe(0.4 + n / 10)
        plain("request_inference_time_seconds").observe(0.45 + n / 10)
        plain("prompt_tokens_total").inc(100 + n)
        plain("generation_tokens_total").inc(20)
        plain("prompt_cached_tokens_per_request").observe(64 if n else 0)
        if n:
            plain("prompt_cached_tokens_total").inc(64)
        plain("prefill_perplexity").observe(3.5)
        plain("generation_perplexity").observe(1.8)
    metrics["request_error_total"].labels(**TRTLLM_LABELS, http_code="400").inc()
    # log_iteration_stats, one report
    for name, value in (
        ("num_requests_running", 3),
        ("num_requests_waiting", 1),
        ("max_num_active_requests", 64),
        ("iteration_latency_seconds", 0.021),
        ("gpu_memory_usage_bytes", 71_000_000_000),
        ("kv_cache_hit_rate", 0.25),
        ("kv_cache_utilization", 0.125),
        ("kv_cache_max_blocks", 4096),
        ("kv_cache_free_blocks", 3584),
        ("kv_cache_used_blocks", 512),
        ("kv_cache_tokens_per_block", 32),
        ("num_context_requests", 1),
        ("num_generation_requests", 2),
        ("prefill_batch_occupancy", 1 / 64),
        ("kv_cache_iter_reuse_rate", 0.5),
    ):
        plain(name).set(value)
    plain("num_requests_completed_total").inc(13)
    plain("kv_cache_reused_blocks").inc(24)
    plain("kv_cache_missed_blocks").inc(72)
    plain("prefill_batch_tokens").observe(1210)


def render() -> str:
    from prometheus_client import CollectorRegistry, generate_latest, multiprocess

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    return generate_latest(registry).decode()


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1] not in ("sglang", "trtllm"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as directory:
        # Before prometheus-client is imported: it picks its value storage then.
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory
        if argv[1] == "sglang":
            import sglang

            record_sglang(Path(sglang.__file__).parent.parent)
        else:
            record_trtllm()
        sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
