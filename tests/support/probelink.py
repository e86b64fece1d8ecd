"""One engine's real probe (Recorder + Shipper.messages) wired to a daemon store through the real
message classifier, without a socket: what the store and exposition unit tests drive."""

from __future__ import annotations

from exporter import wire
from exporter.daemon.receiver.listener import classify
from exporter.daemon.receiver.store import EngineState, ProbeStore
from exporter.probe.recorder import Recorder
from exporter.probe.shipper import Shipper

IDENTITY = {
    "pod": "vllm-0",
    "engine": "0",
    "engine_kind": "generic",
    "engine_version": "",
    "backends": {},
    "probe_version": "0",
}


class Link:
    """One engine's probe wired to a store without a socket."""

    def __init__(
        self,
        store: ProbeStore,
        max_schemas: int = 500,
        pod: str = "vllm-0",
        namespace: str = "",
        engine: str = "0",
    ) -> None:
        self.rec = Recorder(max_schemas=max_schemas)
        identity = {**IDENTITY, "pod": pod, "engine": engine} | (
            {"namespace": namespace} if namespace else {}
        )
        self.shipper = Shipper(self.rec, "/nonexistent", identity)
        self.store = store
        self.engine: EngineState | None = None
        self.now = 0.0

    def ship(self, fresh: bool = False) -> None:
        self.now += 1
        for line in self.shipper.messages(fresh or self.engine is None):
            result, msg = classify(line)
            assert result == "ok", line[:200]
            if isinstance(msg, wire.Hello):
                self.engine = self.store.hello(msg, self.now)
                continue
            assert self.engine is not None
            if isinstance(msg, wire.SchemasMessage):
                self.store.schemas(self.engine, msg, self.now)
            elif isinstance(msg, wire.Snapshot):
                self.store.snapshot(self.engine, msg, self.now)

    def compile(self, spec: str, seconds: float, hit: bool = False) -> None:
        self.rec.finish(self.rec.begin("xgrammar"), "xgrammar", "json", spec, seconds, hit)
