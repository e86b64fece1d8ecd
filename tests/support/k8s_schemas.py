"""Kubernetes objects checked against Kubernetes' own schemas (`kubernetes-validate`, strict) and the
operator's and OpenShift's, as the deploy, chart, install and inject tests check thousands of them.

Same verdicts as calling the libraries directly, with what never changes read once:
`kubernetes_validate.validate` parses the version's 1.4 MB `_definitions.json` on every call (about 9
of each 10 ms), so its schema files are kept once parsed (`schema_contents`, the library's own reader,
cached); `jsonschema.validate` checks the schema against its metaschema on every call, so each schema's
validator is built and its schema checked once, and errors are raised as `jsonschema.validate` raises
them (the best match)."""

from __future__ import annotations

import functools
import json
from typing import Any

import jsonschema
import kubernetes_validate
import kubernetes_validate.utils

from tools.harness import ROOT

if not hasattr(kubernetes_validate.utils.schema_contents, "cache_info"):
    kubernetes_validate.utils.schema_contents = functools.lru_cache(maxsize=None)(
        kubernetes_validate.utils.schema_contents
    )
CRD_KINDS = ("PodMonitor", "ServiceMonitor", "PrometheusRule")
OPERATOR = json.loads((ROOT / "tests/support/data/prometheus-operator-v1.schema.json").read_text())
SCC = json.loads((ROOT / "tests/support/data/openshift-scc-v1.schema.json").read_text())


@functools.cache
def _validator(kind: str) -> Any:
    schema = SCC if kind == "SecurityContextConstraints" else {**OPERATOR, "$ref": f"#/$defs/{kind}"}
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def validate(doc: dict[str, Any], version: str) -> None:
    """`doc` strict-valid for Kubernetes `version` (the operator's kinds and the SCC against their own
    schemas); raises the libraries' ValidationError."""
    if doc["kind"] in CRD_KINDS or doc["kind"] == "SecurityContextConstraints":
        error = jsonschema.exceptions.best_match(_validator(doc["kind"]).iter_errors(doc))
        if error is not None:
            raise error
    else:
        kubernetes_validate.validate(doc, version, strict=True)
