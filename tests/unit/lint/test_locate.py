"""Locator on request logs (exporter.lint.locate): a line named by number or by its id, the column of
the pointer's node inside the spec that line sends, and the same answers however many findings ask."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from exporter.lint.locate import Location, Locator


@pytest.fixture
def log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, object]]:
    monkeypatch.chdir(tmp_path)
    lines: list[dict[str, object]] = [
        {"custom_id": "a", "body": {"response_format": {"type": "json_schema", "json_schema": {
            "name": "x", "schema": {"type": "object", "properties": {"b": {"enum": [1, 2]}}}}}}},
        {"id": "q7", "schema": {"type": "string", "pattern": "[a-z]+"}},
        {"custom_id": "a", "body": {}},  # a repeated id: the first line keeps it
    ]  # fmt: skip
    Path("log.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return lines


def test_a_line_by_number_or_id_and_the_column_of_the_node(log: list[dict[str, object]]) -> None:
    locator = Locator()
    text = Path("log.jsonl").read_text(encoding="utf-8").split("\n")
    spec = log[0]["body"]["response_format"]["json_schema"]["schema"]  # type: ignore[index]
    for _ in range(3):  # cached answers are the first answers
        where = locator.locate("log.jsonl:a", "/properties/b/enum", spec)
        assert (where.path, where.line) == ("log.jsonl", 1)
        assert text[0][where.column - 1 :].startswith('"enum": [1, 2]')
    where = locator.locate("log.jsonl:q7", "/pattern", log[1]["schema"])
    assert where.line == 2 and text[1][where.column - 1 :].startswith('"pattern"')
    assert locator.locate("log.jsonl:2", "", None) == Location("log.jsonl", 2, 1)


def test_names_that_are_no_place_give_what_is_known(log: list[dict[str, object]]) -> None:
    locator = Locator()
    assert locator.locate("log.jsonl:nope", "/x", {}) == Location("log.jsonl", 1, 1)  # the file, at its top
    assert locator.locate("missing.jsonl:3") == Location("missing.jsonl:3")
    assert locator.locate("log.jsonl:99", "/x", {"a": 1}) == Location("log.jsonl", 99, 1)
