"""The `sitecustomize.py` of the injected probe tree (`gdx probe-files` copies this file's text).

Python runs it in every process started with the tree on PYTHONPATH (never under `-E`/`-I`). For
SGLang and TensorRT-LLM (GDX_PROBE_ENGINE_KIND) it arms the probe before the engine imports its
grammar modules; vLLM needs nothing here (it finds the plugin entry point in the tree's .dist-info).
Then it runs the image's own `sitecustomize`, the next one on sys.path, which this file shadows.
Nothing here may raise: a broken sitecustomize would only print a traceback, but the probe must
never be the reason an engine logs one.
"""

import os
import sys


def _arm() -> None:
    kind = os.environ.get("GDX_PROBE_ENGINE_KIND", "").strip().lower()
    if kind not in ("sglang", "trtllm"):
        return
    try:
        from exporter.probe import install

        install(kind)
    except Exception:  # the probe logs its own failures
        pass


def _chain() -> None:
    """Runs the next `sitecustomize` on sys.path after this one's directory, as if it were first."""
    try:
        import importlib.machinery
        import importlib.util

        here = os.path.dirname(os.path.abspath(__file__))
        rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
        if spec is None or spec.loader is None or not spec.origin:
            return
        if os.path.dirname(os.path.abspath(spec.origin)) == here:
            return
        module = importlib.util.module_from_spec(spec)
        sys.modules["sitecustomize"] = module
        spec.loader.exec_module(module)
    except Exception as err:  # as Python reports a failing sitecustomize: one line, and go on
        sys.stderr.write(
            f"Error in sitecustomize (the image's own, run by the guided-decoding probe): {err!r}\n"
        )


if __name__ == "sitecustomize":
    _arm()
    _chain()
