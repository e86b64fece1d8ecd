"""A fleet's monitoring on loopback: Prometheus in agent mode scraping several node daemons (each
target's `instance` set to its node's name, as the shipped PodMonitor relabels it) and remote-writing
to a central Prometheus that receives remote writes, evaluates the rules and sends to Alertmanager.

The configs are plain functions (`agent_config`, `central_config`) so that docs/fleet.md can show the
same files the fleet test runs."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from tools.harness.processes import LoopbackServer

JOB = "guided-decoding-exporter"  # the monitors' job (alerts/generate.py Params.exporter_job)
NODE_META = "__meta_kubernetes_pod_node_name"  # what Kubernetes discovery gives; the monitors relabel it
# What a global view (Thanos, Mimir, a federating Prometheus) needs of the central one: the recording
# rules (`level:metric:operations`, every level starting with `instance`) and the GuidedDecoding alerts.
GLOBAL_KEEP = {
    "source_labels": ["__name__", "alertname"],
    "separator": ";",
    "regex": "instance[a-z_]*:guided_decoding_.+;.*|ALERTS;GuidedDecoding.+",
    "action": "keep",
}


def agent_config(
    nodes: dict[str, str], remote_write_url: str, interval: str = "15s", job: str = JOB
) -> dict[str, Any]:
    """The agent's configuration: one job over `nodes` (node name -> daemon host:port), `instance`
    relabeled from the node name as the PodMonitor does, remote-written to `remote_write_url`."""
    return {
        "global": {"scrape_interval": interval},
        "scrape_configs": [
            {
                "job_name": job,
                "honor_labels": True,  # the passed-through engine series keep their own pod label
                "static_configs": [
                    {"targets": [address], "labels": {NODE_META: node}} for node, address in nodes.items()
                ],
                "relabel_configs": [{"source_labels": [NODE_META], "target_label": "instance"}],
            }
        ],
        "remote_write": [
            {
                "url": remote_write_url,
                # seconds, not the defaults' 5 s batches: the test measures the time to the page
                "queue_config": {"batch_send_deadline": "1s", "min_backoff": "100ms", "max_backoff": "1s"},
            }
        ],
    }


def central_config(
    rule_files: list[Path], alertmanager: str, interval: str = "15s", global_write_url: str | None = None
) -> dict[str, Any]:
    """The central Prometheus: scrapes nothing, receives the agents' remote writes, evaluates the rules;
    with `global_write_url`, remote-writes only the rules and the alerts on (GLOBAL_KEEP)."""
    config: dict[str, Any] = {
        "global": {"evaluation_interval": interval},
        "rule_files": [str(f) for f in rule_files],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]},
        "scrape_configs": [],
    }
    if global_write_url:
        config["remote_write"] = [
            {
                "url": global_write_url,
                "write_relabel_configs": [GLOBAL_KEEP],
                "queue_config": {"batch_send_deadline": "1s", "min_backoff": "100ms", "max_backoff": "1s"},
            }
        ]
    return config


class PrometheusAgent(LoopbackServer):
    """Prometheus in agent mode (`--enable-feature=agent`): scrapes and remote-writes, stores nothing
    queryable, evaluates no rules."""

    def __init__(self, workdir: Path, config: dict[str, Any], port: int | None = None) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "agent.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        args = ["--enable-feature=agent", f"--config.file={workdir / 'agent.yml'}",
                f"--storage.agent.path={workdir / 'agent-data'}"]  # fmt: skip
        super().__init__("prometheus", args, workdir, "agent", port)


class CentralPrometheus(LoopbackServer):
    """A Prometheus receiving remote writes (`--web.enable-remote-write-receiver`): the central one
    (the rules, Alertmanager) or, with an empty config, a stand-in for a global store."""

    def __init__(
        self,
        workdir: Path,
        config: dict[str, Any],
        port: int | None = None,
        extra_args: list[str] | None = None,
        name: str = "central",
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / f"{name}.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        args = ["--web.enable-remote-write-receiver", f"--config.file={workdir / f'{name}.yml'}",
                f"--storage.tsdb.path={workdir / f'{name}-data'}", *(extra_args or [])]  # fmt: skip
        super().__init__("prometheus", args, workdir, name, port)

    @property
    def remote_write_url(self) -> str:
        return self.url + "/api/v1/write"

    def query(self, expr: str) -> list[dict[str, Any]]:
        url = f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
        with urllib.request.urlopen(url, timeout=10) as resp:
            doc = json.load(resp)
        assert doc["status"] == "success", doc
        return list(doc["data"]["result"])
