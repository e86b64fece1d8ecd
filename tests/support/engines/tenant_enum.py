"""One engine pod of the per-tenant enum incident: real xgrammar compiles over the real Llama 3 vocabulary,
with the probe installed as documented for engines without a plugin (`exporter.probe.install("generic")`).
The live alert test runs two of these on one node (one daemon socket), each with its own GDX_POD_NAME.

Usage: python tests/support/engines/tenant_enum.py TOKENIZER_JSON FIRST_TENANT
(GDX_PROBE_SOCKET and GDX_POD_NAME set.) Prints "ready" once the compiler is built and the probe is
connected, then reads one command a line on stdin:

    static    compile the static invoice schema every PACE seconds (cache hits after the first)
    tenants   compile a new per-tenant schema every PACE seconds (the injection), FIRST_TENANT onwards
    flood     compile new per-tenant schemas back to back (a compile burst: one core busy)
    idle      compile nothing
    stop      exit (so does the end of stdin: a test that dies takes its pods with it)
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from itertools import count
from typing import Any

import exporter.probe as probe

PACE = {"static": 0.1, "tenants": 0.2, "flood": 0.0}

INVOICE: dict[str, Any] = {
    "title": "Invoice",
    "type": "object",
    "properties": {
        "vendor": {"type": "string"},
        "line_items": {"type": "array", "maxItems": 25, "items": {"type": "object", "properties": {
            "sku": {"type": "string"}, "qty": {"type": "integer"}, "cost_center_id": {"type": "string"}}}},
    },
}  # fmt: skip

# A tenant's cost centres injected as an enum. 400 of them: with xgrammar 0.2.9 a 50-entry enum
# compiles in 4-5 ms over the Llama 3 vocabulary, at the page's 5 ms line; 400 take 8-15 ms.
COST_CENTRES = 400


def tenant(n: int) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(json.dumps(INVOICE))
    item = schema["properties"]["line_items"]["items"]["properties"]
    item["cost_center_id"] = {"enum": [f"CC-{n:05d}-{i:03d}" for i in range(COST_CENTRES)]}
    return schema


def main() -> None:
    tokenizer_json, first_tenant = sys.argv[1], int(sys.argv[2])
    assert probe.install("generic"), "the probe did not arm"  # before xgrammar is imported
    import xgrammar as xgr
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_file=tokenizer_json)
    info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=128256)
    # one thread: two pods share the test machine's cores with Prometheus, Alertmanager and the daemon
    compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=True, cache_limit_bytes=512 << 20)
    shipper = probe.get_shipper()
    assert shipper is not None
    deadline = time.monotonic() + 60
    while not shipper.counters["connects"]:
        if time.monotonic() > deadline:
            raise SystemExit("the probe never connected to " + os.environ.get("GDX_PROBE_SOCKET", "?"))
        time.sleep(0.1)

    stopped = threading.Event()

    mode = ["idle"]

    def read_commands() -> None:
        for line in sys.stdin:
            command = line.strip()
            if command == "stop":
                break
            if command in PACE or command == "idle":
                mode[0] = command
        stopped.set()

    threading.Thread(target=read_commands, daemon=True).start()
    print("ready", flush=True)
    static, tenants = json.dumps(INVOICE), count(first_tenant)
    while not stopped.is_set():
        current = mode[0]
        if current == "static":
            compiler.compile_json_schema(static)
        elif current in ("tenants", "flood"):
            compiler.compile_json_schema(json.dumps(tenant(next(tenants))))
        stopped.wait(PACE.get(current, 0.1))


if __name__ == "__main__":
    main()
