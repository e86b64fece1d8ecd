"""One collector per data source (node_exporter's layout): cpu, nvml, vllm, probe."""
