"""Loading the probe: the vLLM entry point, arming where grammars compile or are validated, stdlib only,
version tolerance, and never an exception into the engine."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import types
from importlib.metadata import entry_points
from typing import Any

import pytest

import exporter.probe as probe
from exporter.probe import patching, targets

CHILD = """
import json, multiprocessing, os, sys
multiprocessing.current_process().name = sys.argv[1]
argv = sys.argv[2:] or sys.argv  # the command line the process would have had: -m MODULE ARGS or ARGS
if argv[0] == "-m":
    import types
    sys.modules["__main__"].__spec__ = types.SimpleNamespace(name=argv[1])
    argv = argv[1:]
sys.argv = argv
import exporter.probe as probe
probe.register()
rec = probe.get_recorder()
shipper = probe.get_shipper()
print(json.dumps({"armed": rec is not None, "engine": shipper.hello["engine"] if shipper else None,
                  "kind": shipper.hello["engine_kind"] if shipper else None}))
"""


def _register_in(process_name: str, argv: tuple[str, ...] = (), **env: str) -> dict[str, Any]:
    base = {"PATH": "/usr/bin:/bin", "GDX_PROBE_SOCKET": "/nonexistent/probe.sock"}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, process_name, *argv],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_entry_point_is_declared() -> None:
    found = [ep for ep in entry_points(group="vllm.general_plugins") if ep.value == "exporter.probe:register"]
    assert len(found) == 1 and found[0].load() is probe.register


@pytest.mark.parametrize(
    ("name", "env", "armed", "engine"),
    [
        ("EngineCore", {}, True, "0"),
        ("EngineCore_DP3", {}, True, "3"),
        ("MainProcess", {}, True, "api-server"),  # the API server: it validates each request
        ("ApiServer_1", {}, True, "api-server-1"),  # --api-server-count 2
        ("VllmWorker-0", {}, False, None),
        ("MainProcess", {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}, True, "0"),  # an offline LLM's engine
        ("EngineCore", {"GDX_PROBE": "0"}, False, None),
    ],
)
def test_arms_where_grammars_compile_or_requests_are_validated(
    name: str, env: dict[str, str], armed: bool, engine: str | None
) -> None:
    got = _register_in(name, **env)
    assert got["armed"] is armed and got["engine"] == engine
    if armed:
        assert got["kind"] == "vllm"


@pytest.mark.parametrize(
    ("argv", "engine"),
    [
        (("-m", "vllm.entrypoints.openai.api_server", "--model", "m"), "api-server"),
        (("/venv/bin/vllm", "serve", "m"), "api-server"),
        (("offline.py",), "0"),  # a script with vLLM's offline LLM: its engine runs in this process
        (("/venv/bin/vllm", "bench", "m"), "0"),
    ],
)
def test_an_api_server_is_the_api_server_whatever_v1_multiprocessing_says(
    argv: tuple[str, ...], engine: str
) -> None:
    """VLLM_ENABLE_V1_MULTIPROCESSING=0 runs only an offline LLM's engine in-process: vLLM's OpenAI
    server still starts an EngineCore, whose probe is engine 0 (the suite's real servers run so:
    tools/harness/vllm.py). Armed as engine 0, the API server took the EngineCore's identity."""
    got = _register_in("MainProcess", argv, VLLM_ENABLE_V1_MULTIPROCESSING="0")
    assert got["armed"] and got["engine"] == engine


def test_importing_the_probe_loads_only_the_standard_library() -> None:
    code = (
        "import sys; before = set(sys.modules); import exporter.probe; "
        "new = {m.split('.')[0] for m in set(sys.modules) - before}; "
        "ours = ('exporter', '__mp_main__'); "
        "print(sorted(m for m in new if m not in sys.stdlib_module_names and m not in ours))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("env", "tracked", "warning"),
    [
        ({}, 500, None),
        ({"GDX_PROBE_TRACKED_SPECS": "40"}, 40, None),
        (
            {"GDX_PROBE_MAX_SCHEMAS": "30"},
            30,
            "GDX_PROBE_MAX_SCHEMAS is deprecated, use GDX_PROBE_TRACKED_SPECS",
        ),
        (
            {"GDX_PROBE_TRACKED_SPECS": "40", "GDX_PROBE_MAX_SCHEMAS": "30"},
            40,
            "GDX_PROBE_MAX_SCHEMAS is deprecated and ignored: GDX_PROBE_TRACKED_SPECS is set",
        ),
    ],
)
def test_tracked_specs_and_its_old_name(
    env: dict[str, str],
    tracked: int,
    warning: str | None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """GDX_PROBE_TRACKED_SPECS caps the specs tracked; GDX_PROBE_MAX_SCHEMAS, its old name, is read
    for one release when the new one is unset, and either way one warning names the name to use."""
    for name in ("GDX_PROBE_TRACKED_SPECS", "GDX_PROBE_MAX_SCHEMAS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with caplog.at_level(logging.WARNING, "gdx.probe"):
        assert probe.install("generic", socket_path="/nonexistent/probe.sock")
    try:
        rec = probe.get_recorder()
        assert rec is not None and rec.max_schemas == tracked
    finally:
        probe.uninstall()
    lines = [r for r in caplog.records if "deprecated" in r.getMessage()]
    if warning is None:
        assert lines == []
    else:
        assert [(r.levelno, r.getMessage()) for r in lines] == [
            (logging.WARNING, f"guided-decoding probe: {warning}")
        ]


def test_register_never_raises(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    import multiprocessing

    def broken(*_: Any, **__: Any) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(multiprocessing.current_process(), "name", "EngineCore")
    monkeypatch.setattr(probe, "Recorder", broken)
    with caplog.at_level(logging.WARNING, "gdx.probe"):
        probe.register()
    assert probe.get_recorder() is None
    assert "install failed" in caplog.text


def test_patches_apply_on_later_import_and_come_off() -> None:
    code = (
        "import exporter.probe as p; p.install('generic', socket_path='/nonexistent'); "
        "import sys; assert 'xgrammar' not in sys.modules; import xgrammar, llguidance; "
        "w = [getattr(xgrammar.GrammarCompiler.compile_json_schema, '__gdx_wrapped__', False), "
        "getattr(llguidance.LLMatcher, '__gdx_wrapped__', False)]; p.uninstall(); "
        "w += [getattr(xgrammar.GrammarCompiler.compile_json_schema, '__gdx_wrapped__', False), "
        "getattr(llguidance.LLMatcher, '__gdx_wrapped__', False)]; print(w)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip().splitlines()[-1] == "[True, True, False, False]"


def test_missing_attributes_are_skipped_with_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    class StructuredOutputManager:  # an imagined future release without grammar_bitmask
        def _create_grammar(self, request: Any) -> str:
            return "grammar"

        def grammar_init(self, request: Any) -> None:
            pass

    module = types.SimpleNamespace(StructuredOutputManager=StructuredOutputManager)
    try:
        with caplog.at_level(logging.INFO, "gdx.probe"):
            targets.patch_vllm(module)
            targets.patch_xgrammar(types.SimpleNamespace(), with_mask=True)
        assert getattr(StructuredOutputManager._create_grammar, "__gdx_wrapped__", False)
        assert "StructuredOutputManager.grammar_bitmask not found" in caplog.text
        assert "xgrammar.GrammarCompiler not found" in caplog.text
    finally:
        patching.unwrap_all()
    assert not hasattr(StructuredOutputManager._create_grammar, "__gdx_wrapped__")


def test_wrappers_pass_everything_through() -> None:
    """Arguments, return values and exceptions cross the wrapper unchanged; nothing is recorded twice."""

    class Compiler:
        def __init__(self) -> None:
            self.size = 0

        def get_cache_size_bytes(self) -> int:
            return self.size

        def compile_json_schema(self, schema: str, *, any_whitespace: bool = True) -> tuple[str, bool]:
            if schema == "bad":
                raise ValueError("Invalid schema: nope")
            return schema, any_whitespace

    module = types.SimpleNamespace(GrammarCompiler=Compiler)
    rec = probe.Recorder()
    targets.ARMED.recorder = rec
    try:
        targets.patch_xgrammar(module, with_mask=False)
        c = Compiler()
        assert c.compile_json_schema('{"a":1}', any_whitespace=False) == ('{"a":1}', False)
        with pytest.raises(ValueError, match="nope"):
            c.compile_json_schema("bad")
        b = rec.snapshot(full=True)["backends"]["xgrammar"]
        assert (b["requests"], b["errors"]) == (2, {"invalid_schema": 1})
    finally:
        targets.ARMED.recorder = None
        patching.unwrap_all()


def test_grammar_rejections_are_counted_and_everything_passes_through() -> None:
    """vLLM's `StructuredOutputManager.accept_tokens(request, new_token_ids) -> bool` (0.32 and 0.33):
    False (the grammar refused a token its mask allowed: the scheduler ends the request) and a raise
    are counted by backend and reason; the result and the exception cross unchanged."""

    class XgrammarBackend:
        pass

    class StructuredOutputManager:
        backend = XgrammarBackend()

        def _create_grammar(self, request: Any) -> str:
            return "grammar"

        def accept_tokens(self, request: Any, new_token_ids: list[int]) -> bool:
            if request == "boom":
                raise RuntimeError("matcher state lost")
            return all(t < 100 for t in new_token_ids)

    module = types.SimpleNamespace(StructuredOutputManager=StructuredOutputManager)
    rec = probe.Recorder()
    targets.ARMED.recorder = rec
    try:
        targets.patch_vllm(module)
        m = StructuredOutputManager()
        assert m.accept_tokens("r1", [1, 2]) is True
        assert m.accept_tokens("r2", new_token_ids=[1, 200]) is False
        assert m.accept_tokens("r3", [300]) is False
        with pytest.raises(RuntimeError, match="state lost"):
            m.accept_tokens("boom", [1])
        b = rec.snapshot(full=True)["backends"]["xgrammar"]
        assert b["rejections"] == {"rejected": 2, "error": 1} and b["requests"] == 0
        # a request whose spec was compiled: the rejection is also that spec's
        key = types.SimpleNamespace(name="JSON")
        request = types.SimpleNamespace(
            structured_output_request=types.SimpleNamespace(structured_output_key=(key, '{"type": "object"}'))
        )
        m._create_grammar(request)
        assert m.accept_tokens(request, [500]) is False
        snap = rec.snapshot(full=True)
        (row,) = snap["schemas"]
        assert row["rejected"] == 1 and row["requests"] == 1
        assert "rejected" not in snap["other"].get("xgrammar", {})
    finally:
        targets.ARMED.recorder = None
        patching.unwrap_all()
    assert not hasattr(StructuredOutputManager.accept_tokens, "__gdx_wrapped__")


def test_trtllm_factory_create_times_the_blocking_build() -> None:
    """TensorRT-LLM needs CUDA, so this runs on a class with the signature read from its source
    (`XGrammarMatcherFactory.create(self, guided_decoding_params)`): the wait is recorded, the
    matcher and any exception pass through unchanged."""
    import time

    class XGrammarMatcherFactory:
        def create(self, guided_decoding_params: Any) -> str:
            if guided_decoding_params is None:
                raise ValueError("no guide")
            time.sleep(0.01)
            return "matcher"

    module = types.SimpleNamespace(XGrammarMatcherFactory=XGrammarMatcherFactory)
    rec = probe.Recorder()
    targets.ARMED.recorder = rec
    try:
        targets.patch_trtllm(module)
        factory = XGrammarMatcherFactory()
        assert factory.create({"guide": "{}"}) == "matcher"
        with pytest.raises(ValueError, match="no guide"):
            factory.create(None)
        wait = rec.snapshot(full=True)["backends"]["xgrammar"]["wait"]
        assert sum(wait["buckets"]) == 2 and wait["sum"] >= 0.01
    finally:
        targets.ARMED.recorder = None
        patching.unwrap_all()
