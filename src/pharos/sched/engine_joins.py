"""Requests sent into a full engine's own queue (issue 15, noisy).

When the pick's target is full and its fresh scrape shows every slot running with no lease of
ours in one, each slot is held by traffic Pharos doesn't see, and the engine hands the next slot
that frees to the first request in its own queue. The router sees that slot only at the next
scrape (1 s), and a client that sends again 0.5-2 s after its reply has taken it by then (noisy
seed 8 at 230 s: a follow-up waited 27 s in the router for e0, where the engine's queue would
have served it in 11 s). noisy, seeds 1-20, tie streams 0-3: 222 -> 158 comparisons lost
(docs/routing-log.md, "A full engine's own queue").

At most a slot's worth joins between two scrapes (the scrape's Waiting and ours sent since): the
router's queue is fair across keys and bounded in time, and never empties into an engine's FIFO
on one scrape's word.
"""

from __future__ import annotations

from pharos.sched.gauges import PeerGauges
from pharos.sched.leases_on import LeasesOn
from pharos.state.view import TargetView


class EngineQueueJoins:
    """Our leases sent into a target's engine queue and not yet released, with when each went."""

    __slots__ = ("_joined", "_sent_at")

    def __init__(self) -> None:
        self._joined = LeasesOn()
        self._sent_at: dict[object, float] = {}

    def count(self, target_id: int) -> int:
        return self._joined.count(target_id)

    def queue_room(
        self,
        target_id: int,
        capacity: int,
        waiting: int | None,
        scraped_at: float | None,
    ) -> bool:
        """Under a slot's worth queued in the engine: the scrape's Waiting (unknown: none) and
        ours sent there since that scrape, which it could not have counted."""
        queued = 0 if waiting is None else waiting
        if self._joined.count(target_id) > 0:
            for lease, sent_at in self._sent_at.items():
                if self._joined.target_of(lease) == target_id and (
                    scraped_at is None or sent_at >= scraped_at
                ):
                    queued += 1
        return queued < capacity

    def sent(self, lease: object, target_id: int, now: float) -> None:
        self._joined.add(lease, target_id)
        self._sent_at[lease] = now

    def released(self, lease: object) -> None:
        """`lease` ended; a lease that never joined an engine's queue is no change."""
        if self._joined.remove(lease) >= 0:
            del self._sent_at[lease]


def joins_engine_queue(
    joins: EngineQueueJoins,
    view: TargetView,
    now: float,
    local: dict[int, int],
    peers: PeerGauges,
    last_reply_end: dict[int, float],
) -> bool:
    """Send into a full engine's own queue: its fresh scrape shows every slot running and no
    lease of ours (`local`, nor a live peer's) took one of them, and under a slot's worth waits
    in the engine."""
    running = view.running
    capacity = view.capacity
    if running is None or capacity is None or running < capacity:
        return False
    target_id = view.target_id
    scraped_at = view.last_fast_scrape_at
    if not joins.queue_room(target_id, capacity, view.waiting, scraped_at):
        return False  # a slot's worth queued in the engine: our waiters keep their choice
    if local.get(target_id, 0) > joins.count(target_id):
        return False  # a lease of ours holds a slot: its release frees one we see at once
    if peers.reporting and peers.inflight(view.key, now) > 0:
        return False  # a peer's lease may hold one: its report comes within 200 ms
    ended_at = last_reply_end.get(target_id)
    return ended_at is None or (scraped_at is not None and ended_at < scraped_at)
