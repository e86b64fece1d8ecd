"""The JSON Schema each client library sends for a Python type (a target of exporter/lint/targets.py).

Teams write schemas as models; what reaches the engine is what their client makes of the model, and the
schema_hash differs with the client. Each client's own conversion is called, never rewritten here:

- `pydantic`: `Model.model_json_schema()` (what vLLM's own examples send);
- `openai`: the installed OpenAI SDK's conversion for `client.chat.completions.parse(response_format=Model)`
  (`openai.lib._parsing._completions.type_to_response_format_param`, which calls
  `openai.lib._pydantic.to_strict_json_schema`: every property required, `additionalProperties: false`,
  single `allOf`s flattened);
- `instructor`, `pydantic-ai`, `langchain`: the library's user-facing call for structured output through
  an OpenAI-compatible server, made offline (a throwaway API key, an unreachable base URL, no retries)
  on an OpenAI client whose HTTP client records the request body where it would send it and raises
  instead; the schema is that body's `response_format.json_schema.schema`. instructor:
  `instructor.from_openai(client, mode=instructor.Mode.JSON_SCHEMA).chat.completions.create(
  response_model=Model)` (the mode that sends `response_format`; its default, TOOLS, sends a named
  tool instead). pydantic-ai: `Agent(OpenAIChatModel(name, provider=VLLMProvider(openai_client=client)),
  output_type=NativeOutput(Model)).run_sync(...)`. LangChain: `ChatOpenAI(...).with_structured_output(
  Model, method="json_schema").invoke(...)` on the Chat Completions API, LangSmith tracing off.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import logging
from collections.abc import Callable
from typing import Any

CLIENTS = ("pydantic", "openai", "instructor", "pydantic-ai", "langchain")
# Each client that is not pydantic itself: what it needs, and what `pip install` takes for it.
PACKAGES = {
    "openai": ("the OpenAI SDK", "openai"),
    "instructor": ("instructor", "instructor"),
    "pydantic-ai": ("pydantic-ai with its OpenAI support", "pydantic-ai-slim[openai]"),
    "langchain": ("langchain-openai", "langchain-openai"),
}
# The module each of the recorded clients imports first: a missing package is found before anything else.
MODULES = {"instructor": "instructor", "pydantic-ai": "pydantic_ai", "langchain": "langchain_openai"}
# The offline client: requests stop in its HTTP client, so neither the URL (`.invalid` never resolves)
# nor the key is ever used. The model name matches no family that pydantic-ai gives its own profile and
# none that LangChain moves off `json_schema`.
OFFLINE_URL = "http://gdx.invalid/v1"
OFFLINE_KEY = "gdx-offline"
OFFLINE_MODEL = "gdx-offline"


class ClientError(Exception):
    """A client that is not installed, or that makes no JSON Schema of the type: the message says why."""


def schema(target: str, client: str, obj: Any) -> dict[str, Any]:
    """The JSON Schema `client` sends for `obj` (the object `target` names)."""
    if client == "pydantic":
        return _pydantic(obj)
    if client == "openai":
        return _openai(obj)
    if client not in _SENDERS:
        raise ClientError(f"unknown client {client!r}: one of {', '.join(CLIENTS)}")
    return _sent_schema(target, client, obj)


def _pydantic(obj: Any) -> dict[str, Any]:
    import pydantic

    if isinstance(obj, type) and issubclass(obj, pydantic.BaseModel):
        return obj.model_json_schema()
    if isinstance(obj, pydantic.TypeAdapter):
        return obj.json_schema()
    if isinstance(obj, type) and dataclasses.is_dataclass(obj):
        return pydantic.TypeAdapter(obj).json_schema()
    raise ClientError(f"{obj!r} is not a Pydantic model, a TypeAdapter or a dataclass")


def _missing(client: str, err: ImportError) -> ClientError:
    """One line: the client, the package to install, and Python's own reason."""
    what, package = PACKAGES[client]
    reason = " ".join(str(err).split())
    return ClientError(
        f"--client {client} needs {what} installed beside gdx (pip install '{package}'): {reason}"
    )


def _openai(obj: Any) -> dict[str, Any]:
    try:
        import pydantic
        from openai.lib._parsing._completions import type_to_response_format_param
        from openai.lib._pydantic import to_strict_json_schema
    except ImportError as err:
        raise _missing("openai", err) from err
    if isinstance(obj, pydantic.TypeAdapter):
        schema: dict[str, Any] = to_strict_json_schema(obj)
        return schema
    if not isinstance(obj, type):
        raise ClientError(f"{obj!r} is not a Pydantic model, a TypeAdapter or a dataclass")
    param: Any = type_to_response_format_param(obj)
    return dict(param["json_schema"]["schema"])


class _Stopped(Exception):
    """Raised by the recording HTTP client in place of sending: the request went no further."""


class _Recorder:
    """HTTP clients for the OpenAI SDK, of the SDK's own default classes, that record each request's
    JSON body and raise instead of sending it."""

    def __init__(self, openai: Any) -> None:
        self.openai = openai
        self.bodies: list[Any] = []

    def _record(self, request: Any) -> None:
        self.bodies.append(json.loads(request.read() or b"null"))
        raise _Stopped("gdx stops the request here: nothing is sent")

    def sync_client(self) -> Any:
        record = self._record
        default: Any = self.openai.DefaultHttpxClient

        class RecordingClient(default):  # type: ignore[misc]
            def send(self, request: Any, *args: Any, **kwargs: Any) -> Any:
                record(request)

        return RecordingClient()

    def async_client(self) -> Any:
        record = self._record
        default: Any = self.openai.DefaultAsyncHttpxClient

        class RecordingAsyncClient(default):  # type: ignore[misc]
            async def send(self, request: Any, *args: Any, **kwargs: Any) -> Any:
                record(request)

        return RecordingAsyncClient()


def _import(client: str, *modules: str) -> list[Any]:
    try:
        return [importlib.import_module(name) for name in modules]
    except ImportError as err:
        raise _missing(client, err) from err


def _send_instructor(obj: Any, recorder: _Recorder) -> None:
    openai, instructor = _import("instructor", "openai", "instructor")
    client = openai.OpenAI(
        api_key=OFFLINE_KEY, base_url=OFFLINE_URL, max_retries=0, http_client=recorder.sync_client()
    )
    patched = instructor.from_openai(client, mode=instructor.Mode.JSON_SCHEMA)
    patched.chat.completions.create(
        model=OFFLINE_MODEL, messages=[{"role": "user", "content": "gdx"}], response_model=obj
    )


def _send_pydantic_ai(obj: Any, recorder: _Recorder) -> None:
    openai, pydantic_ai, models, providers = _import(
        "pydantic-ai",
        "openai",
        "pydantic_ai",
        "pydantic_ai.models.openai",
        "pydantic_ai.providers.vllm",
    )
    client = openai.AsyncOpenAI(
        api_key=OFFLINE_KEY, base_url=OFFLINE_URL, max_retries=0, http_client=recorder.async_client()
    )
    model = models.OpenAIChatModel(OFFLINE_MODEL, provider=providers.VLLMProvider(openai_client=client))
    agent = pydantic_ai.Agent(model, output_type=pydantic_ai.NativeOutput(obj))
    agent.run_sync("gdx")


def _send_langchain(obj: Any, recorder: _Recorder) -> None:
    (chat_models,) = _import("langchain", "langchain_openai")
    try:
        untraced: Any = importlib.import_module("langsmith").tracing_context(enabled=False)
    except ImportError:
        untraced = contextlib.nullcontext()
    chat = chat_models.ChatOpenAI(
        model=OFFLINE_MODEL,
        api_key=OFFLINE_KEY,
        base_url=OFFLINE_URL,
        openai_proxy=None,
        max_retries=0,
        use_responses_api=False,
        http_client=recorder.sync_client(),
    )
    structured = chat.with_structured_output(obj, method="json_schema")
    with untraced:
        structured.invoke("gdx")


_SENDERS: dict[str, Callable[[Any, _Recorder], None]] = {
    "instructor": _send_instructor,
    "pydantic-ai": _send_pydantic_ai,
    "langchain": _send_langchain,
}


def _sent_schema(target: str, client: str, obj: Any) -> dict[str, Any]:
    """The `response_format` JSON Schema of the first request `client` makes for `obj`."""
    import pydantic

    if isinstance(obj, pydantic.TypeAdapter):
        raise ClientError(
            f"{target}: {client} takes a type, not a TypeAdapter: name the model (or dataclass) itself"
        )
    if not isinstance(obj, type):
        raise ClientError(f"{target}: {obj!r} is not a Pydantic model or a dataclass")
    _, openai = _import(client, MODULES[client], "openai")
    recorder = _Recorder(openai)
    quiet = logging.root.manager.disable
    logging.disable(logging.CRITICAL)  # the libraries log the stopped request as a connection error
    try:
        _SENDERS[client](obj, recorder)
    except ClientError:
        raise
    except Exception:
        if not recorder.bodies:  # it failed before any request: the library's own error
            raise
    finally:
        logging.disable(quiet)
    if not recorder.bodies:
        raise ClientError(f"{target}: {client} made no request for it")
    body = recorder.bodies[0]
    response_format = body.get("response_format") if isinstance(body, dict) else None
    if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
        json_schema = response_format.get("json_schema")
        schema = json_schema.get("schema") if isinstance(json_schema, dict) else None
        if isinstance(schema, dict):
            return schema
    keys = ", ".join(sorted(body)) if isinstance(body, dict) else type(body).__name__
    raise ClientError(
        f"{target}: {client} sent no response_format of type json_schema for it (its request has {keys})"
    )
