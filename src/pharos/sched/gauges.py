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
        self._inflight_by_key: dict[str, int] | None = None  # summed since the last change

    def merge(self, origin: int, gauges: Gauges, now: float) -> None:
        last = self._reports.get(origin)
        if last is not None and now - last[1] <= PEER_SILENCE_S and last[0].seq > gauges.seq:
            return
        self._reports[origin] = (gauges, now)
        self._inflight_by_key = None

    @property
    def reporting(self) -> bool:
        """Any origin's report is held (live or not yet found silent)."""
        return bool(self._reports)

    def forget(self, origin: int) -> None:
        if self._reports.pop(origin, None) is not None:
            self._inflight_by_key = None

    def _live(self, now: float) -> list[Gauges]:
        expired = [o for o, (_, at) in self._reports.items() if now - at > PEER_SILENCE_S]
        for origin in expired:
            del self._reports[origin]
        if expired:
            self._inflight_by_key = None
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
        """Live peers' in-flight summed per target key (empty without peers), for the acquire
        to read, never to change: the same dict until a report arrives, leaves or goes silent.
        Summed per acquire it was O(peers x targets): 2 peers of 64 targets 9.0 µs, now 0.7."""
        if not self._reports:
            return {}
        live = self._live(now)
        inflight = self._inflight_by_key
        if inflight is None:
            inflight = {}
            for g in live:
                for key, n in g.inflight.items():
                    if n > 0:
                        inflight[key] = inflight.get(key, 0) + n
            self._inflight_by_key = inflight
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
