"""What is true of JSON Schema itself, whatever engine compiles it: identity, traversal, patterns as
ECMA-262 reads them, families and what varies, structural rules, static schemas and rewrites. Pure
functions, standard library only (the probe imports identity inside engines). No engine behaviour:
that lives in exporter/engines/, and what combines both in exporter/analysis/."""
