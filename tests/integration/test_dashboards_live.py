"""Every panel query of the dashboard, executed by a real Prometheus against the real stack: the
daemon fed by the probe over real xgrammar compiles, scraping the real vLLM page, NVML faked at the
pynvml boundary (no GPU here), the project's recording rules loaded. Each query must parse and
return at least one series: no panel shows "No data". The daemon runs the `minimal` series profile:
it only drops series, so a query with data there has it on `full` too. Then the schema queries on
two synthetic nodes: the unenforced-keywords join and the top-50 bound, evaluated by a real Prometheus."""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

import exporter.probe as probe
from tests.support.dashboards import load, queries, substitute, titled, variable
from tools.harness import ROOT, fake_pynvml
from tools.harness.processes import DaemonProcess as Daemon
from tools.harness.processes import PageServer, Prometheus

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_every_panel_query_returns_data(tmp_path: Path, tokenizer_json: Path, vllm_page: str) -> None:
    import xgrammar as xgr
    from transformers import PreTrainedTokenizerFast

    fake = fake_pynvml.install_dir(tmp_path / "fakegpu", [35, 20])
    rules = tmp_path / "rules.yml"
    rules.write_text((ROOT / "alerts" / "guided-decoding.rules.yml").read_text())
    sock = tmp_path / "probe.sock"
    page = PageServer(vllm_page.encode())
    # a real SGLang 0.5.23 page (rendered by its own metrics code: tests/support/data/engine_pages.py)
    sglang = PageServer((ROOT / "tests" / "support" / "data" / "sglang-0.5.23-metrics.txt").read_bytes())
    started: list[Any] = []
    try:
        env = {"PYTHONPATH": os.pathsep.join([str(fake), str(ROOT)])}
        daemon = Daemon(
            ["--probe.socket", str(sock), "--vllm.target", page.url, "--sglang.target", sglang.url,
             "--metrics.profile", "minimal"],
            env=env,
        )  # fmt: skip
        started.append(daemon)
        prom = Prometheus(
            tmp_path, [daemon.url.removeprefix("http://")], job="guided-decoding-exporter", rule_files=[rules]
        )
        started.append(prom)
        os.environ.update(
            GDX_PROBE_SOCKET=str(sock),
            GDX_PROBE_INTERVAL="0.2",
            GDX_POD_NAME=f"127.0.0.1:{page.httpd.server_address[1]}",
        )
        assert probe.install("generic")
        tok = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_json))
        compiler = xgr.GrammarCompiler(
            xgr.TokenizerInfo.from_huggingface(tok, vocab_size=128256), max_threads=8
        )
        matcher_grammar = compiler.compile_json_schema(
            '{"type": "object", "properties": {"a": {"type": "string"}}}'
        )
        unenforced = {
            "type": "object",
            "properties": {"tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}},
        }
        recorder = probe.get_recorder()
        assert recorder is not None
        deadline = time.monotonic() + 40
        n = 0
        while time.monotonic() < deadline:
            n += 1
            variant = {
                "title": "Invoice",
                "type": "object",
                "properties": {"cc": {"enum": [f"T{n}-{i}" for i in range(30)]}},
            }
            compiler.compile_json_schema(json.dumps(variant))  # a per-request enum: a new schema each time
            compiler.compile_json_schema(json.dumps(unenforced))  # repeats: hits
            compiler.compile_json_schema('{"type": "string", "pattern": "^[A-Z]{8,64}$"}')
            matcher = xgr.GrammarMatcher(matcher_grammar)
            bitmask = xgr.allocate_token_bitmask(1, 128256)
            matcher.fill_next_token_bitmask(bitmask)  # mask time
            # vLLM's routing, as its grammar_init wrapper records it (vLLM itself cannot run here): one
            # request compiled where it resolved, one refused for resolving elsewhere
            recorder.route("auto", "xgrammar", "xgrammar", "compiled")
            recorder.route("auto", "llguidance", "xgrammar", "rejected", "json", json.dumps(unenforced))
            # and vLLM's API server, as its validation wrapper records it: one validated for xgrammar
            recorder.validated("xgrammar", 0.002)
            recorder.server_deaths = 0  # armed with markers: none of its predecessors died
            # its guard's counts, at zero as an enforcing guard and an observing one arm them (this one
            # process stands for both)
            for action in ("refused", "would_refuse"):
                recorder.guarded[("server_crash", action, "")] = 0
            time.sleep(0.2)
        empty = []
        for title, expr in queries(load()):
            if not prom.query(expr):
                empty.append((title, expr))
        assert not empty, "panels without data:\n" + "\n".join(f"{t}: {e}" for t, e in empty)
        with urllib.request.urlopen(daemon.url + "/metrics", timeout=10) as resp:  # the minimal page
            shown = resp.read().decode()
        assert re.search(r'guided_decoding_cpu_seconds_total\{[^}]*mode="idle"', shown)
        assert not re.search(r'guided_decoding_cpu_seconds_total\{[^}]*mode="user"', shown)
        assert "vllm:time_to_first_token_seconds_bucket" in shown and "vllm:num_requests_running" not in shown
        assert 'le="0.005"' in shown and "schema_compile_seconds_bucket{" in shown
        assert not re.search(r'guided_decoding_schema_compile_seconds_bucket\{[^}]*le="0.025"', shown)
    finally:
        probe.uninstall()
        for name in ("GDX_PROBE_SOCKET", "GDX_PROBE_INTERVAL", "GDX_POD_NAME"):
            os.environ.pop(name, None)
        for part in reversed(started):
            part.stop()
        page.close()
        sglang.close()


def _node_page(hashes: range, backends: tuple[str, ...], findings: dict[str, int]) -> bytes:
    """A node's exporter page: schema "s1" compiled by `backends` with its unenforced-keyword findings
    per severity, and `hashes` ranked by recent compile seconds (h05 = 5 s)."""
    lines = ["# TYPE guided_decoding_schema_info gauge"]
    lines += [
        f'guided_decoding_schema_info{{schema_hash="s1",shape_hash="x",family="f1",kind="json",backend="{b}",'
        f'title="Order"}} 1'
        for b in backends
    ]
    lines.append("# TYPE guided_decoding_schema_lint_findings gauge")
    finding = 'guided_decoding_schema_lint_findings{schema_hash="s1",rule="xgrammar_unenforced",severity='
    lines += [f'{finding}"{s}"}} {n}' for s, n in findings.items()]
    lines.append("# TYPE guided_decoding_schema_recent_compile_seconds gauge")
    lines += [f'guided_decoding_schema_recent_compile_seconds{{schema_hash="h{i:02d}"}} {i}' for i in hashes]
    return ("\n".join(lines) + "\n").encode()


def test_schema_queries_on_two_nodes_with_two_backends(tmp_path: Path) -> None:
    """Real Prometheus, two nodes: one compiles schema s1 with xgrammar and llguidance (two findings
    severities), the other with xgrammar; 60 distinct hashes between them. The unenforced-keywords
    join is one-to-many (the old `on (schema_hash)` join is refused as many-to-many), and the schema
    variable and table keep the top 50."""
    pages = [
        PageServer(_node_page(range(40), ("xgrammar", "llguidance"), {"warning": 2, "info": 1})),
        PageServer(_node_page(range(20, 60), ("xgrammar",), {"warning": 4})),
    ]
    prom = None
    try:
        nodes = [p.url.removeprefix("http://").removesuffix("/metrics") for p in pages]
        prom = Prometheus(tmp_path, nodes)
        deadline = time.monotonic() + 30
        while len(prom.query("count by (instance) (guided_decoding_schema_info)")) < 2:
            assert time.monotonic() < deadline, "Prometheus did not scrape both nodes"
            time.sleep(0.5)
        doc = load()

        (target,) = titled(doc, "Unenforced keywords by backend")["targets"]
        result = prom.query(substitute(target["expr"]))
        assert {r["metric"]["backend"]: float(r["value"][1]) for r in result} == {"xgrammar": 7.0}
        one = prom.query(substitute(target["expr"], instance=nodes[0]))
        assert [float(r["value"][1]) for r in one] == [3.0]
        old = (
            'sum by (backend) (guided_decoding_schema_lint_findings{rule="xgrammar_unenforced"}'
            " * on (schema_hash) group_left (backend)"
            " max by (schema_hash, backend) (guided_decoding_schema_info))"
        )
        with pytest.raises(urllib.error.HTTPError):
            prom.query(old)

        var = variable(doc, "schema_hash")
        inner = substitute(var["query"]).removeprefix("query_result(").removesuffix(")")
        ranked = prom.query(inner)
        # Grafana's query_result() option text, then the variable's regex: the hashes, hottest first
        texts = ["{" + ", ".join(f'{k}="{v}"' for k, v in r["metric"].items()) + "}" for r in ranked]
        hashes = [re.search(var["regex"][1:-1], t).group(1) for t in texts]  # type: ignore[union-attr]
        assert hashes == [f"h{i:02d}" for i in range(59, 9, -1)]
        only = prom.query(substitute(var["query"], instance=nodes[0]).removeprefix("query_result(")[:-1])
        assert len(only) == 40
        (rank,) = [t for t in titled(doc, "Top schemas")["targets"] if t["expr"].startswith("sort_desc(")]
        assert len(prom.query(substitute(rank["expr"]))) == 50
    finally:
        if prom is not None:
            prom.stop()
        for page in pages:
            page.close()
