"""Who is at the other end of a TCP probe connection: the Kubernetes API says, not the connection.

A probe reaching the daemon over TCP (a node-local Service, or the node's IP on a hostPort) first
presents its pod's projected ServiceAccount token, bound to the pod and minted for the exporter's own
audience. The daemon asks the API server (`TokenReview`, `create` on `tokenreviews`: the chart's
ClusterRole grants that and nothing more) whether the token is valid for that audience, and takes the
pod's name and namespace from the answer: a bound token's review carries them in the user's extra
fields (`authentication.kubernetes.io/pod-name`, `pod-uid`; KEP-1205), and from Kubernetes 1.30 the
node too (`authentication.kubernetes.io/node-name`, KEP-4193). A pod on another node is refused: its
own node's daemon is the one to count it. Source addresses are never identity (some CNIs rewrite
them on hostPort paths).

`identity_from_review` is pure; `TokenReviewer` does the HTTP, once per connection and again before
the token expires (the listener's re-review), with one TLS context, a rate limit, a memory of refused
tokens and a short one of accepted tokens (`review_limits`): junk connections cannot make the daemon
flood the API server, and a probe reconnecting with its token costs one review a minute at most.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import re
import ssl
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import aiohttp

from exporter.daemon.httpbody import BodyTooLarge, read_capped
from exporter.daemon.receiver.review_limits import AcceptedCache, RefusalCache, ReviewBudget, token_key

log = logging.getLogger("gdx.collector.probe")
PATH = "/apis/authentication.k8s.io/v1/tokenreviews"
EXTRA = "authentication.kubernetes.io/"
SERVICE_ACCOUNT_USER = "system:serviceaccount:"
MAX_REVIEW_BYTES = 1 << 20
# Why a TCP connection was refused (guided_decoding_probe_connections_refused_total{reason}).
REFUSAL_REASONS = (
    "no_token",
    "token_rejected",
    "not_a_pod",
    "other_node",
    "node_unknown",
    "review_failed",
    "review_rate_limited",  # more reviews asked for than review_limits.REVIEWS_PER_SECOND
)
# Refusals the API server will give again for the same token: answered from memory for a while.
DEFINITE = frozenset({"token_rejected", "not_a_pod", "other_node", "node_unknown"})
# A projected ServiceAccount token is a JWS in compact form: three base64url parts.
JWT = re.compile(r"[A-Za-z0-9_-]+\.([A-Za-z0-9_-]+)\.[A-Za-z0-9_-]+")


@dataclass(frozen=True, slots=True)
class PodIdentity:
    """The pod a token was bound to, as the API server vouches for it."""

    namespace: str
    pod: str
    uid: str
    node: str  # empty where the API server does not say (before Kubernetes 1.30)
    service_account: str


@dataclass(frozen=True, slots=True)
class ReviewedToken:
    """A review that vouched for a token: the pod, and when the token stops being valid (its `exp`,
    wall-clock seconds; None where the token does not say)."""

    identity: PodIdentity
    expires: float | None


class Refused(Exception):
    """A connection the daemon does not take: `reason` is one of REFUSAL_REASONS."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def _first(extra: Any, key: str) -> str:
    values = extra.get(EXTRA + key) if isinstance(extra, dict) else None
    if isinstance(values, list) and values and isinstance(values[0], str):
        return values[0]
    return ""


def identity_from_review(doc: Any, audience: str) -> PodIdentity:
    """Pure: the pod a TokenReview's answer vouches for; raises Refused saying why not."""
    status = doc.get("status") if isinstance(doc, dict) else None
    if not isinstance(status, dict):
        raise Refused("review_failed", "the API server's answer is not a TokenReview")
    if status.get("authenticated") is not True:
        error = str(status.get("error") or "not authenticated")[:200]
        raise Refused("token_rejected", f"the API server did not accept the token: {error}")
    audiences = status.get("audiences")
    # Fail closed: an answer that does not list our audience (missing, not a list) does not vouch for it.
    if not isinstance(audiences, list) or audience not in audiences:
        raise Refused("token_rejected", f"the token is not for the audience {audience!r}")
    user = status.get("user")
    user = user if isinstance(user, dict) else {}
    username = str(user.get("username") or "")
    extra = user.get("extra")
    pod = _first(extra, "pod-name")
    if not username.startswith(SERVICE_ACCOUNT_USER) or not pod:
        raise Refused("not_a_pod", f"the token is not bound to a pod (user {username[:120]!r})")
    namespace, _, account = username[len(SERVICE_ACCOUNT_USER) :].partition(":")
    return PodIdentity(
        namespace=namespace,
        pod=pod,
        uid=_first(extra, "pod-uid"),
        node=_first(extra, "node-name"),
        service_account=account,
    )


def token_expiry(token: str) -> float | None:
    """The `exp` claim of a JWT (a projected token is one), unverified: the review is what vouches for
    the token, this only says when to ask again. None where the token does not say."""
    match = JWT.fullmatch(token)
    if match is None:
        return None
    payload = match.group(1)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (ValueError, binascii.Error):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    if isinstance(exp, bool) or not isinstance(exp, int | float) or not 0 < exp < 2**40:
        return None
    return float(exp)


def check_node(
    identity: PodIdentity, node: str, node_pods: Callable[[], Collection[tuple[str, str]]] | None
) -> None:
    """Refuses a pod that is not on this daemon's node: by the review's node name where it has one,
    else by this node's pod list (namespace, name) from discovery."""
    if identity.node:
        if not node:
            raise Refused("node_unknown", "this daemon does not know its node (--kubernetes.node-name)")
        if identity.node != node:
            raise Refused("other_node", f"pod {identity.namespace}/{identity.pod} runs on {identity.node}")
        return
    if node_pods is None:
        raise Refused("node_unknown", "the review names no node and pod discovery is off")
    if (identity.namespace, identity.pod) not in node_pods():
        raise Refused("other_node", f"pod {identity.namespace}/{identity.pod} is not on this node")


@dataclass(frozen=True)
class ReviewSettings:
    """The API server and this daemon's own credentials (kubernetes.*), the audience (probe.*)."""

    api_server: str
    token_file: str
    ca_file: str
    audience: str
    node: str
    timeout: float = 5.0


class TokenReviewer:
    """Reviews tokens with the API server; one aiohttp session and one TLS context, made on first use.
    `budget`, `refusals` and `accepted`: the rate limit and the memories of refused and accepted tokens
    (review_limits)."""

    def __init__(
        self,
        settings: ReviewSettings,
        node_pods: Callable[[], Collection[tuple[str, str]]] | None = None,
        budget: ReviewBudget | None = None,
        refusals: RefusalCache | None = None,
        accepted: AcceptedCache[PodIdentity] | None = None,
    ) -> None:
        self.settings = settings
        self.node_pods = node_pods
        self.budget = budget or ReviewBudget()
        self.refusals = refusals or RefusalCache()
        self.accepted: AcceptedCache[PodIdentity] = accepted or AcceptedCache()
        self.asked = 0  # reviews sent to the API server
        self._asking: dict[bytes, asyncio.Future[PodIdentity]] = {}  # by token digest: reviews in flight
        self._session: aiohttp.ClientSession | None = None
        self._context: ssl.SSLContext | None = None

    def _ssl(self) -> ssl.SSLContext | bool:
        """One context for the daemon's life: building one loads the CA bundle (milliseconds of CPU)."""
        if not self.settings.api_server.startswith("https"):
            return False
        if self._context is None:
            ca = self.settings.ca_file
            self._context = ssl.create_default_context(cafile=ca) if ca else ssl.create_default_context()
        return self._context

    async def review(self, token: str, *, fresh: bool = False) -> ReviewedToken:
        """The pod behind `token`, on this node, and when the token expires; raises Refused. A token
        refused before is answered from memory, one accepted in the last minute too (by its digest);
        past the rate limit nothing is asked. `fresh` (a re-review): the API server is asked, the
        accepted review forgotten first, so a failed re-review leaves nothing to vouch for the token."""
        expires = token_expiry(token)
        key = token_key(token)
        now = time.monotonic()
        cached = self.refusals.get(key, now)
        if cached is not None:
            self.accepted.forget(key)
            raise Refused(cached.reason, cached.detail + " (refused before: not asked again)")
        if fresh:
            self.accepted.forget(key)
        elif (known := self.accepted.get(key, now)) is not None:
            return ReviewedToken(known, expires)
        if (asking := self._asking.get(key)) is not None:  # the engines of one pod reconnecting at once
            return ReviewedToken(await asyncio.shield(asking), expires)
        if not self.budget.take(now):
            raise Refused("review_rate_limited", "too many TokenReviews asked for: try again later")
        asking = self._asking[key] = asyncio.get_running_loop().create_future()
        try:
            identity = await self._ask(token)
        except Refused as err:
            if err.reason in DEFINITE:
                self.refusals.put(key, err.reason, err.detail, time.monotonic())
            asking.set_exception(err)
            asking.exception()  # retrieved: no "never retrieved" warning when nobody else waited
            raise
        except BaseException:
            asking.cancel()
            raise
        finally:
            del self._asking[key]
        expires_in = None if expires is None else expires - time.time()
        self.accepted.put(key, identity, time.monotonic(), expires_in)
        asking.set_result(identity)
        return ReviewedToken(identity, expires)

    async def _ask(self, token: str) -> PodIdentity:
        settings = self.settings
        self.asked += 1
        try:
            # A few hundred bytes on a tmpfs, once per connection: not worth a thread.
            with open(settings.token_file, encoding="utf-8") as handle:  # noqa: ASYNC230
                own = handle.read().strip()
        except OSError as err:
            raise Refused("review_failed", f"cannot read {settings.token_file}: {err.strerror}") from None
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token, "audiences": [settings.audience]},
        }
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        try:
            async with self._session.post(
                settings.api_server.rstrip("/") + PATH,
                json=body,
                headers={"Authorization": f"Bearer {own}"},
                ssl=self._ssl(),
                timeout=aiohttp.ClientTimeout(total=settings.timeout),
            ) as resp:
                if resp.status not in (200, 201):
                    raise Refused("review_failed", f"TokenReview: HTTP {resp.status}")
                doc = json.loads(await read_capped(resp, MAX_REVIEW_BYTES))
        except (aiohttp.ClientError, OSError, ssl.SSLError, ValueError, BodyTooLarge) as err:
            raise Refused("review_failed", f"TokenReview: {type(err).__name__}: {err}") from None
        except TimeoutError:
            raise Refused("review_failed", f"TokenReview timed out after {settings.timeout:g}s") from None
        identity = identity_from_review(doc, settings.audience)
        check_node(identity, settings.node, self.node_pods)
        return identity

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
