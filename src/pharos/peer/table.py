"""What this instance knows of each peer, and the hot path's one entry point, `push`.

Built before the scheduler (which hands it every prefix op) and before obs (which
reads `status`); the peer node fills it. `push` appends an op to each peer's
bounded pending list and drops it, counted per peer, when the list is full: the
hot path never waits on peers (spec §12).
"""

from __future__ import annotations

from dataclasses import dataclass

from pharos.prefix import PrefixOp

PENDING_LIMIT = 10_000


@dataclass(frozen=True)
class PeerStatus:
    """One peer as /status and /metrics show it."""

    address: str  # host:port as membership named it
    origin: int | None  # from its Pharos-Origin header; None until it answered once
    up: bool | None  # did our last delta reach it; None = never tried
    last_heard_s: float | None  # wall clock of its last delta here; None = never
    mismatch: bool  # its backend set, key set or usage zone differs from ours
    proto_mismatch: bool  # an incompatible wire protocol, seen from either side
    dropped_ops: int  # prefix ops dropped because its pending list was full
    error: str | None  # why the last exchange failed, in a few words


class Link:
    """One peer address: its pending prefix ops and what the last exchange said."""

    def __init__(self, address: str, pending_limit: int) -> None:
        self.address = address
        self.pending: list[PrefixOp] = []
        self.pending_limit = pending_limit
        self.dropped_ops = 0
        self.origin: int | None = None
        self.up: bool | None = None
        self.is_self = False
        self.proto_mismatch = False
        self.needs_pull = True  # new or unreachable: pull its snapshot when it answers
        self.error: str | None = None
        # Usage cells: the change number it acknowledged (None: send all cells next), and
        # when it last got all of them (monotonic seconds).
        self.cells_acked: int | None = None
        self.cells_full_s: float | None = None

    def take(self, limit: int) -> list[PrefixOp]:
        ops, self.pending = self.pending[:limit], self.pending[limit:]
        return ops


class Remote:
    """What an origin's deltas told us."""

    def __init__(self) -> None:
        self.last_heard_s: float | None = None
        self.fingerprint: int | None = None
        self.proto_mismatch = False
        self.left = False


class PeerTable:
    def __init__(self, pending_limit: int = PENDING_LIMIT) -> None:
        self._pending_limit = pending_limit
        self._links: dict[str, Link] = {}
        self._remotes: dict[int, Remote] = {}
        self._sending: tuple[Link, ...] = ()  # links that receive ops: not ourselves
        self.fingerprint: int | None = None  # ours, set by the node

    def push(self, op: PrefixOp) -> None:
        """One prefix op to every peer; never blocks, drops (counted) when a list is full."""
        for link in self._sending:
            if len(link.pending) < link.pending_limit:
                link.pending.append(op)
            else:
                link.dropped_ops += 1

    # ---- for the node ---------------------------------------------------------------------

    def links(self) -> tuple[Link, ...]:
        return tuple(self._links.values())

    def link(self, address: str) -> Link | None:
        return self._links.get(address)

    def set_members(self, addresses: tuple[str, ...]) -> tuple[list[Link], list[Link]]:
        """Keep links of addresses still listed; returns (added, removed)."""
        added: list[Link] = []
        removed = [link for a, link in self._links.items() if a not in addresses]
        for link in removed:
            del self._links[link.address]
        for address in addresses:
            if address not in self._links:
                link = Link(address, self._pending_limit)
                self._links[address] = link
                added.append(link)
        self.refresh()
        return added, removed

    def refresh(self) -> None:
        """Recompute which links get ops (after one turned out to be ourselves)."""
        self._sending = tuple(link for link in self._links.values() if not link.is_self)
        for link in self._links.values():
            if link.is_self:
                link.pending.clear()

    def remote(self, origin: int) -> Remote:
        remote = self._remotes.get(origin)
        if remote is None:
            remote = self._remotes[origin] = Remote()
        return remote

    def known_remote(self, origin: int | None) -> Remote | None:
        return None if origin is None else self._remotes.get(origin)

    # ---- for obs ----------------------------------------------------------------------------

    def status(self) -> tuple[PeerStatus, ...]:
        rows: list[PeerStatus] = []
        for link in self._links.values():
            if link.is_self:
                continue
            remote = self.known_remote(link.origin)
            mismatch = (
                remote is not None
                and remote.fingerprint is not None
                and self.fingerprint is not None
                and remote.fingerprint != self.fingerprint
            )
            rows.append(
                PeerStatus(
                    address=link.address,
                    origin=link.origin,
                    up=link.up,
                    last_heard_s=remote.last_heard_s if remote is not None else None,
                    mismatch=mismatch,
                    proto_mismatch=link.proto_mismatch
                    or (remote is not None and remote.proto_mismatch),
                    dropped_ops=link.dropped_ops,
                    error=link.error,
                )
            )
        return tuple(rows)
