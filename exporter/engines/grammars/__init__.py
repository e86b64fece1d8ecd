"""The grammar libraries the serving engines compile with, xgrammar and llguidance, as measured per
version: which keywords each enforces, drops or refuses (`backends`, measured side by side, so one
table), how xgrammar reads a schema (`compiled`), what each logs or refuses with (`enginelogs`), and
xgrammar's structural-tag formats and builtin models (`tag_formats`, `tag_tools`,
`xgrammar_tag_models`), which vLLM and SGLang build their tool-call tags from."""
