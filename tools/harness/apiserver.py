"""The Kubernetes API at its HTTP boundary, for the daemon's TokenReview and pod list: a real HTTP
server on loopback answering as the API server does.

No API server can run here (no etcd, no kube-apiserver binary, no cluster). The answers are shaped
from the API reference (authentication.k8s.io/v1 TokenReview: `status.authenticated`, `audiences`,
`error`, `user.username` system:serviceaccount:NS:SA, `user.extra` with the bound token's
`authentication.kubernetes.io/pod-name`, `pod-uid`, `node-name`, `node-uid`, `credential-id` (KEP-1205,
KEP-4193)) and core/v1 PodList: they are not recordings of a real server. The caller's own bearer
token is checked as the API server checks it (401 without it).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tools.harness import free_port

REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"


@dataclass(frozen=True)
class BoundToken:
    """What the API server knows of a projected token: the pod it is bound to and its audiences."""

    namespace: str
    pod: str
    node: str = "node-a"
    audiences: tuple[str, ...] = ("guided-decoding-exporter",)
    service_account: str = "default"
    uid: str = "6f1c2a90-0000-4000-8000-000000000001"
    pod_bound: bool = True


def review_answer(tokens: dict[str, BoundToken], body: dict[str, Any]) -> dict[str, Any]:
    """The TokenReview answer for a request body, as the API server writes it (201 Created)."""
    spec = body.get("spec") or {}
    wanted = list(spec.get("audiences") or [])
    bound = tokens.get(str(spec.get("token")))
    status: dict[str, Any]
    if bound is None:
        status = {
            "user": {},
            "error": "[invalid bearer token, square/go-jose: error in cryptographic primitive]",
        }
    elif wanted and not set(wanted) & set(bound.audiences):
        theirs, ours = json.dumps(list(bound.audiences)), json.dumps(wanted)
        error = f"[invalid bearer token, token audiences {theirs} is invalid for the target audiences {ours}]"
        status = {"user": {}, "error": error}
    else:
        extra = {
            "authentication.kubernetes.io/credential-id": ["JTI=2c0e1f4e-0000-4000-8000-00000000000a"],
        }
        if bound.pod_bound:
            extra |= {
                "authentication.kubernetes.io/node-name": [bound.node],
                "authentication.kubernetes.io/node-uid": ["9d3e6b1c-0000-4000-8000-00000000000b"],
                "authentication.kubernetes.io/pod-name": [bound.pod],
                "authentication.kubernetes.io/pod-uid": [bound.uid],
            }
        status = {
            "authenticated": True,
            "user": {
                "username": f"system:serviceaccount:{bound.namespace}:{bound.service_account}",
                "uid": "0b5f7d4e-0000-4000-8000-00000000000c",
                "groups": [
                    "system:serviceaccounts",
                    f"system:serviceaccounts:{bound.namespace}",
                    "system:authenticated",
                ],
                "extra": extra,
            },
            "audiences": [a for a in wanted if a in bound.audiences] or list(bound.audiences),
        }
    return {
        "kind": "TokenReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": None},
        "spec": spec,
        "status": status,
    }


@dataclass
class FakeApiServer:
    """`tokens`: token -> BoundToken; `pods`: the PodList items the pod list answers with."""

    daemon_token: str = "daemon-token"
    tokens: dict[str, BoundToken] = field(default_factory=dict)
    pods: list[dict[str, Any]] = field(default_factory=list)
    reviews: list[dict[str, Any]] = field(default_factory=list)  # every TokenReview request body

    def __post_init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def review(self, body: dict[str, Any]) -> dict[str, Any]:
        return review_answer(self.tokens, body)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, doc: dict[str, Any]) -> None:
                data = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _authorised(self) -> bool:
                if self.headers.get("Authorization") == f"Bearer {api.daemon_token}":
                    return True
                status = {
                    "status": "Failure",
                    "message": "Unauthorized",
                    "reason": "Unauthorized",
                    "code": 401,
                }
                self._send(401, {"kind": "Status", "apiVersion": "v1", **status})
                return False

            def do_POST(self) -> None:
                if not self._authorised():
                    return
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if self.path != REVIEWS:
                    self._send(404, {"kind": "Status", "code": 404})
                    return
                api.reviews.append(body)
                self._send(201, api.review(body))

            def do_GET(self) -> None:
                if not self._authorised():
                    return
                if self.path.split("?")[0] == "/api/v1/pods":
                    self._send(
                        200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": api.pods}
                    )
                else:
                    self._send(404, {"kind": "Status", "code": 404})

        return Handler

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
