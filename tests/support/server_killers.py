"""Schemas of the class that stalls or kills vLLM's API server under its default router: built from
the mechanism (optional properties nested in optional properties, each level multiplying the regex
outlines builds; `patternProperties` beside `properties` sends them to outlines), and the vendored
JsonSchemaStore ones measured on the real server (clang-format: a stall; theme: an abort)."""

from __future__ import annotations

import gzip
import json
from typing import Any

from tools.harness import JSONSCHEMABENCH


def nested(width: int, depth: int) -> dict[str, Any]:
    """`width` optional properties per object, `depth` objects deep, routed to outlines: outlines'
    regex lists the orders optional properties may take, about width**2 alternatives per level."""

    def level(d: int) -> dict[str, Any]:
        leaf = {"type": "string"}
        return {
            "type": "object",
            "properties": {f"p{i}": level(d - 1) if d > 1 else leaf for i in range(width)},
        }

    schema = level(depth)
    schema["patternProperties"] = {"^x_": {"type": "integer"}}
    return schema


def jsonschemastore(name: str) -> dict[str, Any]:
    with gzip.open(JSONSCHEMABENCH / "schemas" / "JsonSchemaStore.jsonl.gz", "rt") as rows:
        for line in rows:
            row = json.loads(line)
            if row["id"] == name:
                return dict(row["schema"])
    raise LookupError(name)
