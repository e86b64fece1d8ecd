"""guided-decoding-exporter: grammar-compile observability for structured-output LLM serving."""

__version__ = "0.1.0"
