"""`gdx hash --client instructor|pydantic-ai|langchain`: the schema each library sends an
OpenAI-compatible server for a Pydantic model, checked against the library's own output computed here
the way its user triggers it, at another point of the library's path than gdx takes it (gdx records the
HTTP body; these tests read the bound kwargs or the SDK call's arguments). Nothing leaves the process.

instructor pins jiter<0.15 against openai 3.57.0's jiter>=0.16, so it runs in its own virtualenv
(`make instructor`, GDX_INSTRUCTOR_PYTHON); LangChain and pydantic-ai are in the test virtualenv."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from exporter.lint.clients import MODULES, PACKAGES
from exporter.schema.identity import schema_hash

ROOT = Path(__file__).resolve().parents[2]
INSTRUCTOR_PYTHON = Path(
    os.environ.get("GDX_INSTRUCTOR_PYTHON", ROOT / ".venv-instructor" / "bin" / "python")
)

# An Optional field, a nested model, a Literal with a default and a docstring.
MODELS = textwrap.dedent(
    '''
    from typing import Literal, Optional

    from pydantic import BaseModel, Field


    class Address(BaseModel):
        city: str
        zip: Optional[str] = None


    class Invoice(BaseModel):
        """An invoice as the service asks the model for it."""

        number: str = Field(pattern=r"^INV-[0-9]+$")
        status: Literal["draft", "sent"] = "draft"
        billing: Address
        shipping: Optional[Address] = None
    '''
)

# instructor's user: `from_openai(client, mode=Mode.JSON_SCHEMA)`, the SDK's `create` replaced on the
# class to hand back its arguments instead of sending them.
INSTRUCTOR_EXPECTED = textwrap.dedent(
    """
    import json

    import instructor
    import openai
    from openai.resources.chat.completions import Completions

    from billing_models import Invoice

    class Sent(Exception):
        pass

    def create(self, **kwargs):
        raise Sent(kwargs)

    Completions.create = create
    client = instructor.from_openai(openai.OpenAI(api_key="test"), mode=instructor.Mode.JSON_SCHEMA)
    try:
        client.chat.completions.create(
            model="meta-llama/Llama-3.1-8B-Instruct",
            messages=[{"role": "user", "content": "Bill ACME"}],
            response_model=Invoice,
        )
    except Exception as err:
        while not isinstance(err, Sent):
            err = err.__cause__ or err.__context__
        print(json.dumps(err.args[0]["response_format"]))
    """
)


def start_gdx(*args: str, cwd: Path, python: Path | str = sys.executable, prelude: str = "") -> Any:
    """`gdx` in a process of its own, started so that the test computes its expectation meanwhile."""
    code = f"{prelude}import sys; from exporter.cli import main; sys.exit(main())"
    return subprocess.Popen(
        [str(python), "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip


def finished(process: Any) -> subprocess.CompletedProcess[str]:
    stdout, stderr = process.communicate(timeout=120)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def gdx(*args: str, cwd: Path, python: Path | str = sys.executable, prelude: str = "") -> Any:
    return finished(start_gdx(*args, cwd=cwd, python=python, prelude=prelude))


@pytest.fixture
def models(tmp_path: Path) -> Any:
    (tmp_path / "billing_models.py").write_text(MODELS, encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        import billing_models  # type: ignore[import-not-found]

        yield tmp_path, billing_models
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("billing_models", None)


def hash_of(schema: Any) -> str:
    return schema_hash(json.dumps(schema))


def instructor_python() -> Path:
    if not INSTRUCTOR_PYTHON.exists():
        raise FileNotFoundError(
            f"instructor's virtualenv is missing: {INSTRUCTOR_PYTHON} (run `make instructor`; make test does)"
        )
    return INSTRUCTOR_PYTHON


def instructor_sends(folder: Path) -> Any:
    out = subprocess.run(
        [str(instructor_python()), "-c", INSTRUCTOR_EXPECTED], capture_output=True, text=True, timeout=120,
        cwd=folder, env={"PYTHONPATH": str(folder), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    response_format = json.loads(out.stdout)
    assert response_format["type"] == "json_schema" and response_format["json_schema"]["name"] == "Invoice"
    return response_format["json_schema"]["schema"]


def langchain_sends(invoice: type) -> Any:
    """`with_structured_output(method="json_schema")` binds the model class itself as response_format;
    ChatOpenAI hands it to the SDK's `chat.completions.parse`, whose conversion is what is sent."""
    from langchain_openai import ChatOpenAI
    from openai.lib._parsing._completions import type_to_response_format_param

    chat = ChatOpenAI(
        model="meta-llama/Llama-3.1-8B-Instruct", api_key="test", base_url="http://vllm:8000/v1"
    )
    structured: Any = chat.with_structured_output(invoice, method="json_schema")
    assert structured.first.kwargs["response_format"] is invoice
    return type_to_response_format_param(invoice)["json_schema"]["schema"]


def pydantic_ai_sends(invoice: type, provider: str, model_name: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """`Agent(output_type=NativeOutput(Model)).run_sync(...)`, the SDK's `create` replaced on the class."""
    import openai
    from openai.resources.chat.completions import AsyncCompletions
    from pydantic_ai import Agent, NativeOutput
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.providers.vllm import VLLMProvider

    sent: list[dict[str, Any]] = []

    async def create(self: Any, **kwargs: Any) -> Any:
        sent.append(kwargs)
        raise RuntimeError("not sent")

    monkeypatch.setattr(AsyncCompletions, "create", create)
    client = openai.AsyncOpenAI(api_key="test", base_url="http://vllm:8000/v1")
    providers = {"openai": OpenAIProvider, "vllm": VLLMProvider}
    model = OpenAIChatModel(model_name, provider=providers[provider](openai_client=client))
    with contextlib.suppress(Exception):  # whatever pydantic-ai makes of the refusal
        Agent(model, output_type=NativeOutput(invoice)).run_sync("Bill ACME")
    response_format = sent[0]["response_format"]
    assert response_format["type"] == "json_schema" and response_format["json_schema"]["name"] == "Invoice"
    return response_format["json_schema"]["schema"]


def test_instructor_sends_model_json_schema_unchanged(models: Any) -> None:
    folder, billing = models
    started = start_gdx(
        "hash", "--client", "instructor", "billing_models:Invoice", cwd=folder, python=instructor_python()
    )
    sent = instructor_sends(folder)
    out = finished(started)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    assert out.stdout.split()[0] == f"schema_hash={hash_of(sent)}"
    # Mode.JSON_SCHEMA sends `model_json_schema()` as it is: the same hash as --client pydantic.
    assert sent == billing.Invoice.model_json_schema()


def test_langchain_sends_the_openai_sdks_strict_schema(models: Any) -> None:
    folder, billing = models
    started = start_gdx("hash", "--client", "langchain", "billing_models:Invoice", cwd=folder)
    sent = langchain_sends(billing.Invoice)
    out = finished(started)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    assert out.stdout.split()[0] == f"schema_hash={hash_of(sent)}"
    assert hash_of(sent) != hash_of(billing.Invoice.model_json_schema())
    assert sent["additionalProperties"] is False
    assert sent["required"] == ["number", "status", "billing", "shipping"]  # defaults and all


def test_pydantic_ai_sends_its_own_transform(models: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    folder, billing = models
    started = start_gdx("hash", "--client", "pydantic-ai", "billing_models:Invoice", cwd=folder)
    sent = pydantic_ai_sends(billing.Invoice, "openai", "meta-llama/Llama-3.1-8B-Instruct", monkeypatch)
    out = finished(started)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    assert out.stdout.split()[0] == f"schema_hash={hash_of(sent)}"
    # VLLMProvider with a model of no family it knows sends the same.
    assert sent == pydantic_ai_sends(billing.Invoice, "vllm", "acme/invoices-7b", monkeypatch)
    assert hash_of(sent) != hash_of(billing.Invoice.model_json_schema())
    # No titles, the description moved out to json_schema.description, additionalProperties false
    # everywhere, `required` as pydantic has it (not strict: the defaults make it incompatible).
    assert "title" not in sent and "description" not in sent
    assert sent["additionalProperties"] is False and sent["$defs"]["Address"]["additionalProperties"] is False
    assert sent["required"] == ["number", "billing"]
    # Not modelled: VLLMProvider gives the llama, qwen, mistral, glm families a profile that inlines
    # `$defs` (gemma: Google's transform), so their schema_hash differs from --client pydantic-ai's.
    inlined = pydantic_ai_sends(billing.Invoice, "vllm", "meta-llama/Llama-3.1-8B-Instruct", monkeypatch)
    assert "$defs" not in inlined and inlined != sent


@pytest.mark.parametrize("client", ["instructor", "pydantic-ai", "langchain"])
def test_a_client_that_is_not_installed_is_one_line_and_exit_2(models: Any, client: str) -> None:
    folder, _ = models
    module = MODULES[client]
    out = gdx(
        "hash", "--client", client, "billing_models:Invoice", cwd=folder,
        prelude=f"import sys; sys.modules[{module!r}] = None; ",
    )  # fmt: skip
    what, package = PACKAGES[client]
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == (
        f"gdx hash: --client {client} needs {what} installed beside gdx (pip install '{package}'): "
        f"import of {module} halted; None in sys.modules\n"
    )


def test_a_type_adapter_is_refused_by_the_new_clients(models: Any) -> None:
    folder, _ = models
    (folder / "adapters.py").write_text(
        "from pydantic import TypeAdapter\n\nfrom billing_models import Invoice\n\n"
        "Invoices = TypeAdapter(list[Invoice])\n",
        encoding="utf-8",
    )
    out = gdx("hash", "--client", "langchain", "adapters:Invoices", cwd=folder)
    assert out.returncode == 2
    assert "adapters:Invoices: langchain takes a type, not a TypeAdapter" in out.stderr
