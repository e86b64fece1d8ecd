"""vLLM, per release (`versions.py`): the `auto` router (`routing`), the tool-call grammar its parsers
derive (`parsers`, `toolrequest`, `toolcalls`) and the structural tags its builders make (`tooltags`),
each checked against that release's own code by the agreement tests."""

from exporter.engines.page import Page

PAGE = Page("vllm:", "/metrics")
