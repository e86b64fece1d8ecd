"""`make bench`: performance figures measured side by side in one run (docs/measurements/performance.md)."""
