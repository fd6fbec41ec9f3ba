"""Peers' in-flight and waiter counts (spec §8 "Gauges for peers", §12).

Per origin the latest report replaces the previous one, and a report counts
until its origin has been silent for 2 s.
"""

from __future__ import annotations

import msgspec

PEER_SILENCE_S = 2.0


class Gauges(msgspec.Struct, frozen=True):
    """One origin's full current counts, sent every peer tick."""

    inflight: dict[str, int] = msgspec.field(default_factory=dict)  # target key -> requests
    waiting: dict[str, int] = msgspec.field(default_factory=dict)  # model -> waiters
    seq: int = 0  # increases per export; a reordered older report never replaces a newer one


class PeerGauges:
    """The last live report of every origin."""

    def __init__(self) -> None:
        self._reports: dict[int, tuple[Gauges, float]] = {}

    def merge(self, origin: int, gauges: Gauges, now: float) -> None:
        last = self._reports.get(origin)
        if last is not None and now - last[1] <= PEER_SILENCE_S and last[0].seq > gauges.seq:
            return
        self._reports[origin] = (gauges, now)

    def forget(self, origin: int) -> None:
        self._reports.pop(origin, None)

    def _live(self, now: float) -> list[Gauges]:
        expired = [o for o, (_, at) in self._reports.items() if now - at > PEER_SILENCE_S]
        for origin in expired:
            del self._reports[origin]
        return [g for g, _ in self._reports.values()]

    def inflight(self, target_key: str, now: float) -> int:
        if not self._reports:
            return 0
        return sum(max(0, g.inflight.get(target_key, 0)) for g in self._live(now))

    def waiting(self, model: str, now: float) -> int:
        if not self._reports:
            return 0
        return sum(max(0, g.waiting.get(model, 0)) for g in self._live(now))

    def inflight_by_key(self, now: float) -> dict[str, int]:
        """Live peers' in-flight summed per target key (a fresh dict; empty without peers)."""
        if not self._reports:
            return {}
        inflight: dict[str, int] = {}
        for g in self._live(now):
            for key, n in g.inflight.items():
                if n > 0:
                    inflight[key] = inflight.get(key, 0) + n
        return inflight

    def totals(self, now: float) -> Gauges:
        """Every live origin's counts summed: what routing counts from peers right now."""
        inflight: dict[str, int] = {}
        waiting: dict[str, int] = {}
        for g in self._live(now):
            for key, n in g.inflight.items():
                inflight[key] = inflight.get(key, 0) + max(0, n)
            for model, n in g.waiting.items():
                waiting[model] = waiting.get(model, 0) + max(0, n)
        return Gauges(inflight=inflight, waiting=waiting)

    def origins(self, now: float) -> frozenset[int]:
        self._live(now)
        return frozenset(self._reports)
