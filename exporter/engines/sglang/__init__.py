"""SGLang, per version: the tool-call grammar its `--tool-call-parser` derives from a request's tools."""

from exporter.engines.page import Page

PAGE = Page("sglang:", "/metrics")
