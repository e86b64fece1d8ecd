"""Pod discovery: the pure PodList mapping, and the list call against a loopback API endpoint.

No Kubernetes API server can run here, so the list call is exercised against a loopback HTTP server
that answers `/api/v1/pods` with a PodList; it records the query and the bearer token it was sent.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from exporter.daemon.collectors.base import CollectorError
from exporter.daemon.collectors.engines import VllmCollector, VllmSettings
from exporter.daemon.discovery import DiscoverySettings, PodDiscovery, targets_from_pod_list
from exporter.daemon.targets import Target

ANN = "guided-decoding-exporter.io/scrape"


def pod(name: str, ip: str | None = "10.1.0.5", phase: str = "Running", **annotations: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "annotations": annotations}, "status": {"phase": phase, "podIP": ip}}


def test_annotation_opt_in_port_and_path() -> None:
    doc = {
        "items": [
            pod("vllm-a", **{ANN: "true"}),
            pod(
                "vllm-b",
                ip="10.1.0.6",
                **{
                    ANN: "true",
                    "guided-decoding-exporter.io/port": "9000",
                    "guided-decoding-exporter.io/path": "/custom",
                },
            ),
            pod("other", ip="10.1.0.7"),
            pod("pending", phase="Pending", **{ANN: "true"}),
            pod("no-ip", ip=None, **{ANN: "true"}),
            pod("v6", ip="fd00::1", **{ANN: "true"}),
            "not a pod",
        ]
    }
    assert targets_from_pod_list(doc, DiscoverySettings()) == [
        Target("http://10.1.0.5:8000/metrics", "vllm-a"),
        Target("http://10.1.0.6:9000/custom", "vllm-b"),
        Target("http://[fd00::1]:8000/metrics", "v6"),
    ]


def test_port_from_the_spec_and_the_namespace_of_each_pod() -> None:
    def with_ports(name: str, namespace: str, *ports: dict[str, Any], **annotations: str) -> dict[str, Any]:
        doc = pod(name, **{ANN: "true", **annotations})
        doc["metadata"]["namespace"] = namespace
        doc["spec"] = {"containers": [{"name": "sidecar"}, {"name": "engine", "ports": list(ports)}]}
        return doc

    doc = {
        "items": [
            with_ports("named", "team-a", {"containerPort": 9090, "name": "grpc"},
                       {"containerPort": 8080, "name": "http"}),
            with_ports("first", "team-b", {"containerPort": 9090, "name": "grpc"}, {"containerPort": 7000}),
            with_ports("udp", "team-b", {"containerPort": 53, "protocol": "UDP"}),
            with_ports("annotated", "team-c", {"containerPort": 8080, "name": "http"}, **{
                "guided-decoding-exporter.io/port": "9000"}),
            with_ports("metrics", "team-c", {"containerPort": 1, "name": "x"},
                       {"containerPort": 8001, "name": "metrics"}),
        ]
    }  # fmt: skip
    assert targets_from_pod_list(doc, DiscoverySettings()) == [
        Target("http://10.1.0.5:8080/metrics", "named", namespace="team-a"),
        Target("http://10.1.0.5:9090/metrics", "first", namespace="team-b"),
        Target("http://10.1.0.5:8000/metrics", "udp", namespace="team-b"),  # no TCP port: the default
        Target("http://10.1.0.5:9000/metrics", "annotated", namespace="team-c"),  # the annotation wins
        Target("http://10.1.0.5:8001/metrics", "metrics", namespace="team-c"),
    ]


def test_selector_mode_takes_every_listed_pod() -> None:
    doc = {"items": [pod("a"), pod("b", ip="10.1.0.9")]}
    targets = targets_from_pod_list(doc, DiscoverySettings(pod_selector="app=vllm"))
    assert [t.pod for t in targets] == ["a", "b"]


def test_not_a_pod_list() -> None:
    with pytest.raises(CollectorError, match="not a PodList"):
        targets_from_pod_list({"kind": "Status"}, DiscoverySettings())


@pytest.fixture
def token(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text("secret-token\n")
    return path


async def test_lists_pods_of_this_node(
    aiohttp_server: Callable[..., Awaitable[Any]], token: Path, vllm_page: str
) -> None:
    seen: list[tuple[dict[str, str], str]] = []
    api = web.Application()
    pods_answer = {"items": []}  # filled below once the engine port is known

    async def list_pods(request: web.Request) -> web.Response:
        seen.append((dict(request.query), request.headers.get("Authorization", "")))
        return web.json_response(pods_answer)

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(text=vllm_page)

    api.router.add_get("/api/v1/pods", list_pods)
    api.router.add_get("/metrics", metrics)
    server = await aiohttp_server(api)
    pods_answer["items"] = [pod("vllm-0", ip="127.0.0.1", **{ANN: "true"})]
    discovery = DiscoverySettings(
        node_name="gpu-7",
        pod_selector="app=vllm",
        api_server=f"http://127.0.0.1:{server.port}",
        token_file=str(token),
        default_port=server.port,
    )
    source = VllmCollector(VllmSettings(timeout=1.0), PodDiscovery(discovery))
    await source.start()
    try:
        await source.timed_refresh()
        await source.timed_refresh()  # within the refresh interval: no second list
    finally:
        await source.close()
    assert source.success, source.last_error
    assert seen == [
        (
            {"fieldSelector": "spec.nodeName=gpu-7", "resourceVersion": "0", "labelSelector": "app=vllm"},
            "Bearer secret-token",
        )
    ]
    assert [(r.target.pod, r.up) for r in source.results] == [("vllm-0", True)]
    assert 'pod="vllm-0"' in source.passthrough_text(False)


async def test_failed_list_keeps_last_targets(
    aiohttp_server: Callable[..., Awaitable[Any]], token: Path
) -> None:
    status = [200]
    seen: list[int] = []
    api = web.Application()

    async def list_pods(_: web.Request) -> web.Response:
        seen.append(status[0])
        if status[0] != 200:
            return web.json_response({"kind": "Status"}, status=status[0])
        return web.json_response({"items": [pod("vllm-0", **{ANN: "true"})]})

    api.router.add_get("/api/v1/pods", list_pods)
    server = await aiohttp_server(api)
    settings = DiscoverySettings(
        node_name="n",
        refresh_interval=0.001,
        api_server=f"http://127.0.0.1:{server.port}",
        token_file=str(token),
    )
    discovery = PodDiscovery(settings)
    source = VllmCollector(VllmSettings(), discovery)
    await source.start()
    try:
        assert [t.pod for t in await discovery.refresh(source._session, 1.0)] == ["vllm-0"]  # type: ignore[arg-type]
        status[0] = 403
        await asyncio.sleep(0.01)  # past the 1 ms refresh interval
        with pytest.raises(CollectorError, match="HTTP 403"):
            await discovery.refresh(source._session, 1.0)  # type: ignore[arg-type]
        assert [t.pod for t in discovery.targets] == ["vllm-0"]
        calls = len(seen)
        discovery.settings = dataclasses.replace(discovery.settings, refresh_interval=3600.0)
        for _ in range(3):  # within the interval: the failure is reported, the API is not asked again
            with pytest.raises(CollectorError, match="HTTP 403"):
                await discovery.refresh(source._session, 1.0)  # type: ignore[arg-type]
        assert len(seen) == calls
    finally:
        await source.close()


async def test_missing_token_is_a_clear_error(tmp_path: Path) -> None:
    settings = DiscoverySettings(
        node_name="n", token_file=str(tmp_path / "none"), api_server="http://127.0.0.1:1"
    )
    source = VllmCollector(VllmSettings(), PodDiscovery(settings))
    await source.start()
    try:
        await source.timed_refresh()
    finally:
        await source.close()
    assert not source.success
    assert "kubernetes discovery: cannot read the service-account token" in (source.last_error or "")


def test_settings_from_the_configuration() -> None:
    from exporter.daemon.config import Config
    from exporter.daemon.server import discovery_settings

    assert discovery_settings(Config()) == DiscoverySettings()
    assert discovery_settings(Config(kubernetes_node_name="gpu-7")) == DiscoverySettings(node_name="gpu-7")


async def test_namespaces_are_listed_each_on_its_own(
    aiohttp_server: Callable[..., Awaitable[Any]], token: Path
) -> None:
    """With namespaces set (a Role in each, no ClusterRole), each is listed at its own path and the
    targets of all are merged; one namespace refused (its Role missing) fails the list and says which."""
    seen: list[str] = []
    refused = {"team-c"}
    api = web.Application()

    async def list_pods(request: web.Request) -> web.Response:
        namespace = request.match_info["namespace"]
        seen.append(namespace)
        if namespace in refused:
            return web.json_response({"kind": "Status"}, status=403)
        found = pod(f"vllm-{namespace}", ip="127.0.0.1", **{ANN: "true"})
        found["metadata"]["namespace"] = namespace
        return web.json_response({"items": [found]})

    api.router.add_get("/api/v1/namespaces/{namespace}/pods", list_pods)
    server = await aiohttp_server(api)
    settings = DiscoverySettings(
        node_name="gpu-7",
        namespaces=("team-a", "team-b"),
        api_server=f"http://127.0.0.1:{server.port}",
        token_file=str(token),
        refresh_interval=0.0,
    )
    async with aiohttp.ClientSession() as session:
        discovery = PodDiscovery(settings)
        targets = await discovery.refresh(session, 1.0)
        assert sorted((t.namespace, t.pod) for t in targets) == [
            ("team-a", "vllm-team-a"),
            ("team-b", "vllm-team-b"),
        ]
        assert sorted(seen) == ["team-a", "team-b"]
        discovery.settings = dataclasses.replace(settings, namespaces=("team-a", "team-c"))
        with pytest.raises(CollectorError, match="listing pods on gpu-7 in namespace team-c: HTTP 403"):
            await discovery.refresh(session, 1.0)
        assert len(discovery.targets) == 2  # the last good list is kept


def test_namespaces_option_checks_names() -> None:
    from exporter.daemon import config as cfg

    loaded = cfg.load({"kubernetes_namespaces": "team-a, team-b,team-a"}, {"NODE_NAME": "n"})
    assert loaded.kubernetes_namespaces == ("team-a", "team-b")
    with pytest.raises((ValueError, SystemExit), match="not a namespace name"):
        cfg.load({"kubernetes_namespaces": "Team_A"}, {"NODE_NAME": "n"})


def test_pod_namespaces_for_names_unique_on_the_node() -> None:
    discovery = PodDiscovery(DiscoverySettings())
    discovery.targets = [
        Target("http://10.0.0.1:8000/metrics", "vllm-0", namespace="team-a"),
        Target("http://10.0.0.2:8000/metrics", "vllm-0", namespace="team-b"),  # ambiguous: left out
        Target("http://10.0.0.3:8000/metrics", "sglang-0", "sglang", namespace="team-c"),
    ]
    assert discovery.pod_namespaces() == {"sglang-0": "team-c"}


def test_node_pods_say_which_are_injected_and_what_keeps_their_probe_from_arming() -> None:
    from exporter.daemon.discovery import DiscoverySettings, NodePod, node_pods_from_list
    from exporter.inject.podspec import InjectOptions, inject

    def pod(
        name: str, env: list[dict[str, str]], phase: str = "Running", injected: bool = True
    ) -> dict[str, object]:
        spec = {"containers": [{"name": "e", "command": ["vllm", "serve", "m"], "env": env}]}
        meta: dict[str, object] = {"name": name, "namespace": "llm"}
        if injected:
            done = inject(spec, meta, InjectOptions(image="x"))
            spec, meta = done.spec, {**meta, **done.metadata}
        return {"metadata": meta, "spec": spec, "status": {"phase": phase}}

    doc = {"items": [
        pod("ok", []), pod("allowlist", [{"name": "VLLM_PLUGINS", "value": "other"}]),
        pod("off", [{"name": "GDX_PROBE", "value": "0"}]), pod("plain", [], injected=False),
        pod("done", [], phase="Succeeded"), "not a pod",
    ]}  # fmt: skip
    assert node_pods_from_list(doc, DiscoverySettings()) == [
        NodePod("llm", "ok", True),
        NodePod("llm", "allowlist", True, ("vllm_plugins",)),
        NodePod("llm", "off", True, ("probe_disabled",)),
        NodePod("llm", "plain", False),
    ]
