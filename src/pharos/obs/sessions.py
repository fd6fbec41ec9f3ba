"""Browser sessions for /status: an admin pastes a key once into a login form, and the
browser gets a cookie holding a random session id, never the key. The id maps here, in
memory, to the key's name and an expiry; a reload that removes the key (or its admin
flag) ends its sessions at their next use, and a restart ends them all."""

from __future__ import annotations

import secrets
from collections import OrderedDict
from dataclasses import dataclass

from pharos.clock import Clock

COOKIE = "pharos_session"
SESSION_TTL_S = 12 * 3600.0
MAX_SESSIONS = 1000
"""Oldest sessions go first beyond this, so logins can't grow memory without bound."""


@dataclass(frozen=True, slots=True)
class Session:
    key_name: str
    key_sha256: str  # a key rotated under the same name ends its sessions too
    expires_at: float  # monotonic seconds


class Sessions:
    def __init__(
        self, clock: Clock, *, ttl_s: float = SESSION_TTL_S, cap: int = MAX_SESSIONS
    ) -> None:
        self._clock = clock
        self._ttl_s = ttl_s
        self._cap = cap
        self._by_id: OrderedDict[str, Session] = OrderedDict()

    def open(self, key_name: str, key_sha256: str) -> str:
        session_id = secrets.token_urlsafe(32)
        expires_at = self._clock.now() + self._ttl_s
        self._by_id[session_id] = Session(key_name, key_sha256, expires_at)
        while len(self._by_id) > self._cap:
            self._by_id.popitem(last=False)
        return session_id

    def get(self, session_id: str | None) -> Session | None:
        """A live session; None for no, an unknown or an expired session id."""
        if session_id is None:
            return None
        session = self._by_id.get(session_id)
        if session is None:
            return None
        if self._clock.now() >= session.expires_at:
            del self._by_id[session_id]
            return None
        return session

    def close(self, session_id: str | None) -> None:
        if session_id is not None:
            self._by_id.pop(session_id, None)

    def __len__(self) -> int:
        return len(self._by_id)

    @property
    def ttl_s(self) -> float:
        return self._ttl_s
