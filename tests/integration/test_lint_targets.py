"""Python targets in `gdx hash` and `gdx lint`: the schema the client sends for a Pydantic model, a
TypeAdapter or a dataclass, computed by the client library itself (pydantic, the OpenAI SDK)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from exporter.schema.identity import schema_hash

MODELS = textwrap.dedent(
    '''
    from dataclasses import dataclass
    from typing import Literal, Optional

    from pydantic import BaseModel, Field, TypeAdapter


    class Address(BaseModel):
        city: str
        zip: Optional[str] = None


    class Invoice(BaseModel):
        """An invoice as the service asks the model for it."""

        number: str = Field(pattern=r"^INV-[0-9]+$")
        status: Literal["draft", "sent"]
        billing: Address
        shipping: Optional[Address] = None
        lines: list[float] = Field(max_length=50)


    @dataclass
    class Point:
        x: int
        y: int


    Points = TypeAdapter(list[Point])
    '''
)


def gdx(*args: str, cwd: Path, prelude: str = "") -> subprocess.CompletedProcess[str]:
    code = f"{prelude}import sys; from exporter.cli import main; sys.exit(main())"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300, cwd=cwd,
        env={"PYTHONPATH": str(Path(__file__).resolve().parents[2]), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip


@pytest.fixture
def models(tmp_path: Path) -> Path:
    (tmp_path / "billing_models.py").write_text(MODELS, encoding="utf-8")
    return tmp_path


def expected(client: str, name: str, folder: Path) -> str:
    """The schema_hash of what the client library makes of the model, computed here the user's way."""
    sys.path.insert(0, str(folder))
    try:
        import billing_models  # type: ignore[import-not-found]

        target = getattr(billing_models, name)
        if client == "openai":
            from openai.lib._parsing._completions import type_to_response_format_param
            from openai.lib._pydantic import to_strict_json_schema

            if name == "Points":
                return schema_hash(json.dumps(to_strict_json_schema(target)))
            return schema_hash(json.dumps(type_to_response_format_param(target)["json_schema"]["schema"]))
        schema = target.json_schema() if name == "Points" else target.model_json_schema()
        return schema_hash(json.dumps(schema))
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("billing_models", None)


@pytest.mark.parametrize("client", ["pydantic", "openai"])
@pytest.mark.parametrize("name", ["Invoice", "Points"])
def test_hash_of_a_target_is_the_schema_the_client_sends(models: Path, client: str, name: str) -> None:
    by_module = gdx("hash", "--client", client, f"billing_models:{name}", cwd=models)
    by_file = gdx("hash", "--client", client, f"{models / 'billing_models.py'}:{name}", cwd=models.parent)
    assert by_module.returncode == 0 and by_file.returncode == 0, by_module.stderr + by_file.stderr
    want = expected(client, name, models)
    assert by_module.stdout.split()[0] == f"schema_hash={want}"
    assert by_file.stdout.split()[0] == f"schema_hash={want}"


def test_the_openai_sdk_sends_another_schema_than_model_json_schema(models: Path) -> None:
    assert expected("openai", "Invoice", models) != expected("pydantic", "Invoice", models)
    strict = gdx("lint", "--format", "json", "--client", "openai", "billing_models:Invoice", cwd=models)
    assert strict.returncode == 0, strict.stderr
    (family,) = json.loads(strict.stdout)["families"]
    (schema,) = family["schemas"]
    assert (schema["name"], schema["schema_hash"]) == (
        "billing_models:Invoice",
        expected("openai", "Invoice", models),
    )


def test_a_target_that_does_not_import_is_exit_2_and_nothing_else_is_analysed(models: Path) -> None:
    (models / "broken.py").write_text("import no_such_module_anywhere\n", encoding="utf-8")
    out = gdx("lint", "billing_models:Invoice", "broken:Model", cwd=models)
    assert out.returncode == 2 and out.stdout == ""
    assert "broken:Model: importing broken failed: ModuleNotFoundError" in out.stderr
    missing = gdx("hash", "billing_models:Nothing", cwd=models)
    assert (
        missing.returncode == 2 and "billing_models:Nothing: billing_models has no Nothing" in missing.stderr
    )
    plain = gdx("hash", "billing_models:Address.model_config", cwd=models)
    assert plain.returncode == 2 and "is not a Pydantic model" in plain.stderr


def test_client_openai_without_the_sdk_says_so(models: Path) -> None:
    out = gdx(
        "hash",
        "--client",
        "openai",
        "billing_models:Invoice",
        cwd=models,
        prelude="import sys; sys.modules['openai'] = None; ",
    )
    assert out.returncode == 2 and out.stdout == ""
    assert "--client openai needs the OpenAI SDK installed beside gdx" in out.stderr
