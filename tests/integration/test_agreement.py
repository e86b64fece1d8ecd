"""The dashboard and CI agree: for every spec, the findings the daemon exposes (fed through the real
probe code over a real socket, read back from /schemas) equal those `gdx lint --format json` reports
for the same request log: the same rules, severities, pointers and keywords, in the same order, and
the same counts per rule and severity as `guided_decoding_schema_lint_findings`.

The specs: every schema of JSONSchemaBench's development half, regexes, grammars and structural tags
of the shapes the lint rules look at, and a JSON spec that is not JSON. Schemas over the probe's
256 KiB text cap never reach the daemon (the probe sends no text for them): they are counted apart.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from exporter import wire
from exporter.probe.recorder import Recorder
from exporter.probe.shipper import Shipper
from exporter.schema import identity
from tools.bench.schemas import DATA, read
from tools.harness import ROOT
from tools.harness.processes import DaemonProcess
from tools.harness.scraping import wait_for

pytestmark = pytest.mark.slow

REGEXES = [
    r"[a-z]{8,64}", r"(?=.*\d)[A-Za-z0-9]{12}", r"(red|green|blue|cyan|magenta|yellow|black|white|gray)+",
    r"\d{3}-\d{4}", r"^[A-Z][a-z]*$",
]  # fmt: skip
GRAMMARS = [
    'root ::= "yes" | "no"',
    'root ::= item+\nitem ::= [a-z]{1,200} ","',
    "start: WORD+\n%import common.WORD",
]
TAGS: list[dict[str, Any]] = [
    {"type": "structural_tag", "structures": [{"begin": "<call>", "schema": {"type": "object", "properties": {
        "q": {"type": "string", "pattern": "[a-z]{4,90}"}}}, "end": "</call>"}], "triggers": ["<call>"]},
    {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<f"], "tags": [
        {"begin": "<f=a>", "content": {"type": "json_schema", "json_schema": {"type": "object", "not": {
            "required": ["x"]}}}, "end": "</f>"}]}},
]  # fmt: skip
BATCH = 400
NOT_ANALYSED = "<not analysed yet>"
NOT_JSON = '{"type": "object", "properties": {"a": {"type": "string"}'


def specs() -> tuple[list[tuple[str, str, dict[str, Any]]], int]:
    """(kind, text the engine compiles, request body) for every spec, and how many schemas were left
    out for being over the probe's text cap."""
    out: list[tuple[str, str, dict[str, Any]]] = []
    over = 0
    for doc in read(DATA / "schemas"):
        text = json.dumps(doc["schema"])
        if len(text) > wire.MAX_TEXT_CHARS:
            over += 1
            continue
        out.append(("json", text, {"structured_outputs": {"json": doc["schema"]}}))
    out += [("regex", r, {"structured_outputs": {"regex": r}}) for r in REGEXES]
    out += [("grammar", g, {"structured_outputs": {"grammar": g}}) for g in GRAMMARS]
    out += [("structural_tag", json.dumps(t), {"structured_outputs": {"structural_tag": t}}) for t in TAGS]
    out.append(("json", NOT_JSON, {"structured_outputs": {"json": NOT_JSON}}))
    return out, over


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=120) as resp:
        return json.loads(resp.read())


@pytest.mark.timeout(1200)
def test_the_daemon_and_gdx_lint_report_the_same_findings(tmp_path: Path) -> None:
    found, over = specs()
    assert len(found) > 4800 and over == 4
    sock = tmp_path / "probe.sock"
    daemon = DaemonProcess(
        [
            "--probe.socket",
            str(sock),
            "--no-collector.nvml",
            "--no-collector.vllm",
            "--web.schemas",
            "--probe.max-schemas",
            str(len(found) + 10),
        ]
    )
    daemon_side: dict[str, Any] = {}
    try:
        recorder = Recorder(max_schemas=len(found) + 10)
        hello = {"pod": "agree-0", "engine": "0", "engine_kind": "generic", "engine_version": "",
                 "backends": {}, "probe_version": "0"}  # fmt: skip
        shipper = Shipper(recorder, str(sock), hello)
        wait_for(lambda: sock.exists(), 30)
        # In batches: /schemas shows the places of the most recent analyses only (MAX_REDACTED).
        for start in range(0, len(found), BATCH):
            batch = found[start : start + BATCH]
            for i, (kind, text, _) in enumerate(batch, start):
                recorder.finish(recorder.begin("xgrammar"), "xgrammar", kind, text, 0.001 + i * 1e-6, False)
            shipper.tick()
            wanted = {identity.spec_hashes(kind, text)[0] for kind, text, _ in batch}

            def analysed(wanted: set[str] = wanted) -> bool:
                shipper.tick()  # a round larger than the socket buffer goes out over several ticks
                shown = {s["schema_hash"]: s for s in _get(daemon.url + "/schemas")["schemas"]}
                done = {h: shown[h] for h in wanted & shown.keys() if shown[h]["structure"] != NOT_ANALYSED}
                daemon_side.update(done)
                return wanted <= daemon_side.keys()  # a spec of an earlier batch again: read back then

            try:
                wait_for(analysed, 300, interval=0.5)
            except AssertionError as err:
                missing = sorted(wanted - daemon_side.keys())
                raise AssertionError(f"{len(missing)} specs never shown: {missing[:10]}") from err
        shipper.stop()
    finally:
        daemon.stop()
    hashes = {identity.spec_hashes(kind, text)[0] for kind, text, _ in found}
    log = tmp_path / "requests.jsonl"
    log.write_text("\n".join(json.dumps(body) for _, _, body in found) + "\n")
    linted = subprocess.run(
        [sys.executable, "-m", "exporter", "lint", "--format", "json", str(log)],
        capture_output=True, text=True, timeout=900, cwd=ROOT,
    )  # fmt: skip
    assert linted.returncode in (0, 1), linted.stderr[-2000:]
    lint_side = {s["schema_hash"]: s for f in json.loads(linted.stdout)["families"] for s in f["schemas"]}
    assert set(lint_side) == hashes == set(daemon_side)

    # unstable_serialization is the input's, not the spec's: one schema sent as several exact strings
    # (the daemon counts those serialisations apart). It must fire exactly where that happened.
    texts: dict[str, set[str]] = {}
    for kind, text, _ in found:
        texts.setdefault(identity.spec_hashes(kind, text)[0], set()).add(text)
    unstable = {
        h for h, s in lint_side.items() if any(f["rule"] == "unstable_serialization" for f in s["findings"])
    }
    assert unstable == {h for h, seen in texts.items() if len(seen) > 1}
    disagreements = []
    for schema_hash in sorted(hashes):
        ours, theirs = lint_side[schema_hash], daemon_side[schema_hash]
        spec_findings = [f for f in ours["findings"] if f["rule"] != "unstable_serialization"]
        places = [{k: f[k] for k in ("rule", "severity", "pointer", "keyword")} for f in spec_findings]
        counts = Counter(f"{f['rule']}/{f['severity']}" for f in spec_findings)
        if places[: len(theirs["places"])] != theirs["places"] or dict(counts) != theirs["findings"]:
            disagreements.append((schema_hash, ours["kind"], places[:5], theirs["places"][:5]))
        elif len(theirs["places"]) < min(len(places), 64):
            disagreements.append((schema_hash, ours["kind"], "places cut short", len(theirs["places"])))
    kinds = Counter(kind for kind, _, _ in found)
    print(
        f"\nagreement: {len(hashes)} distinct specs ({dict(kinds)}), {len(disagreements)} disagreements; "
        f"{over} schemas over the probe's {wire.MAX_TEXT_CHARS // 1024} KiB text cap not sent; "
        f"{len(unstable)} sent as more than one string (unstable_serialization, gdx lint's own)"
    )
    assert disagreements == [], disagreements[:5]
    assert lint_side[identity.schema_hash(NOT_JSON)]["findings"][0]["rule"] == "invalid_spec"
