"""Membership: peers.members as written, or the records of peers.dns re-resolved every
10 s (a Kubernetes headless Service). A name without a port takes peers.listen's port.
Resolution is injected, so tests never touch DNS.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Awaitable, Callable, Sequence

log = logging.getLogger("pharos.peer")

DNS_EVERY_S = 10.0

Resolve = Callable[[str], Awaitable[Sequence[str]]]
"""A host name -> its addresses (IPv4 or IPv6 literals)."""


def with_port(member: str, default_port: int) -> str:
    """`pharos-a` -> `pharos-a:8081`; `pharos-a:9000`, `[::1]:9000` stay; `::1` -> `[::1]:8081`."""
    member = member.strip()
    if member.startswith("["):
        return member if "]:" in member else f"{member}:{default_port}"
    if member.count(":") > 1:
        return f"[{member}]:{default_port}"
    _host, sep, port = member.rpartition(":")
    if sep and port.isdigit():
        return member
    return f"{member}:{default_port}"


async def system_resolve(name: str) -> Sequence[str]:
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})


class Members:
    """The current peer addresses (host:port), possibly including ourselves."""

    def __init__(
        self,
        *,
        members: Sequence[str] = (),
        dns: str | None = None,
        default_port: int = 8081,
        resolve: Resolve = system_resolve,
    ) -> None:
        self._static = tuple(with_port(m, default_port) for m in members)
        self._dns = dns
        self._default_port = default_port
        self._resolve = resolve
        self._last_error: str | None = None

    @property
    def dynamic(self) -> bool:
        return self._dns is not None

    async def current(self) -> tuple[str, ...] | None:
        """The addresses now; None when DNS failed (the caller keeps the last list)."""
        if self._dns is None:
            return self._static
        name, port = _split_port(self._dns, self._default_port)
        try:
            addresses = await self._resolve(name)
        except OSError as err:
            error = f"peers.dns {name}: {err.strerror or err}"
            if error != self._last_error:
                log.warning("%s; keeping the last peer list", error)
                self._last_error = error
            return None
        self._last_error = None
        return tuple(sorted(f"[{a}]:{port}" if ":" in a else f"{a}:{port}" for a in set(addresses)))


def _split_port(name: str, default_port: int) -> tuple[str, int]:
    host, sep, port = name.rpartition(":")
    if sep and port.isdigit() and ":" not in host:
        return host, int(port)
    return name, default_port
