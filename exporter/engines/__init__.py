"""Each serving engine's and grammar library's behaviour, copied per release: one package per engine
(`vllm/`, `sglang/`, `grammars/` for xgrammar and llguidance), each with its release table as data
(`versions.py`), so that adding a release is a row and its agreement tests. Pure and standard library
only; a package imports JSON Schema's own (exporter/schema/) and never another engine's (the import
contracts in pyproject.toml). docs/compatibility.md is generated from the release tables."""
