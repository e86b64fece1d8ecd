"""Repository tooling beside the product: the shared test/demo/benchmark harness, benchmarks, the demo."""
