"""TLS and basic auth for the daemon's endpoints, from a web configuration file in the format of
Prometheus' exporter-toolkit (`--web.config.file`): one file serves node_exporter and this daemon.

    tls_server_config:
      cert_file: /etc/gdx/tls.crt
      key_file: /etc/gdx/tls.key
      client_auth_type: RequireAndVerifyClientCert   # optional; default NoClientCert
      client_ca_file: /etc/gdx/ca.crt                # for client certificates
      min_version: TLS12                             # TLS12 (default) or TLS13
    basic_auth_users:
      prometheus: $2y$10$...                         # bcrypt hashes (htpasswd -nBC 10 "" | tr -d ':')

Unknown keys are errors, as in exporter-toolkit. Passwords are checked with bcrypt off the event
loop, one check at a time (exporter-toolkit's mutex: a flood of guesses takes one core, not all); a
successful check is remembered (by a SHA-256 of the credentials) so that each scrape does not pay
bcrypt's cost again. An unknown user name is checked against a dummy hash of the users' cost, as
exporter-toolkit does, and the name is looked up in constant time: the answer's timing does not say
which user names exist.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import re
import ssl
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import yaml
from aiohttp import web

TOP_KEYS = {"tls_server_config", "basic_auth_users", "http_server_config"}
TLS_KEYS = {"cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version", "max_version"}
CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "RequestClientCert": ssl.CERT_OPTIONAL,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAnyClientCert": ssl.CERT_REQUIRED,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
VERSIONS = {"TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
# A bcrypt hash as htpasswd -B writes it: $2a$/$2b$/$2y$, a two-digit cost of 4 to 31, 53 characters of
# salt and digest. Anything else would make bcrypt raise on every request instead of refusing at start.
BCRYPT_HASH = re.compile(r"\$2[aby]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}")
BCRYPT_MAX_BYTES = 72  # bcrypt reads no further (htpasswd and Go's bcrypt compare only these)


@dataclass
class WebConfig:
    ssl_context: ssl.SSLContext | None = None
    users: dict[str, bytes] = field(default_factory=dict)


def load(path: str) -> WebConfig:
    """Parses and checks the file; raises ValueError naming the key and the problem."""
    try:
        with open(path, encoding="utf-8") as handle:
            doc = yaml.safe_load(handle) or {}
    except (OSError, yaml.YAMLError) as err:
        raise ValueError(f"cannot read {path}: {err}") from err
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: not a mapping")
    unknown = set(doc) - TOP_KEYS
    if unknown:
        raise ValueError(f"{path}: unknown keys {sorted(unknown)}")
    config = WebConfig()
    tls = doc.get("tls_server_config")
    if tls:
        if not isinstance(tls, dict) or set(tls) - TLS_KEYS:
            raise ValueError(f"{path}: tls_server_config: unknown keys {sorted(set(tls) - TLS_KEYS)}")
        if not tls.get("cert_file") or not tls.get("key_file"):
            raise ValueError(f"{path}: tls_server_config needs cert_file and key_file")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            context.load_cert_chain(tls["cert_file"], tls["key_file"])
        except (OSError, ssl.SSLError) as err:
            raise ValueError(f"{path}: cannot load cert_file/key_file: {err}") from err
        context.minimum_version = VERSIONS.get(tls.get("min_version", "TLS12"), ssl.TLSVersion.TLSv1_2)
        if tls.get("max_version") in VERSIONS:
            context.maximum_version = VERSIONS[tls["max_version"]]
        auth = tls.get("client_auth_type", "NoClientCert")
        if auth not in CLIENT_AUTH:
            raise ValueError(f"{path}: client_auth_type {auth!r} is not one of {sorted(CLIENT_AUTH)}")
        context.verify_mode = CLIENT_AUTH[auth]
        if tls.get("client_ca_file"):
            try:
                context.load_verify_locations(tls["client_ca_file"])
            except (OSError, ssl.SSLError) as err:
                raise ValueError(f"{path}: cannot load client_ca_file: {err}") from err
        elif context.verify_mode != ssl.CERT_NONE:
            raise ValueError(f"{path}: client_auth_type {auth} needs client_ca_file")
        config.ssl_context = context
    users = doc.get("basic_auth_users") or {}
    if not isinstance(users, dict):
        raise ValueError(f"{path}: basic_auth_users must map user names to bcrypt hashes")
    for user, hashed in users.items():
        if not isinstance(hashed, str) or not BCRYPT_HASH.fullmatch(hashed):
            raise ValueError(f"{path}: basic_auth_users.{user}: not a bcrypt hash")
        config.users[str(user)] = hashed.replace("$2y$", "$2b$", 1).encode()
    return config


def cost_of(hashed: bytes) -> int:
    """A bcrypt hash's cost (log2 of its rounds): `$2b$10$...` is 10."""
    return int(hashed[4:6])


def basic_auth(users: dict[str, bytes], open_paths: frozenset[str] = frozenset()) -> Callable[..., Any]:
    """aiohttp middleware: every endpoint but `open_paths` needs one of the users (401 otherwise)."""
    import bcrypt

    remembered: OrderedDict[bytes, None] = OrderedDict()
    known = [(name.encode(), hashed) for name, hashed in users.items()]
    # What an unknown user is checked against: a hash of the users' highest cost, so that a name that
    # does not exist costs what one that does costs (exporter-toolkit's fixed hash, at this file's cost).
    dummy = bcrypt.hashpw(b"no such user", bcrypt.gensalt(max((cost_of(h) for _, h in known), default=10)))
    checks = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gdx-bcrypt")

    def check(user: str, password: str) -> bool:
        wanted, hashed, found = user.encode(), dummy, False
        for name, candidate in known:  # every name compared, each in constant time: no early answer
            if hmac.compare_digest(name, wanted):
                hashed, found = candidate, True
        matched = bcrypt.checkpw(password.encode()[:BCRYPT_MAX_BYTES], hashed)
        return matched and found

    @web.middleware
    async def middleware(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if request.path in open_paths:
            return await handler(request)
        header = request.headers.get("Authorization", "")
        if header.startswith("Basic "):
            try:
                user, _, password = base64.b64decode(header[6:], validate=True).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                user, password = "", ""
            key = hashlib.sha256(f"{user}\0{password}".encode()).digest()
            if key in remembered:
                return await handler(request)
            loop = asyncio.get_running_loop()
            ok: bool = await loop.run_in_executor(checks, check, user, password)
            if ok:
                remembered[key] = None
                if len(remembered) > 64:
                    remembered.popitem(last=False)
                return await handler(request)
        return web.Response(
            status=401,
            text="Unauthorized\n",
            headers={"WWW-Authenticate": 'Basic realm="guided-decoding-exporter"'},
        )

    return middleware
