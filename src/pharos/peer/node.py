"""The peer plane (spec §12): one sender per peer every tick, the two peer endpoints, the
startup pull and the leaving delta.

The node moves bytes and schedules merges; every merge lives in the package that
owns the state (sched gauges, usage cells, prefix ops, state stats), and each is
commutative and idempotent, so a lost, late or repeated message is harmless.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pharos.clock import Clock
from pharos.peer.members import DNS_EVERY_S, Members
from pharos.peer.restore import Shared, build_snapshot, merge_snapshot
from pharos.peer.table import Link, PeerTable
from pharos.peer.transport import ORIGIN_HEADER, Reply, Transport, Unreachable, parse_origin
from pharos.peer.wire import PROTO, Delta, ProtoMismatch, WireError, decode_delta, decode_snapshot
from pharos.peer.wire import encode as encode_message
from pharos.prefix import PrefixOp
from pharos.usage import Cell

log = logging.getLogger("pharos.peer")

DELTA_PATH = "/peer/delta"
SNAPSHOT_PATH = "/peer/snapshot"
OP_SLICE = 200
"""Prefix ops merged between two yields (10 hashes each: ~1 ms here)."""


@dataclass(frozen=True)
class NodeOptions:
    tick_s: float = 0.2
    max_ops_per_delta: int = 2_000  # the rest waits for the next tick (the list stays bounded)
    cells_refresh_s: float = 10.0  # every delta cell to each peer this often, changed or not
    delta_timeout_s: float = 1.0
    snapshot_timeout_s: float = 30.0
    startup_pull_s: float = 5.0
    leave_timeout_s: float = 2.0
    dns_every_s: float = DNS_EVERY_S
    max_body_bytes: int = 256 * 1024 * 1024  # a snapshot answer (200k entries: ~17 MB)
    max_request_bytes: int = 32 * 1024 * 1024  # a delta (10k ops of 20 hashes: ~2 MB)
    proto: int = PROTO  # the wire version spoken; only tests run another (an old or new peer)


class Node:
    def __init__(
        self,
        *,
        shared: Shared,
        table: PeerTable,
        transport: Transport,
        members: Members,
        secret: bytes,
        clock: Clock,
        fingerprint: Callable[[], int],
        options: NodeOptions | None = None,
    ) -> None:
        if not secret:
            raise ValueError("peers need a shared secret")
        self._shared = shared
        self._table = table
        self._transport = transport
        self._members = members
        self._secret = secret
        self._clock = clock
        self._fingerprint = fingerprint
        self.options = options if options is not None else NodeOptions()
        self.origin = shared.usage.origin
        self._auth = f"Bearer {secret.decode()}"
        self._senders: dict[str, asyncio.Task[None]] = {}
        self._membership: asyncio.Task[None] | None = None
        self._running = False

    # ---- outgoing ---------------------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        return {
            "Authorization": self._auth,
            ORIGIN_HEADER: str(self.origin),
            "Content-Type": "application/msgpack",
        }

    def _delta(self, ops: list[PrefixOp], cells: list[Cell], *, leaving: bool) -> bytes:
        fingerprint = self._fingerprint()
        self._table.fingerprint = fingerprint
        delta = Delta(
            proto=self.options.proto,
            origin=self.origin,
            fingerprint=fingerprint,
            leaving=leaving,
            gauges=self._shared.sched.export(),
            cells=cells,
            prefix=ops,
        )
        return encode_message(delta)

    def _cells_for(self, link: Link, *, leaving: bool) -> tuple[list[Cell], int, bool]:
        """(cells, change number, full): only what changed since the change number the peer
        acknowledged, or every delta cell when it acknowledged none, on leaving, and every
        cells_refresh_s (a peer that lost state without us noticing converges)."""
        now_s = self._clock.now()
        full = (
            leaving
            or link.cells_acked is None
            or link.cells_full_s is None
            or now_s - link.cells_full_s >= self.options.cells_refresh_s
        )
        since = 0 if full or link.cells_acked is None else link.cells_acked
        cells, change = self._shared.usage.export_changed(since)
        return cells, change, full

    async def send(self, link: Link, *, leaving: bool = False) -> None:
        """One delta to one peer; on an answer after silence, pull its snapshot too."""
        if link.is_self:
            return
        cells, change, full = self._cells_for(link, leaving=leaving)
        ops = list(link.take(self.options.max_ops_per_delta))
        body = self._delta(ops, cells, leaving=leaving)
        sent_at_s = self._clock.now()
        known_origin = link.origin
        try:
            reply = await self._transport.request(
                link.address,
                "POST",
                DELTA_PATH,
                self._headers(),
                body,
                self.options.delta_timeout_s,
            )
        except Unreachable as err:
            self._down(link, f"unreachable ({err})")
            return
        if self._is_self(link, reply):
            return
        if reply.origin != known_origin:
            link.cells_acked = None  # another process answers there now: all cells next
        link.origin = reply.origin
        if reply.status == 409:
            if not link.proto_mismatch:
                log.error(
                    "peer %s refused our deltas: an incompatible wire protocol (we speak %d); "
                    "the two share no state until both run compatible versions",
                    link.address,
                    self.options.proto,
                )
            link.proto_mismatch = True
            link.up = True
            link.error = "incompatible protocol"
            return
        if reply.status == 401:
            self._down(link, "refused our secret")
            return
        if reply.status != 200:
            self._down(link, f"answered {reply.status}")
            return
        if full or (link.cells_acked is not None and reply.origin == known_origin):
            link.cells_acked = change
            if full:
                link.cells_full_s = sent_at_s
        if link.proto_mismatch:
            log.info("peer %s accepts our deltas again", link.address)
        link.proto_mismatch = False
        if link.up is not True:
            log.info("peer %s is up", link.address)
        link.up = True
        link.error = None
        if link.needs_pull and not leaving:
            await self.pull(link)

    def _down(self, link: Link, why: str) -> None:
        if link.up is not False or link.error != why:
            log.warning("peer %s: %s", link.address, why)
        link.up = False
        link.error = why
        link.needs_pull = True
        link.cells_acked = None  # it may come back as a new process: all cells next

    def _is_self(self, link: Link, reply: Reply) -> bool:
        if reply.origin == self.origin:
            log.info("peer %s is this instance; skipped", link.address)
            link.is_self = True
            self._table.refresh()
            self._stop_sender(link.address)
            return True
        return False

    async def pull(self, link: Link) -> bool:
        """GET its snapshot and merge it in slices; True when merged."""
        try:
            reply = await self._transport.request(
                link.address,
                "GET",
                SNAPSHOT_PATH,
                self._headers(),
                b"",
                self.options.snapshot_timeout_s,
            )
        except Unreachable as err:
            self._down(link, f"unreachable ({err})")
            return False
        if self._is_self(link, reply):
            return False
        link.origin = reply.origin
        if reply.status == 409:
            link.proto_mismatch = True
            link.error = "incompatible protocol"
            return False
        if reply.status != 200:
            self._down(link, f"snapshot answered {reply.status}")
            return False
        try:
            snapshot = decode_snapshot(
                reply.payload(), source=f"peer {link.address}", proto=self.options.proto
            )
        except ProtoMismatch as err:
            log.error("%s", err)
            link.proto_mismatch = True
            return False
        except WireError as err:
            log.warning("%s", err)
            return False
        entries = await merge_snapshot(self._shared, snapshot)
        link.needs_pull = False
        if link.up is None:
            link.up = True
        log.info(
            "merged the snapshot of peer %s: %d prefix entries, %d usage cells, %d target stats",
            link.address,
            entries,
            len(snapshot.cells),
            len(snapshot.stats),
        )
        return True

    async def tick(self) -> None:
        """One delta to every peer, as the senders do each tick; tests step it by hand."""
        await asyncio.gather(*(self.send(link) for link in self._table.links()))

    # ---- incoming ---------------------------------------------------------------------------

    async def handle(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes
    ) -> Reply:
        """A peer request, whatever carried it; every answer names our origin."""
        if not self._authorized(headers.get("Authorization")):
            return self._reply(401, b'{"error": "peer secret missing or wrong"}')
        if method == "POST" and path == DELTA_PATH:
            return await self._receive_delta(headers, body)
        if method == "GET" and path == SNAPSHOT_PATH:
            return Reply(200, self.origin, b"", tuple(await build_snapshot(self._shared)))
        return self._reply(404, b'{"error": "no such peer endpoint"}')

    def _reply(self, status: int, body: bytes) -> Reply:
        return Reply(status, self.origin, body)

    def _authorized(self, header: str | None) -> bool:
        if header is None:
            return False
        return hmac.compare_digest(header.encode(), self._auth.encode())

    async def _receive_delta(self, headers: Mapping[str, str], body: bytes) -> Reply:
        try:
            delta = decode_delta(body, source="peer delta", proto=self.options.proto)
        except ProtoMismatch as err:
            sender = parse_origin(headers.get(ORIGIN_HEADER))
            if sender is not None:
                remote = self._table.remote(sender)
                if not remote.proto_mismatch:
                    log.error("origin %d: %s", sender, err)
                remote.proto_mismatch = True
            return self._reply(409, f'{{"error": "wire version {err.proto}"}}'.encode())
        except WireError:
            return self._reply(400, b'{"error": "not a Pharos delta"}')
        if delta.origin == self.origin:
            return self._reply(200, b"")
        remote = self._table.remote(delta.origin)
        remote.last_heard_s = self._clock.time()
        remote.proto_mismatch = False
        self._check_fingerprint(delta.origin, remote.fingerprint, delta.fingerprint)
        remote.fingerprint = delta.fingerprint
        shared = self._shared
        shared.usage.merge(delta.cells)
        if delta.leaving:
            remote.left = True
            shared.sched.forget(delta.origin)
        else:
            remote.left = False
            shared.sched.merge(delta.origin, delta.gauges)
        ops = delta.prefix
        for start in range(0, len(ops), OP_SLICE):
            shared.prefix.merge(
                ops[start : start + OP_SLICE], shared.state.target_id_of, shared.state.generation_of
            )
            if start + OP_SLICE < len(ops):
                await asyncio.sleep(0)
        return self._reply(200, b"")

    def _check_fingerprint(self, origin: int, before: int | None, theirs: int) -> None:
        ours = self._fingerprint()
        self._table.fingerprint = ours
        if theirs != ours and theirs != before:
            log.warning(
                "peer origin %d: its static backends, keys or usage zone differ from ours; "
                "the two route and count quotas differently until their configs match",
                origin,
            )

    # ---- lifecycle ----------------------------------------------------------------------------

    async def refresh_members(self) -> None:
        addresses = await self._members.current()
        if addresses is None:
            return
        added, removed = self._table.set_members(addresses)
        for link in removed:
            self._stop_sender(link.address)
        if self._running:
            for link in added:
                self._start_sender(link)

    async def pull_all(self) -> int:
        """At startup: every reachable peer's snapshot, within startup_pull_s overall."""
        await self.refresh_members()
        tasks = [asyncio.create_task(self.pull(link)) for link in self._table.links()]
        if not tasks:
            return 0
        done, pending = await asyncio.wait(tasks, timeout=self.options.startup_pull_s)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        pulled = sum(1 for task in done if not task.cancelled() and task.result() is True)
        if pending:
            log.warning(
                "startup: %d peers did not hand over a snapshot within %.0fs; they are pulled "
                "when they answer",
                len(pending),
                self.options.startup_pull_s,
            )
        return pulled

    def start(self) -> None:
        """Senders for every member, and the DNS re-resolver when membership is dynamic."""
        self._running = True
        for link in self._table.links():
            self._start_sender(link)
        if self._members.dynamic:
            self._membership = asyncio.create_task(self._resolve_loop())

    def _start_sender(self, link: Link) -> None:
        if link.is_self or link.address in self._senders:
            return
        self._senders[link.address] = asyncio.create_task(self._sender(link))

    def _stop_sender(self, address: str) -> None:
        task = self._senders.pop(address, None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    async def _sender(self, link: Link) -> None:
        while True:
            await asyncio.sleep(self.options.tick_s)
            try:
                await self.send(link)
            except Exception:  # a bug here must not end this peer's sender for good
                log.exception("peer %s: sending a delta failed", link.address)

    async def _resolve_loop(self) -> None:
        while True:
            await asyncio.sleep(self.options.dns_every_s)
            try:
                await self.refresh_members()
            except Exception:
                log.exception("peers.dns: resolving failed; keeping the last peer list")

    async def stop(self) -> None:
        self._running = False
        tasks = list(self._senders.values())
        if self._membership is not None:
            tasks.append(self._membership)
        self._senders.clear()
        self._membership = None
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def leave(self) -> None:
        """After the drain: stop the senders, then one last delta marked leaving (with this
        origin's cells) to every peer, bounded by leave_timeout_s."""
        await self.stop()
        links = [link for link in self._table.links() if not link.is_self]
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.options.leave_timeout_s):
                await asyncio.gather(*(self.send(link, leaving=True) for link in links))
