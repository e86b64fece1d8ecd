"""One analysis of one spec, the same for every program: JSON Schema's own rules (exporter/schema/)
joined with what the engines do with it (exporter/engines/). The daemon and `gdx lint` both call
`spec_report.report`, so CI and the dashboard give one verdict."""
