"""Deltas carry only the usage cells changed since the delta a peer acknowledged (spec §11,
§12; peer/node.py): under dropped, late, reordered and repeated deltas the peer never holds
more than the sender counted, is exactly the sender after one answered delta, and a peer that
lost its copy without us noticing is whole again after one refresh interval."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import cast
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from pharos.clock import FakeClock
from pharos.peer.members import Members
from pharos.peer.node import Node, NodeOptions
from pharos.peer.restore import Shared
from pharos.peer.table import PeerTable
from pharos.peer.transport import Reply, Unreachable
from pharos.peer.wire import decode_delta
from pharos.prefix import PrefixIndex
from pharos.sched import Gauges, Scheduler
from pharos.state import State
from pharos.usage import Cell, UsageBook
from tests.peer.snapshots import WALL_S, Targets

SECRET = b"cells-secret"
A, B = "a:8081", "b:8081"
REFRESH_S = 10.0


class Gauged:
    """The part of Scheduler a delta reads and merges (gauges are not under test here)."""

    def export(self) -> Gauges:
        return Gauges()

    def merge(self, origin: int, gauges: Gauges) -> None:
        pass

    def forget(self, origin: int) -> None:
        pass


def shared(clock: FakeClock, origin: int) -> Shared:
    return Shared(
        prefix=PrefixIndex(cap_entries=1_000, clock=clock),
        state=cast(State, Targets()),
        usage=UsageBook(clock, ZoneInfo("UTC"), origin=origin),
        sched=cast(Scheduler, Gauged()),
    )


@dataclass
class Lossy:
    """A's way to B: each request is delivered and answered, dropped, delivered with its answer
    lost, or held back to arrive later (late, out of order, maybe more than once)."""

    receiver: Node | None = None
    fates: list[str] = field(default_factory=list)
    held: list[bytes] = field(default_factory=list)
    sent_cells: list[int] = field(default_factory=list)

    async def request(
        self,
        address: str,  # noqa: ARG002
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: bytes,
        timeout_s: float,  # noqa: ARG002
    ) -> Reply:
        assert self.receiver is not None
        if path != "/peer/delta":  # the snapshot pull after the first answer: let it through
            return await self.receiver.handle(method, path, headers, body)
        self.sent_cells.append(len(decode_delta(body).cells))
        fate = self.fates.pop(0) if self.fates else "ok"
        if fate == "drop":
            raise Unreachable("dropped")
        if fate == "late":
            self.held.append(body)
            raise Unreachable("timed out")
        reply = await self.receiver.handle(method, path, headers, body)
        if fate == "lost_reply":
            raise Unreachable("reply lost")
        return reply

    async def deliver_held(self, index: int) -> None:
        assert self.receiver is not None
        headers = {"Authorization": f"Bearer {SECRET.decode()}"}
        await self.receiver.handle("POST", "/peer/delta", headers, self.held[index])


def node(side: Shared, clock: FakeClock, transport: Lossy, members: tuple[str, ...]) -> Node:
    table = PeerTable()
    table.set_members(members)
    return Node(
        shared=side,
        table=table,
        transport=transport,
        members=Members(members=members),
        secret=SECRET,
        clock=clock,
        fingerprint=lambda: 1,
        options=NodeOptions(cells_refresh_s=REFRESH_S),
    )


Counts = dict[tuple[int, int, str, str], tuple[int, int, int]]


def delta_cells(book: UsageBook, origin: int, wanted: list[Cell]) -> Counts:
    """`book`'s copy of `origin`'s cells in the buckets of `wanted` (what a delta carries)."""
    buckets = {(c.kind, c.bucket) for c in wanted}
    return {
        (c.kind, c.bucket, c.key, c.model): (c.requests, c.prompt_tokens, c.completion_tokens)
        for c in book.held(origin)
        if (c.kind, c.bucket) in buckets
    }


def never_more(sender: Counts, receiver: Counts) -> bool:
    return all(
        cell in sender and all(r <= s for r, s in zip(counts, sender[cell], strict=True))
        for cell, counts in receiver.items()
    )


# event                  | what happens on A's side of the link
# ("count", key, model)  | A serves one reply (admit + record: a Minute and a Day cell change)
# ("tick", fate)         | A sends a delta: answered, dropped, answer lost, or held back
# ("late", n)            | a held-back delta arrives now (late, reordered, maybe again)
# ("advance", s)         | time passes (minutes roll over; Minute cells leave the window)
EVENT = st.one_of(
    st.tuples(st.just("count"), st.integers(0, 3), st.integers(0, 2)),
    st.tuples(st.just("tick"), st.sampled_from(["ok", "drop", "lost_reply", "late"])),
    st.tuples(st.just("late"), st.integers(0, 30)),
    st.tuples(st.just("advance"), st.floats(0.05, 40.0)),
)


async def run(events: list[tuple[object, ...]]) -> tuple[Shared, Shared, Lossy, Node, FakeClock]:
    clock = FakeClock(start_wall=WALL_S)
    a_side, b_side = shared(clock, 1), shared(clock, 2)
    to_b = Lossy()
    a = node(a_side, clock, to_b, (B,))
    to_b.receiver = node(b_side, clock, Lossy(), (A,))
    (link,) = a._table.links()
    for event in events:
        kind = event[0]
        if kind == "count":
            key, model = f"key-{event[1]}", f"model-{event[2]}"
            a_side.usage.admit(key, None)
            a_side.usage.record_reply(key, model, 100, 20, 10)
        elif kind == "tick":
            to_b.fates.append(str(event[1]))
            await a.send(link)
        elif kind == "late" and to_b.held:
            await to_b.deliver_held(int(str(event[1])) % len(to_b.held))
        elif kind == "advance":
            clock.advance(float(str(event[1])))
        wanted = a_side.usage.export_delta()
        sender = delta_cells(a_side.usage, 1, wanted)
        assert never_more(sender, delta_cells(b_side.usage, 1, wanted))
    return a_side, b_side, to_b, a, clock


@settings(max_examples=80, deadline=None)
@given(events=st.lists(EVENT, max_size=40))
def test_a_peer_never_holds_more_and_is_exact_after_one_answered_delta(
    events: list[tuple[object, ...]],
) -> None:
    async def scenario() -> None:
        a_side, b_side, to_b, a, _ = await run(events)
        (link,) = a._table.links()
        await a.send(link)  # one delta that gets through and is answered
        wanted = a_side.usage.export_delta()
        assert delta_cells(b_side.usage, 1, wanted) == delta_cells(a_side.usage, 1, wanted)
        for index in range(len(to_b.held)):  # stragglers arriving afterwards change nothing
            await to_b.deliver_held(index)
        assert delta_cells(b_side.usage, 1, wanted) == delta_cells(a_side.usage, 1, wanted)

    asyncio.run(scenario())


@settings(max_examples=40, deadline=None)
@given(events=st.lists(EVENT, max_size=30))
def test_a_peer_that_lost_its_copy_unnoticed_is_whole_after_one_refresh_interval(
    events: list[tuple[object, ...]],
) -> None:
    async def scenario() -> None:
        a_side, _, to_b, a, clock = await run(events)
        (link,) = a._table.links()
        await a.send(link)
        fresh = shared(clock, 2)  # B restored an old state: same origin, nothing of A's
        to_b.receiver = node(fresh, clock, Lossy(), (A,))
        clock.advance(REFRESH_S + 0.01)
        await a.send(link)
        wanted = a_side.usage.export_delta()
        assert delta_cells(fresh.usage, 1, wanted) == delta_cells(a_side.usage, 1, wanted)

    asyncio.run(scenario())


def test_quiet_ticks_carry_no_cells_until_something_changes_or_the_refresh_is_due() -> None:
    async def scenario() -> None:
        events: list[tuple[object, ...]] = [("count", 0, 0), ("count", 1, 1), ("tick", "ok")]
        a_side, _, to_b, a, clock = await run(events)
        (link,) = a._table.links()
        for _ in range(3):
            clock.advance(0.2)
            await a.send(link)
        a_side.usage.record_reply("key-0", "model-0", 5, 0, 5)
        await a.send(link)
        clock.advance(REFRESH_S)
        await a.send(link)
        # first (full): 2 Day + 2 Minute cells; quiet: none; one reply: its Day cell; refresh
        assert to_b.sent_cells == [4, 0, 0, 0, 1, 4]

    asyncio.run(scenario())
