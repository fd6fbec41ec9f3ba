"""API keys (spec §9 Auth, §10): an immutable table from SHA-256 digests to key entries.

The key itself is never stored or logged: only its SHA-256 hex digest. A table
is immutable; config reload builds a new one and assigns it in one step.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Final

_HEX_DIGEST = re.compile(r"[0-9a-f]{64}")
# Compared against when no entry matches, so a miss does the same work as a hit.
_NO_MATCH_DIGEST: Final = "0" * 64


@dataclass(frozen=True, slots=True)
class KeyEntry:
    name: str  # unique; usage is recorded by name
    sha256: str  # lowercase hex digest of the key
    rpm: int | None = None  # None = no limit
    tokens_per_day: int | None = None  # None = no limit
    weight: int = 1  # fair-queue share
    models: frozenset[str] = field(default_factory=frozenset)  # allow-list; empty = every model
    admin: bool = False  # may read /status and /usage
    metrics: bool = False  # may read /metrics (admin keys may too)

    def __repr__(self) -> str:
        return f"KeyEntry(name={self.name!r}, admin={self.admin})"


ANONYMOUS: Final = KeyEntry(name="anonymous", sha256="", admin=True)


def hash_key(key: str) -> str:
    """The hex SHA-256 that config holds for a key (what `pharos keys new` prints)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def allows_model(key: KeyEntry, model: str) -> bool:
    return not key.models or model in key.models


def bearer_token(authorization: str | None) -> str | None:
    """The token of `Authorization: Bearer <token>`; None for any other shape."""
    if authorization is None:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    token = token.strip()
    return token or None


class KeyTable:
    def __init__(
        self, by_digest: Mapping[str, KeyEntry], *, is_open: bool, metrics_public: bool = False
    ) -> None:
        self._by_digest = dict(by_digest)
        self._open = is_open
        self.metrics_public = metrics_public  # /metrics needs no key even with keys configured

    @classmethod
    def open(cls) -> KeyTable:
        """No keys configured: every client is the one anonymous admin key."""
        return cls({}, is_open=True)

    @classmethod
    def from_entries(cls, entries: Iterable[KeyEntry], *, metrics_public: bool = False) -> KeyTable:
        """Raises ValueError naming the entry for a bad digest or a repeated name or digest."""
        by_digest: dict[str, KeyEntry] = {}
        names: set[str] = set()
        for index, entry in enumerate(entries):
            where = f"keys[{index}] ({entry.name!r})"
            if not entry.name:
                raise ValueError(f"keys[{index}].name: must not be empty")
            digest = entry.sha256.strip().lower()
            if not _HEX_DIGEST.fullmatch(digest):
                raise ValueError(f"{where}.sha256: must be 64 hex characters (a SHA-256 digest)")
            if entry.name in names:
                raise ValueError(f"{where}.name: repeats an earlier key's name")
            if digest in by_digest:
                raise ValueError(f"{where}.sha256: the same key as {by_digest[digest].name!r}")
            for limit in ("rpm", "tokens_per_day"):
                value = getattr(entry, limit)
                if value is not None and value < 0:
                    raise ValueError(f"{where}.{limit}: must not be negative")
            if entry.weight < 1:
                raise ValueError(f"{where}.weight: must be at least 1")
            names.add(entry.name)
            by_digest[digest] = replace(entry, sha256=digest)
        if not by_digest:
            return cls.open()
        return cls(by_digest, is_open=False, metrics_public=metrics_public)

    @property
    def is_open(self) -> bool:
        return self._open

    @property
    def entries(self) -> tuple[KeyEntry, ...]:
        return tuple(sorted(self._by_digest.values(), key=lambda entry: entry.name))

    def fingerprint(self) -> bytes:
        """A digest of the key set (names, digests, limits) for the peer config check (§10)."""
        summary = hashlib.sha256()
        for entry in self.entries:
            summary.update(
                repr(
                    (
                        entry.name,
                        entry.sha256,
                        entry.rpm,
                        entry.tokens_per_day,
                        entry.weight,
                        sorted(entry.models),
                        entry.admin,
                    )
                ).encode()
            )
        return summary.digest()

    def lookup(self, authorization: str | None, x_api_key: str | None = None) -> KeyEntry | None:
        """The key for a request's `Authorization: Bearer` or `x-api-key` header; None = 401.

        The Anthropic SDK sends `x-api-key`; a well-formed bearer token wins when both come.
        """
        if self._open:
            return ANONYMOUS
        token = bearer_token(authorization)
        if token is None and x_api_key is not None:
            token = x_api_key.strip() or None
        if token is None:
            return None
        digest = hash_key(token)
        entry = self._by_digest.get(digest)
        expected = _NO_MATCH_DIGEST if entry is None else entry.sha256
        if hmac.compare_digest(digest, expected) and entry is not None:
            return entry
        return None

    @staticmethod
    def allows_model(key: KeyEntry, model: str) -> bool:
        return allows_model(key, model)
