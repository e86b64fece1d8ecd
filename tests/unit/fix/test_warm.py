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
        ({"empty": None}, r"empty: no \*\.json or \*/schema\.json in it"),
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
                              ready_timeout=0.5, timeout=1.0, exit_zero=False, log=None)  # fmt: skip
    assert main(args) == 2
    assert "http://127.0.0.1:9/health not ready within 0.5 s" in capsys.readouterr().err


def test_a_registry_folder_and_a_configmap_volume_give_their_json_files(tmp_path: Path) -> None:
    """A ConfigMap volume: each key a symlink into `..data`, a hidden timestamped folder; each file
    is read once, the hidden entries never."""
    data = tmp_path / "..2026_12_03_14_00_00.1"
    data.mkdir()
    for name in ("b.json", "a.json"):
        (data / name).write_text(json.dumps({"title": name}), encoding="utf-8")
    (tmp_path / "..data").symlink_to(data.name)
    for name in ("b.json", "a.json"):
        (tmp_path / name).symlink_to(Path("..data") / name)
    assert [schema["title"] for _, schema in schemas([str(tmp_path)])] == ["a.json", "b.json"]


def test_exit_zero_and_the_log_file_for_a_hook(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A postStart hook that fails kills the container: --exit-zero makes every outcome 0, and --log
    keeps what happened where the container's log is."""
    log = tmp_path / "hook.log"
    args = argparse.Namespace(url="http://127.0.0.1:9", schemas=[str(tmp_path / "missing.json")], model="m",
                              ready_timeout=0.5, timeout=1.0, exit_zero=True, log=str(log))  # fmt: skip
    assert main(args) == 0
    assert "missing.json" in log.read_text(encoding="utf-8")
    assert "missing.json" in capsys.readouterr().err
    args.exit_zero, args.log = False, str(tmp_path / "no" / "such" / "dir")
    assert main(args) == 2  # an unwritable log is said, and the run goes on
    assert "--log" in capsys.readouterr().err
