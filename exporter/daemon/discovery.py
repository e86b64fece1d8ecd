"""Engine pods on this node, from the Kubernetes API with the in-cluster service account.

Lists pods with `fieldSelector=spec.nodeName=<node>` (and the label selector when one is set), so the
daemon only ever sees its own node. The list is refreshed at most every `refresh_interval`; when a
refresh fails the last good list is kept (and the failure reported), so an API-server blip does not
drop every target.

Only `list` is called: RBAC grants exactly that (deploy/). With `namespaces` set, each is listed on
its own (`/api/v1/namespaces/NS/pods`), which a Role in each namespace allows: no cluster-wide read of
pods. Empty: one list over every namespace (a ClusterRole). Lists ask for `resourceVersion=0`: the
API server answers from its watch cache instead of a quorum read from etcd, which matters with a
daemon on every GPU node listing every 30 s (the cache serves consistent reads by default only from
Kubernetes 1.31). A list at most `refresh_interval` old is fine for scrape targets.

A pod's `<prefix>/engine` annotation names its engine (`vllm`, the default; `sglang`; `trtllm`),
which decides the families passed through and the default path (`/metrics`; TensorRT-LLM's
`/prometheus/metrics`); `<prefix>/path` overrides the path. The port is the `<prefix>/port`
annotation, else the pod's container port named `http` (then `metrics`), else the first declared
container port, else `default_port`. A pod naming an engine the daemon does not know is skipped,
with one log line. Each target carries the pod's namespace (a label of its series).
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import aiohttp

from exporter.daemon.collectors.base import CollectorError
from exporter.daemon.httpbody import BodyTooLarge, read_capped
from exporter.daemon.targets import ENGINES, Target
from exporter.kernel.engine_pods import NoSuchContainer, blockers, find_engine
from exporter.kernel.names import SCRAPE_ANNOTATION

MAX_POD_LIST_BYTES = 32 * 2**20
SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
log = logging.getLogger("gdx.collector.vllm")


@dataclass(frozen=True)
class DiscoverySettings:
    """What discovery uses of the configuration (`Config.settings` fills it from `kubernetes.*`)."""

    node_name: str = ""
    namespaces: tuple[str, ...] = ()  # empty: every namespace in one list
    pod_selector: str = ""  # label selector; empty: every pod on the node with the annotation
    pod_annotation: str = SCRAPE_ANNOTATION
    default_port: int = 8000
    refresh_interval: float = 30.0
    api_server: str = "https://kubernetes.default.svc"
    token_file: str = f"{SERVICE_ACCOUNT}/token"
    ca_file: str = f"{SERVICE_ACCOUNT}/ca.crt"


PORT_NAMES = ("http", "metrics")


@dataclass(frozen=True, slots=True)
class NodePod:
    """A pod on this node as the probe collector needs it: whether `gdx inject` gave it the probe,
    and what in its engine container's spec keeps the probe from arming (exporter.inject.podspec)."""

    namespace: str
    name: str
    injected: bool
    blockers: tuple[str, ...] = ()


def node_pods_from_list(doc: dict[str, Any], settings: DiscoverySettings) -> list[NodePod]:
    """Pure: every pod of a PodList that is not finished, with its probe facts."""
    prefix = settings.pod_annotation.rsplit("/", 1)[0]
    found = []
    for pod in doc.get("items") or []:
        if not isinstance(pod, dict):
            continue
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        if not meta.get("name") or status.get("phase") in ("Succeeded", "Failed"):
            continue
        annotations = meta.get("annotations") or {}
        injected = annotations.get(f"{prefix}/probe") == "injected"
        why: tuple[str, ...] = ()
        spec = pod.get("spec")
        spec = spec if isinstance(spec, dict) else {}
        if injected:
            try:
                engine = find_engine(spec, meta)
            except NoSuchContainer:
                engine = None
            if engine is not None:
                why = tuple(blockers(spec["containers"][engine.index], engine.kind))
        found.append(NodePod(str(meta.get("namespace") or ""), str(meta["name"]), injected, why))
    return found


def spec_port(pod: dict[str, Any]) -> int | None:
    """Pure: the port a pod's spec declares for its engine's HTTP server (named http, then metrics,
    then the first declared), or None when it declares none."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return None
    declared: list[tuple[str, int]] = []
    for container in spec.get("containers") or []:
        if not isinstance(container, dict):
            continue
        for port in container.get("ports") or []:
            number = port.get("containerPort") if isinstance(port, dict) else None
            if isinstance(number, int) and 0 < number < 65536 and port.get("protocol", "TCP") == "TCP":
                declared.append((str(port.get("name", "")), number))
    for wanted in PORT_NAMES:
        for name, number in declared:
            if name == wanted:
                return number
    return declared[0][1] if declared else None


def targets_from_pod_list(
    doc: Any, settings: DiscoverySettings, skipped: list[str] | None = None
) -> list[Target]:
    """Pure: the scrape targets in a PodList. Running pods with an IP, opted in by selector or annotation.

    A pod opted in but unusable (an unknown engine, a port that is not a number) is left out, and why is
    appended to `skipped` when given."""
    if not isinstance(doc, dict) or not isinstance(doc.get("items"), list):
        raise CollectorError("the API server's answer is not a PodList")
    prefix = settings.pod_annotation.rsplit("/", 1)[0]
    targets: list[Target] = []
    for pod in doc["items"]:
        if not isinstance(pod, dict):
            continue
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        annotations = meta.get("annotations") or {}
        name, ip = meta.get("name"), status.get("podIP")
        if not name or not ip or status.get("phase") != "Running":
            continue
        if not settings.pod_selector and annotations.get(settings.pod_annotation) != "true":
            continue
        named = str(annotations.get(f"{prefix}/engine", "vllm"))
        engine = ENGINES.get(named.strip().lower())
        port = str(annotations.get(f"{prefix}/port") or spec_port(pod) or settings.default_port)
        if engine is None or not port.isdigit():
            if skipped is not None:
                skipped.append(
                    f"pod {name}: {prefix}/engine {named[:40]!r} is not one of {', '.join(ENGINES)}"
                    if engine is None
                    else f"pod {name}: {prefix}/port {port[:40]!r} is not a port number"
                )
            continue
        path = str(annotations.get(f"{prefix}/path", engine.default_path))
        host = f"[{ip}]" if ":" in ip else ip
        url = f"http://{host}:{port}/{path.lstrip('/')}"
        namespace = str(meta.get("namespace") or "")
        targets.append(Target(url=url, pod=str(name), engine=engine.name, namespace=namespace))
    return targets


class PodDiscovery:
    def __init__(self, settings: DiscoverySettings) -> None:
        self.settings = settings
        self.targets: list[Target] = []
        self.pods: list[NodePod] = []
        self.last_error: str | None = None
        self._listed_at = float("-inf")
        self._skipped: set[str] = set()  # pods left out, logged once each

    def pod_namespaces(self) -> dict[str, str]:
        """Pod name -> namespace of the last list, for names that occur once on this node: the
        namespace of an engine whose probe does not say it (the probe collector fills it in)."""
        names = Counter(target.pod for target in self.targets)
        return {t.pod: t.namespace for t in self.targets if t.namespace and names[t.pod] == 1}

    def node_pods(self) -> set[tuple[str, str]]:
        """(namespace, name) of every pod of the last list: the pods a probe over TCP may speak for."""
        return {(pod.namespace, pod.name) for pod in self.pods}

    def injected_pods(self) -> list[NodePod]:
        """The pods of the last list that `gdx inject` gave the probe."""
        return [pod for pod in self.pods if pod.injected]

    def _ssl(self) -> ssl.SSLContext | bool:
        if not self.settings.api_server.startswith("https"):
            return False
        ca = self.settings.ca_file
        return ssl.create_default_context(cafile=ca) if ca else ssl.create_default_context()

    async def refresh(self, session: aiohttp.ClientSession, timeout: float) -> list[Target]:
        """The current targets; raises `CollectorError` while the last list failed.

        Lists at most once per refresh interval, failed or not: a struggling API server is not hit on
        every scrape of every node."""
        if time.monotonic() - self._listed_at < self.settings.refresh_interval:
            if self.last_error is not None:
                raise CollectorError(self.last_error)
            return self.targets
        self._listed_at = time.monotonic()
        try:
            self.targets = await self._list(session, timeout)
            self.last_error = None
        except CollectorError as err:
            self.last_error = str(err)
            raise
        return self.targets

    async def _get(
        self,
        session: aiohttp.ClientSession,
        url: str,
        params: dict[str, str],
        token: str,
        timeout: float,
        namespace: str,
    ) -> dict[str, Any]:
        """One PodList from the API server, checked; errors name the node (and the namespace)."""
        where = f"{self.settings.node_name}" + (f" in namespace {namespace}" if namespace else "")
        try:
            async with session.get(
                url,
                params=params,
                headers={"Authorization": f"Bearer {token}"},
                ssl=self._ssl(),
                timeout=aiohttp.ClientTimeout(total=timeout),
            ) as resp:
                if resp.status != 200:
                    raise CollectorError(f"listing pods on {where}: HTTP {resp.status}")
                body = await read_capped(resp, MAX_POD_LIST_BYTES)
                try:
                    doc = json.loads(body)
                except ValueError:
                    raise CollectorError("the API server's answer is not JSON") from None
        except BodyTooLarge:
            raise CollectorError("the pod list is larger than 32 MiB") from None
        except (aiohttp.ClientError, OSError, ssl.SSLError) as err:
            raise CollectorError(f"listing pods: {type(err).__name__}: {err}") from None
        except TimeoutError:
            raise CollectorError(f"listing pods timed out after {timeout:g}s") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("items"), list):
            raise CollectorError("the API server's answer is not a PodList")
        return doc

    async def _list(self, session: aiohttp.ClientSession, timeout: float) -> list[Target]:
        settings = self.settings
        try:
            # A few hundred bytes on a tmpfs: not worth a thread.
            with open(settings.token_file, encoding="utf-8") as handle:  # noqa: ASYNC230
                token = handle.read().strip()
        except OSError as err:
            raise CollectorError(
                f"cannot read the service-account token {settings.token_file}: {err.strerror}"
            ) from None
        # resourceVersion=0: served from the API server's cache, not a quorum read of etcd (see above).
        params = {"fieldSelector": f"spec.nodeName={settings.node_name}", "resourceVersion": "0"}
        if settings.pod_selector:
            params["labelSelector"] = settings.pod_selector
        base = settings.api_server.rstrip("/") + "/api/v1"
        # every namespace in one list, or one list per namespace (concurrently): what a Role in each allows
        lists = [(ns, f"{base}/namespaces/{ns}/pods") for ns in settings.namespaces] or [("", f"{base}/pods")]
        docs = await asyncio.gather(
            *(self._get(session, url, params, token, timeout, ns) for ns, url in lists)
        )
        doc = {"items": [item for listed in docs for item in listed["items"]]}
        skipped: list[str] = []
        targets = targets_from_pod_list(doc, settings, skipped)
        self.pods = node_pods_from_list(doc, settings)
        for reason in sorted(set(skipped) - self._skipped):
            log.warning("kubernetes discovery: %s; not scraped", reason)
        self._skipped = set(skipped)
        return targets
