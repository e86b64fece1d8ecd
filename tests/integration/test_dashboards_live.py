"""Every panel query of the dashboard, executed by a real Prometheus against the real stack: the
daemon fed by the probe over real xgrammar compiles, scraping the real vLLM page, NVML faked at the
pynvml boundary (no GPU here), the project's recording rules loaded. Each query must parse and
return at least one series: no panel shows "No data"."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

import exporter.probe as probe
from tests.support.dashboards import load, queries
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
    started: list[Any] = []
    try:
        env = {"PYTHONPATH": os.pathsep.join([str(fake), str(ROOT)])}
        daemon = Daemon(["--probe.socket", str(sock), "--vllm.target", page.url], env=env)
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
            time.sleep(0.2)
        empty = []
        for title, expr in queries(load()):
            if not prom.query(expr):
                empty.append((title, expr))
        assert not empty, "panels without data:\n" + "\n".join(f"{t}: {e}" for t, e in empty)
    finally:
        probe.uninstall()
        for name in ("GDX_PROBE_SOCKET", "GDX_PROBE_INTERVAL", "GDX_POD_NAME"):
            os.environ.pop(name, None)
        for part in reversed(started):
            part.stop()
        page.close()
