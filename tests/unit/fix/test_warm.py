"""`gdx warm`'s inputs and its refusals (the real server test is tests/system/test_vllm_probe.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from exporter.fix.warm import WarmError, main, schemas


def test_a_fix_folder_gives_each_family_schema_in_order_and_a_file_itself(tmp_path: Path) -> None:
    for name, schema in (("b-2", {"type": "integer"}), ("a-1", {"type": "string"})):
        (tmp_path / name).mkdir()
        (tmp_path / name / "schema.json").write_text(json.dumps(schema), encoding="utf-8")
    (tmp_path / "one.json").write_text('{"properties": {"z": {}, "a": {}}}', encoding="utf-8")
    found = schemas([str(tmp_path), str(tmp_path / "one.json")])
    assert [Path(name).parent.name for name, _ in found[:2]] == ["a-1", "b-2"]
    assert list(found[2][1]["properties"]) == ["z", "a"]  # sent as the file holds it


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        ({"empty": None}, r"a folder without \*/schema\.json"),
        ({"x.json": "{nope"}, "x.json: Expecting property name"),
    ],
)
def test_bad_input_is_refused_before_any_request(
    tmp_path: Path, layout: dict[str, str | None], message: str
) -> None:
    for name, text in layout.items():
        if text is None:
            (tmp_path / name).mkdir()
        else:
            (tmp_path / name).write_text(text, encoding="utf-8")
    with pytest.raises(WarmError, match=message):
        schemas([str(tmp_path / next(iter(layout)))])


def test_an_engine_that_never_gets_ready_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "s.json").write_text("{}", encoding="utf-8")
    args = argparse.Namespace(url="http://127.0.0.1:9/", schemas=[str(tmp_path / "s.json")], model="m",
                              ready_timeout=0.5, timeout=1.0)  # fmt: skip
    assert main(args) == 2
    assert "http://127.0.0.1:9/health not ready within 0.5 s" in capsys.readouterr().err
