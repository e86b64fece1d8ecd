"""/schemas shows a schema's structure by an allow-list of JSON Schema keywords: every literal the
schema carries, wherever it hides ($comment, examples, x-* notes, a pattern's alternatives, a
patternProperties key, a remote $ref, an unknown format or type), is gone; the structure stays."""

from __future__ import annotations

import json
from typing import Any

from exporter.daemon.receiver.analysis import redact

MARKER = "TENANT-acme-7f3e"


def leaky() -> dict[str, Any]:
    return {
        "$schema": f"https://{MARKER}.example/schema",
        "$id": f"urn:{MARKER}",
        "$comment": f"for {MARKER}",
        "title": MARKER,
        "x-owner": {"team": MARKER, "pager": [MARKER]},
        "x-note": MARKER,
        "discriminator": {"propertyName": "kind", "mapping": {MARKER: "#/$defs/Line"}},
        "type": "object",
        "required": ["vendor", "lines"],
        "properties": {
            "vendor": {"type": "string", "pattern": f"^(?:{MARKER}|globex)$", "maxLength": 40,
                       "examples": [MARKER], "format": f"{MARKER}-id", "contentMediaType": MARKER},
            "lines": {"type": "array", "maxItems": 25, "items": {"$ref": "#/$defs/Line"}},
            "kind": {"type": MARKER, "const": MARKER, "default": MARKER, "enum": [MARKER, 1]},
            "remote": {"$ref": f"https://{MARKER}.example/line.json"},
        },
        "patternProperties": {f"^{MARKER}_[0-9]+$": {"type": "integer", "minimum": 0}},
        "additionalProperties": False,
        "$defs": {
            "Line": {
                "anyOf": [{"type": ["string", "null"], "format": "date-time"}, {"not": {"$comment": MARKER}}],
                "deprecated": True,
                "description": MARKER,
                "dependentRequired": {"a": ["b", 7]},
            }
        },
    }  # fmt: skip


def test_no_literal_comes_through_however_it_is_spelled() -> None:
    shown = redact("json", leaky())
    assert MARKER not in shown and MARKER.lower() not in shown.lower()
    assert "globex" not in shown  # the pattern's other alternative: a literal too


def test_the_structure_stays() -> None:
    shown = json.loads(redact("json", leaky()))
    assert shown["type"] == "object" and shown["required"] == ["vendor", "lines"]
    assert shown["additionalProperties"] is False
    vendor = shown["properties"]["vendor"]
    assert vendor == {"type": "string", "pattern": "*", "maxLength": 40, "examples": "*", "format": "*",
                      "contentMediaType": "*"}  # fmt: skip
    assert shown["properties"]["lines"] == {
        "type": "array",
        "maxItems": 25,
        "items": {"$ref": "#/$defs/Line"},
    }
    assert shown["properties"]["kind"] == {"type": "*", "const": "*", "default": "*", "enum": "*"}
    assert shown["properties"]["remote"] == {"$ref": "*"}
    assert shown["patternProperties"] == {"*1": {"type": "integer", "minimum": 0}}
    line = shown["$defs"]["Line"]
    assert line["anyOf"] == [{"type": ["string", "null"], "format": "date-time"}, {"not": {"$comment": "*"}}]
    assert line["deprecated"] is True and line["description"] == "*"
    assert line["dependentRequired"] == {"a": ["b", "*"]}
    # keywords outside the vocabularies: neither name nor value shown, their number is
    assert shown["*"] == 3 and "x-owner" not in shown and "discriminator" not in shown
    assert shown["$schema"] == shown["$id"] == shown["$comment"] == shown["title"] == "*"


def test_odd_values_where_a_schema_belongs() -> None:
    assert json.loads(redact("json", {"items": MARKER, "not": 5, "allOf": [True, MARKER]})) == {
        "items": "*", "not": "*", "allOf": [True, "*"],
    }  # fmt: skip
    assert json.loads(redact("json", [MARKER, {"x-a": 1}])) == ["*", {"*": 1}]
    assert redact("json", MARKER) == '"*"'
    assert redact("regex", MARKER) == "<not JSON: not shown>"
    deep: Any = {}
    for _ in range(100_000):
        deep = {"not": deep}
    assert redact("json", deep) == "<unparsable>"
