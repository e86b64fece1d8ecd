"""TensorRT-LLM: its metric page (the probe times its xgrammar and llguidance matcher factories; no
release-specific table yet). It serves Prometheus text at /prometheus/metrics; its /metrics is JSON
iteration stats."""

from exporter.engines.page import Page

PAGE = Page("trtllm_", "/prometheus/metrics")
