"""Client keys: new ones (`pharos keys new`), the table built from config, and the live
table swapped whole on reload and asked by every route.

Proxy and obs both authenticate through one KeyRing, so a reload that drops a key
locks it out of /v1 and /status in the same step.
"""

from __future__ import annotations

import re
import secrets

from aiohttp import web

from pharos.config import Config
from pharos.proxy.auth import KeyEntry, KeyTable, hash_key
from pharos.proxy.errors import is_anthropic_path, unauthorized

KEY_PREFIX = "pk-"
KEY_BYTES = 32
KEY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]*")
"""A key name: how usage is recorded."""


def new_key() -> str:
    """A new client key: `pk-` + 32 random bytes, URL-safe base64."""
    return KEY_PREFIX + secrets.token_urlsafe(KEY_BYTES)


def key_entry_yaml(name: str, key: str) -> str:
    return f'  - name: {name}\n    sha256: "{hash_key(key)}"\n'


def key_entries(config: Config) -> list[KeyEntry]:
    """The config's keys as the proxy's key table holds them (SHA-256 only)."""
    return [
        KeyEntry(
            name=key.name,
            sha256=key.sha256,
            rpm=key.rpm,
            tokens_per_day=key.tokens_per_day,
            weight=key.weight,
            models=frozenset(key.models),
            admin=key.admin,
            metrics=key.metrics,
        )
        for key in config.keys
    ]


def key_table(config: Config) -> KeyTable:
    """No keys configured: an open table (every client is one anonymous admin key)."""
    if not config.keys:
        return KeyTable.open()
    return KeyTable.from_entries(key_entries(config), metrics_public=config.metrics_public)


def key_header(sent_authorization: bool, sent_x_api_key: bool, path: str) -> str:
    """The header a 401 speaks of: the one the client used, else its API's own."""
    if sent_authorization:
        return "Authorization"
    if sent_x_api_key or is_anthropic_path(path):
        return "x-api-key"
    return "Authorization"


class KeyRing:
    """Holds the current KeyTable; `replace` swaps in a new one in one step."""

    def __init__(self, table: KeyTable) -> None:
        self._table = table

    @property
    def table(self) -> KeyTable:
        return self._table

    def replace(self, table: KeyTable) -> None:
        self._table = table

    def authenticate(self, request: web.Request) -> KeyEntry:
        return self.authenticate_headers(
            request.headers.get("Authorization"), request.headers.get("x-api-key"), request.path
        )

    def authenticate_headers(
        self, authorization: str | None, x_api_key: str | None, path: str
    ) -> KeyEntry:
        """`authenticate` of any client side: its two key headers' values and its path."""
        key = self._table.lookup(authorization, x_api_key)
        if key is None:
            raise unauthorized(key_header(authorization is not None, x_api_key is not None, path))
        return key
