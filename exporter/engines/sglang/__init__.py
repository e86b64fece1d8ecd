"""SGLang, per version: the tool-call grammar its `--tool-call-parser` derives from a request's tools."""
