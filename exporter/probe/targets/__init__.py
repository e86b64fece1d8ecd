"""The wrapped call sites, one module per engine or library. Every wrapper calls the original with
`*args, **kwargs`, re-raises its exceptions untouched and records through the armed Recorder, which
never raises.

Where the probe counts a compile:
- vLLM (`vllm`): its StructuredOutputManager's grammar creation, which covers every backend; the
  library calls under it are not wrapped.
- SGLang, TensorRT-LLM, direct use: xgrammar `GrammarCompiler.compile_*` (`xgrammar`) and
  llguidance `LLMatcher` construction (`llguidance`). SGLang's own cache answers before xgrammar is
  asked, so its hits are counted at its cache lookup (`sglang`); TensorRT-LLM's matcher factories
  block the executor loop and are timed as grammar wait (`trtllm`).
"""

from __future__ import annotations

from exporter.kernel import names
from exporter.probe import patching
from exporter.probe.recorder import Recorder
from exporter.probe.targets.common import ARMED, ArmedRecorder, error_reason, spec_text
from exporter.probe.targets.llguidance import patch_llguidance
from exporter.probe.targets.sglang import patch_sglang
from exporter.probe.targets.trtllm import patch_trtllm
from exporter.probe.targets.vllm import patch_vllm, vllm_backend_name
from exporter.probe.targets.vllm_api import patch_vllm_outlines_validation, patch_vllm_sampling
from exporter.probe.targets.xgrammar import patch_xgrammar

ENGINE_KINDS = (*names.ENGINE_KINDS, "generic")

__all__ = [
    "ARMED",
    "ENGINE_KINDS",
    "ArmedRecorder",
    "error_reason",
    "hook_engine",
    "patch_llguidance",
    "patch_sglang",
    "patch_trtllm",
    "patch_vllm",
    "patch_xgrammar",
    "spec_text",
    "vllm_backend_name",
]


def hook_engine(engine_kind: str, recorder: Recorder) -> None:
    """Patches what this kind of engine calls: now where the module is loaded, else on its import.
    "vllm": its StructuredOutputManager; any other kind: xgrammar and llguidance, plus SGLang's cache
    lookup for "sglang" and TensorRT-LLM's matcher factories for "trtllm"."""
    if engine_kind not in ENGINE_KINDS:
        raise ValueError(f"engine_kind must be one of {ENGINE_KINDS}")
    if engine_kind == "vllm":
        recorder.backend_name = vllm_backend_name
        patching.when_imported("vllm.v1.structured_output", patch_vllm)
        # the API server's side (a no-op where nothing validates: EngineCore never calls them)
        patching.when_imported("vllm.sampling_params", patch_vllm_sampling)
        patching.when_imported("vllm.v1.structured_output.backend_outlines", patch_vllm_outlines_validation)
    else:
        patching.when_imported("xgrammar", lambda module: patch_xgrammar(module, with_mask=True))
        patching.when_imported("llguidance", patch_llguidance)
    if engine_kind == "sglang":
        patching.when_imported("sglang.srt.constrained.base_grammar_backend", patch_sglang)
    if engine_kind == "trtllm":
        patching.when_imported("tensorrt_llm._torch.pyexecutor.grammar_matcher", patch_trtllm)
