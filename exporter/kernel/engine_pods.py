"""Which container of a pod spec runs a serving engine, and what in its spec would keep an injected
probe from arming. `gdx inject` uses it to inject; the daemon, to say why an injected pod's probe is
absent (`guided_decoding_probe_absent`). Pure functions over the pod spec's dicts."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

from exporter.kernel.names import CONTAINER_ANNOTATION, PLUGIN


class NoSuchContainer(ValueError):
    """The container named by `--container` or the pod's container annotation is not in the pod."""


# How an engine's command line or image gives it away (checked in this order).
_COMMANDS = (
    ("vllm", re.compile(r"\bvllm(?:\s+serve\b|\.entrypoints\.)|\bhuggingfaceserver\b")),
    ("sglang", re.compile(r"\bsglang(?:\.launch_server\b|\s+serve\b)")),
    ("trtllm", re.compile(r"\btrtllm-serve\b|\btensorrt_llm\.")),
)
_IMAGES = (
    ("vllm", re.compile(r"vllm|huggingfaceserver")),
    ("sglang", re.compile(r"sglang")),
    ("trtllm", re.compile(r"tensorrt[-_]llm|trtllm")),
)
_PYTHON = re.compile(r"(?:^|/)python(?:\d+(?:\.\d+)?)?$")


@dataclass(frozen=True)
class EngineContainer:
    """The container that runs the engine and the kind of engine it is."""

    index: int
    name: str
    kind: str


def command_line(container: dict[str, Any]) -> list[str]:
    """The container's command and args as words (a `sh -c "..."` script split too)."""
    words: list[str] = []
    for part in list(container.get("command") or []) + list(container.get("args") or []):
        text = str(part)
        try:
            words.extend(shlex.split(text) if any(c.isspace() for c in text) else [text])
        except ValueError:
            words.extend(text.split())
    return words


def engine_kind_of(container: dict[str, Any]) -> str:
    """ "vllm", "sglang", "trtllm" by the container's command line, else its image; "" if neither."""
    line = " ".join(command_line(container))
    for kind, pattern in _COMMANDS:
        if pattern.search(line):
            return kind
    image = str(container.get("image") or "").lower()
    for kind, pattern in _IMAGES:
        if pattern.search(image.rsplit("/", 1)[-1].split(":")[0]) or pattern.search(image.split(":")[0]):
            return kind
    return ""


def find_engine(
    spec: dict[str, Any], metadata: dict[str, Any], container: str = "", engine_kind: str = ""
) -> EngineContainer | None:
    """The engine container: the one named `container`, else by the pod's container annotation, else
    the first container whose command line or image is an engine's (`engine_kind`: taken as that
    engine). Raises NoSuchContainer for a named container the pod does not have."""
    containers = spec.get("containers") or []  # objects, every one (shapes.pod_template): indexes hold
    wanted = container or str((metadata.get("annotations") or {}).get(CONTAINER_ANNOTATION) or "")
    for index, each in enumerate(containers):
        name = str(each.get("name") or "")
        if wanted and name != wanted:
            continue
        kind = engine_kind or engine_kind_of(each) or ("vllm" if wanted else "")
        if kind:
            return EngineContainer(index, name, kind)
    if wanted:
        raise NoSuchContainer(f"no container named {wanted!r}")
    return None


def env_value(container: dict[str, Any], name: str) -> dict[str, Any] | None:
    for item in container.get("env") or []:
        if isinstance(item, dict) and item.get("name") == name:
            return item
    return None


def _ignores_environment(words: list[str]) -> bool:
    """Whether a Python in the command line runs with -E or -I (alone or among other letters). One pass:
    any pod's spec reaches this, and a regex over each option, or a scan of the options from each word
    naming a Python, was quadratic in a long option or in many of them (20,000 letters: 1.7 s)."""
    options = False  # in the options after a word naming a Python
    for word in words:
        if options:
            if not word.startswith("-") or word in ("-m", "-c"):
                options = False
            elif _sets_e_or_i(word):
                return True
        if _PYTHON.search(word):
            options = True
    return False


def _sets_e_or_i(option: str) -> bool:
    """`-E`, `-I` or a cluster of letters holding one (`-sE`)."""
    letters = option[1:]
    return letters.isascii() and letters.isalpha() and ("E" in letters or "I" in letters)


def blockers(container: dict[str, Any], kind: str) -> list[str]:
    """Pure: what in the container's spec keeps an injected probe from arming, as reasons:
    vllm_plugins (VLLM_PLUGINS is an allowlist without the probe), python_ignores_environment
    (`python -E` or `-I`: PYTHONPATH is not read), probe_disabled (GDX_PROBE=0),
    pythonpath_from_valuefrom (a PYTHONPATH that cannot be extended)."""
    found = []
    plugins = env_value(container, "VLLM_PLUGINS")
    allowed = [p.strip() for p in str((plugins or {}).get("value") or "").split(",")]
    if kind == "vllm" and plugins is not None and "value" in plugins and PLUGIN not in allowed:
        found.append("vllm_plugins")
    if _ignores_environment(command_line(container)):
        found.append("python_ignores_environment")
    disabled = env_value(container, "GDX_PROBE")
    if disabled is not None and str(disabled.get("value", "1")).strip().lower() in (
        "0",
        "false",
        "no",
        "off",
    ):
        found.append("probe_disabled")
    pythonpath = env_value(container, "PYTHONPATH")
    if pythonpath is not None and "valueFrom" in pythonpath:
        found.append("pythonpath_from_valuefrom")
    return found


BLOCKER_TEXT = {
    "vllm_plugins": f"VLLM_PLUGINS is set and does not list {PLUGIN}: vLLM will not load the probe",
    "python_ignores_environment": "the engine starts Python with -E or -I, which ignore PYTHONPATH",
    "probe_disabled": "GDX_PROBE turns the probe off",
    "pythonpath_from_valuefrom": "PYTHONPATH comes from valueFrom and cannot be extended",
}
