"""Drives SGLang's real grammar backend the way its GrammarManager does, with the probe installed as
documented for SGLang (`exporter.probe.install("sglang")`, e.g. from sitecustomize.py).

Usage: python tests/support/engines/sglang_grammar.py TOKENIZER_JSON REPEATS VARIANTS
(SGLang's grammar modules on PYTHONPATH; GDX_PROBE_SOCKET set). Prints a JSON summary.
"""

from __future__ import annotations

import json
import sys
import time

import exporter.probe as probe


def main() -> None:
    tokenizer_json, repeats, variants = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    assert probe.install("sglang")  # before SGLang is imported, as sitecustomize would
    from sglang.srt.constrained.xgrammar_backend import XGrammarGrammarBackend
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_file=tokenizer_json)
    backend = XGrammarGrammarBackend(tok, vocab_size=128256, model_eos_token_ids=[128009])
    schema = {"type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}}}
    specs = [json.dumps(schema)] * repeats
    for v in range(variants):
        specs.append(
            json.dumps({**schema, "properties": {**schema["properties"], "cc": {"enum": [f"T{v}"]}}})
        )
    hits = 0
    for spec in specs:
        key = ("json", spec)
        value, hit = backend.get_cached_or_future_value(key, False)
        if hit:
            hits += 1
        else:  # what GrammarManager.get_ready_grammar_requests does with a finished future
            backend.set_cache(key, value.result().copy())
    shipper = probe.get_shipper()
    assert shipper is not None
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and shipper.counters["connects"] == 0:
        time.sleep(0.05)
    time.sleep(3 * shipper.interval)  # at least one snapshot after the last compile
    print(json.dumps({"requests": len(specs), "sglang_hits": hits}))


if __name__ == "__main__":
    main()
