"""When the prefills of our requests in flight are expected to end, per target (issue 15).

A target's slots can't free before the prefill of every request holding them is done. The
policy's wait prices a busy target at (ahead + 1) / (capacity + 1) of one learned service
time, an average: where near-prefill-only calls (classifiers, max_tokens 1) make most of the
replies, it is a fraction of a second, and a classifier call queued for its cached target
while both slots held cold 14k-token agent prefills with ~30 s to go (agents seed 3: two calls
waited 34 s, a chat turn 23 s, beside a free slot on the other engine). The prefill each
request was dispatched with is known from the request itself (its estimated prompt tokens
and the prefix match its target held), so the earliest of those ends bounds the wait there
from below (Candidate.slots_busy_s). Agents, seeds 1-5: 3 -> 0 comparisons lost, seed 3's
TTFT p99 26.57 -> 3.98 s.

Not for a side call (sent within SIDE_CALL_GAP_S of its key's last reply): it is the one request
charged for the conversation it would push out of a slot, and with the bound its wait outweighed
that charge (webui seed 2 at 301 s: a tags call took a chat's slot and the chat's next turn
prefilled whole, 0.41 -> 3.05 s; that seed's hit 61.3 -> 54.6%).
"""

from __future__ import annotations

from typing import Final

NO_BOUND: Final = -1.0


def prefill_estimate_s(
    prompt_tokens: int, matched_tokens: int, prefill_s_per_token: float | None, fallback: float
) -> float:
    """The uncached prompt's prefill at the target's learned speed (the fallback when unknown)."""
    matched = min(max(matched_tokens, 0), prompt_tokens)
    per_token = fallback if prefill_s_per_token is None else prefill_s_per_token
    return (prompt_tokens - matched) * per_token


class PrefillsInFlight:
    """Per target, each of our leases' expected prefill end (monotonic s), by lease."""

    __slots__ = ("_ends",)

    def __init__(self) -> None:
        self._ends: dict[int, dict[object, float]] = {}

    def __bool__(self) -> bool:
        return bool(self._ends)

    def start(self, target_id: int, lease: object, ends_at: float) -> None:
        ends = self._ends.get(target_id)
        if ends is None:
            ends = self._ends[target_id] = {}
        ends[lease] = ends_at

    def finish(self, target_id: int, lease: object) -> None:
        ends = self._ends.get(target_id)
        if ends is None:
            return
        ends.pop(lease, None)
        if not ends:
            del self._ends[target_id]

    def running_for_s(self, target_id: int, now: float) -> float:
        """How long our prefills in flight on the target are expected to go on (0: none is):
        what a prompt sent there now waits for inside the engine, since llama-server computes
        one batch at a time and a prompt that arrives during one joins the next
        (tests/captures/engines/llamacpp/b11312/beside_decode.json)."""
        ends = self._ends.get(target_id)
        if ends is None:
            return 0.0
        latest = max(ends.values())
        return latest - now if latest > now else 0.0

    def busy_for_s(self, target_id: int, occupied: int, now: float) -> float:
        """How long, at least, before a slot of the target frees: until the earliest expected
        prefill end of ours there. NO_BOUND when some occupied slot is not ours (a peer's, a
        client's that bypasses us: it may free at any moment) or none is."""
        ends = self._ends.get(target_id)
        if ends is None or occupied <= 0 or len(ends) < occupied:
            return NO_BOUND
        earliest = min(ends.values())
        return earliest - now if earliest > now else 0.0
