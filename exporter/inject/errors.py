"""What `gdx inject` refuses: a pod it cannot inject as asked (exit 1), or input that is no valid
manifest at all (exit 2)."""

from __future__ import annotations


class InjectError(ValueError):
    """A pod spec the probe cannot be added to as asked (the message says which and why)."""


class InvalidManifest(InjectError):
    """Input that is not a manifest Kubernetes would take: not YAML, aliases past the bound, a field
    of the wrong type. `path`: the field, in the object (`spec.template.spec.containers[0]`)."""

    def __init__(self, problem: str, path: str = "") -> None:
        super().__init__(f"{path}: {problem}" if path else problem)
        self.problem = problem
        self.path = path

    def under(self, prefix: str) -> InvalidManifest:
        """The same problem, its path inside `prefix` (a List's `items[3]`)."""
        return InvalidManifest(self.problem, f"{prefix}.{self.path}" if self.path else prefix)
