"""The command-line pieces `gdx lint` and `gdx fix` share: which engine version `--engine` names, the
tool-call server a request log is read for, the tool flags, the client help, and `FlagError` (flags that
do not go together: exit 2)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from exporter.engines.sglang import toolcalls as sglang_toolcalls
from exporter.engines.vllm import toolcalls, versions
from exporter.lint.requests import ToolServer

CLIENT_HELP = (
    "for a FILE that names a Python target, module:Name or path/to/file.py:Name (a Pydantic model, a "
    "TypeAdapter or a dataclass; importing it runs its module): the client whose schema to take, by the "
    "installed library's own code. pydantic (default): Model.model_json_schema(), as passed by hand; "
    "openai: what the OpenAI SDK's chat.completions.parse(response_format=Model) sends (strict: every "
    "property required, additionalProperties false); instructor: from_openai(client, "
    "mode=Mode.JSON_SCHEMA) (model_json_schema() unchanged); pydantic-ai: Agent(OpenAIChatModel(...), "
    "output_type=NativeOutput(Model)) (no titles, additionalProperties false); langchain: "
    "ChatOpenAI().with_structured_output(Model, method='json_schema') (the OpenAI SDK's strict schema). "
    "The last three are run offline: the request body is read where it would be sent, and nothing is. "
    "A target that does not import, or a client that is not installed, exits 2 with the reason"
)


def vllm_router(values: Sequence[str]) -> tuple[str, list[str]]:
    """The vLLM version whose router `--engine vllm[==VERSION]` asks for ("" for none), and the rest."""
    router, rest = "", []
    for value in values:
        name, _, version = value.partition("==")
        if name.strip().lower() != "vllm":
            rest.append(value)
            continue
        version = version.strip() or versions.NEWEST
        if version not in versions.SUPPORTED:
            raise FlagError(f"--engine {value}: the router is known for vLLM {', '.join(versions.SUPPORTED)}")
        router = version
    return router, rest


def sglang_engine(values: Sequence[str]) -> tuple[str, list[str]]:
    """The SGLang version `--engine sglang[==VERSION]` asks for ("" for none), and the rest."""
    chosen, rest = "", []
    for value in values:
        name, _, version = value.partition("==")
        if name.strip().lower() != "sglang":
            rest.append(value)
            continue
        versions = sorted(sglang_toolcalls.PARSER_TABLES)
        chosen = version.strip() or versions[-1]
        if chosen not in sglang_toolcalls.PARSER_TABLES:
            raise FlagError(f"--engine {value}: SGLang's tool calls are known for {', '.join(versions)}")
    return chosen, rest


def tool_server(parser: str | None, strict_level: str | None, router: str, sglang: str = "") -> ToolServer:
    """The server's tool-call settings, for the vLLM version `--engine vllm==VERSION` names (else the
    newest verified), or the SGLang one `--engine sglang==VERSION` names: a parser that version does
    not register is a flag error."""
    if sglang:
        if router:
            raise FlagError("--engine vllm and --engine sglang: one server's tool calls at a time")
        if parser is not None and sglang_toolcalls.parser_family(parser, sglang) is None:
            known = ", ".join(sorted(sglang_toolcalls.PARSER_TABLES[sglang]))
            raise FlagError(
                f"--tool-call-parser {parser}: SGLang {sglang} registers no such parser ({known})"
            )
        return ToolServer(parser, sglang, strict_level, "sglang")
    version = router or versions.NEWEST
    if parser is not None and toolcalls.parser_info(parser, version) is None:
        known = ", ".join(sorted(toolcalls.PARSER_TABLES[version]))
        raise FlagError(f"--tool-call-parser {parser}: vLLM {version} registers no such parser ({known})")
    return ToolServer(parser, version, strict_level)


class FlagError(ValueError):
    """Flags that do not go together; exit 2 with the message."""


def add_tool_flags(parser: argparse.ArgumentParser) -> None:
    """--tool-call-parser and --tool-strict-level, as `gdx lint` and `gdx fix` read request logs."""
    tools = parser.add_argument_group(
        "tool calls (vLLM's flags of the same names)",
        "A request with `tools` and tool_choice required or a named function compiles a grammar vLLM "
        "derives from the tools, replacing the request's own structured outputs; which one depends on the "
        "server's tool parser. Give the server's flags to lint that grammar (the vLLM version is the one "
        "--engine vllm==VERSION names, else the newest verified; --engine sglang==VERSION: an SGLang "
        "server's, which derives a JSON Schema without a parser too, its strict level being "
        "SGLANG_TOOL_STRICT_LEVEL 0, 1, 2 for auto, function, parameter). A request that gets no grammar "
        "is counted by reason in the summary; one the server answers with HTTP 400 (an unknown named tool, "
        "clashing `$defs`) is a request_rejected error.",
    )
    tools.add_argument(
        "--tool-call-parser", metavar="NAME",
        help="the server's --tool-call-parser (with --enable-auto-tool-choice). Unset: tool_choice "
        "required/named requests are skipped, the others linted by their own structured outputs",
    )  # fmt: skip
    tools.add_argument(
        "--tool-strict-level", choices=toolcalls.STRICT_LEVELS, metavar="LEVEL",
        help="the server's --tool-strict-level (auto, function, parameter; default unset): from which level "
        "a structural-tag parser constrains tool_choice auto too",
    )  # fmt: skip
