"""Reading a daemon's /metrics in tests: every sample by name and labels, and polling for a condition."""

from __future__ import annotations

import time


def scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of a daemon's /metrics, keyed by name and label set."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def sample(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, /, **labels: str
) -> float:
    """The sum of the samples of `name` whose labels include `labels` (0 when there is none)."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def wait_for(condition: object, timeout: float = 20.0, interval: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if condition():  # type: ignore[operator]
                return
        except Exception as err:
            last = err
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s (last error: {last!r})")
