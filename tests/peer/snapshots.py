"""Snapshots for property tests, and the state they leave behind once merged."""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast
from zoneinfo import ZoneInfo

from hypothesis import strategies as st

from pharos.clock import FakeClock
from pharos.peer.restore import Shared, merge_snapshot
from pharos.peer.wire import Snapshot, decode_snapshot, encode, encode_entries
from pharos.prefix import ExportedSlot, PrefixEntry, PrefixIndex
from pharos.sched import Scheduler
from pharos.state import State, StatRecord
from pharos.state.registry import TargetRegistry
from pharos.usage import DAY, Cell, UsageBook

TARGETS = ("http://a:1 m", "http://b:1 m", "http://c:1 m")  # three: no slot is ever evicted
WALL_S = 1_790_000_040.0
TODAY = 20_717  # the day of WALL_S in UTC


class Targets:
    """The part of State a snapshot build or merge reads: keys, ids, generations and stats."""

    def __init__(self, keys: Iterable[str] = TARGETS) -> None:
        self.registry = TargetRegistry()
        for key in keys:
            url, model = key.split(" ")
            self.registry.register(url, model, model)

    def target_id_of(self, key: str) -> int | None:
        return self.registry.id_of(key)

    def key_of(self, target_id: int) -> str | None:
        record = self.registry.get(target_id)
        return None if record is None else record.key

    def generation_of(self, target_id: int) -> int | None:
        record = self.registry.get(target_id)
        return None if record is None else record.generation

    def restore_stats(self, records: list[StatRecord]) -> None:
        self.registry.restore(records)

    def export_stats(self) -> list[StatRecord]:
        return self.registry.export()


def shared() -> Shared:
    clock = FakeClock(start_wall=WALL_S)
    usage = UsageBook(clock, ZoneInfo("UTC"), origin=1)
    return Shared(
        prefix=PrefixIndex(cap_entries=10_000, clock=clock),
        state=cast(State, Targets()),
        usage=usage,
        sched=cast(Scheduler, None),
    )


async def merged_state(snapshots: list[bytes]) -> tuple[object, ...]:
    into = shared()
    for data in snapshots:
        await merge_snapshot(into, decode_snapshot(data))
    entries = {
        (entry.hash, frozenset((s.target_key, round(s.last_used_s, 3)) for s in entry.slots))
        for entry in into.prefix.export(into.state.key_of)
    }
    cells = sorted((c.id, c.requests, c.prompt_tokens) for c in into.usage.export_snapshot())
    stats = sorted((r.key, r.load_s) for r in into.state.export_stats())
    return frozenset(entries), tuple(cells), tuple(stats)


slots_st = st.lists(
    st.builds(
        ExportedSlot,
        target_key=st.sampled_from(TARGETS),
        last_used_s=st.integers(0, 1000).map(lambda s: WALL_S - 2000 + s),
    ),
    min_size=1,
    max_size=3,
    unique_by=lambda s: s.target_key,
)
entry_st = st.builds(PrefixEntry, hash=st.integers(0, 40), slots=slots_st)
cell_st = st.builds(
    Cell,
    origin=st.integers(1, 3),
    kind=st.just(DAY),
    bucket=st.integers(TODAY - 2, TODAY),
    key=st.sampled_from(["alice", "bob"]),
    model=st.just("m"),
    requests=st.integers(0, 50),
    prompt_tokens=st.integers(0, 5000),
)
stat_st = st.builds(
    StatRecord,
    key=st.sampled_from(TARGETS),
    load_s=st.one_of(st.none(), st.floats(0.0, 30.0)),
)


@st.composite
def snapshot_bytes(draw: st.DrawFn) -> bytes:
    entries = draw(st.lists(entry_st, max_size=12, unique_by=lambda e: e.hash))
    legacy = draw(st.booleans())
    return encode(
        Snapshot(
            prefix=entries if legacy else [],
            prefix_slices=[] if legacy or not entries else [encode_entries(entries)],
            cells=draw(st.lists(cell_st, max_size=6)),
            stats=draw(st.lists(stat_st, max_size=3)),
        )
    )


snapshots_st = st.lists(snapshot_bytes(), max_size=4)
