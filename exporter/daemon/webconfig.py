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
loop; a successful check is remembered (by a SHA-256 of the credentials) so that each scrape does
not pay bcrypt's cost again.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import ssl
from collections import OrderedDict
from collections.abc import Awaitable, Callable
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
        if not isinstance(hashed, str) or not hashed.startswith(("$2a$", "$2b$", "$2y$")):
            raise ValueError(f"{path}: basic_auth_users.{user}: not a bcrypt hash")
        config.users[str(user)] = hashed.replace("$2y$", "$2b$", 1).encode()
    return config


def basic_auth(users: dict[str, bytes], open_paths: frozenset[str] = frozenset()) -> Callable[..., Any]:
    """aiohttp middleware: every endpoint but `open_paths` needs one of the users (401 otherwise)."""
    import bcrypt

    remembered: OrderedDict[bytes, None] = OrderedDict()

    def check(user: str, password: str) -> bool:
        hashed = users.get(user)
        return hashed is not None and bcrypt.checkpw(password.encode(), hashed)

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
            ok: bool = bool(user) and await loop.run_in_executor(None, check, user, password)
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
