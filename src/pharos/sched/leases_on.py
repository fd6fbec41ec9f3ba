"""Leases of one kind in flight, each on its target, counted per target: a shared key's new
conversations (held_affinity.KeyHomes) and requests sent into an engine's own queue
(engine_joins.EngineQueueJoins)."""

from __future__ import annotations


class LeasesOn:
    __slots__ = ("_on", "_target_of")

    def __init__(self) -> None:
        self._target_of: dict[object, int] = {}
        self._on: dict[int, int] = {}

    def add(self, lease: object, target_id: int) -> None:
        self._target_of[lease] = target_id
        self._on[target_id] = self._on.get(target_id, 0) + 1

    def remove(self, lease: object) -> int:
        """The target `lease` was counted on, no longer counted; -1 if it never was."""
        if not self._target_of:
            return -1
        target_id = self._target_of.pop(lease, -1)
        if target_id < 0:
            return -1
        left = self._on[target_id] - 1
        if left > 0:
            self._on[target_id] = left
        else:
            del self._on[target_id]
        return target_id

    def count(self, target_id: int) -> int:
        return self._on.get(target_id, 0)

    def counts(self) -> dict[int, int]:
        """A copy: per target, the leases on it."""
        return dict(self._on)

    def target_of(self, lease: object) -> int:
        return self._target_of[lease]
