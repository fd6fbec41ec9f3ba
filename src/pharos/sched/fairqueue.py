"""Weighted deficit round-robin across keys, FIFO within a key (spec §8 "Fair queue").

A key keeps its turn until it has had as many grants as its weight, also when
slots free one at a time. A key that had no waiter able to take a free slot
passes its turn to the next key that has one.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class Waiter(Generic[T]):
    """One queued request; the future receives its grant (or its failure)."""

    __slots__ = ("enqueued_at", "future", "key", "model", "payload", "side_call")

    def __init__(
        self,
        key: str,
        model: str,
        payload: T,
        future: asyncio.Future[object],
        enqueued_at: float,
        side_call: bool = False,
    ) -> None:
        self.key = key
        self.model = model
        self.payload = payload
        self.future = future
        self.enqueued_at = enqueued_at
        self.side_call = side_call  # judged when it arrived, as its lease's release is


class _KeyQueue(Generic[T]):
    __slots__ = ("waiters", "weight")

    def __init__(self, weight: int) -> None:
        self.weight = weight
        self.waiters: deque[Waiter[T]] = deque()


class FairQueue(Generic[T]):
    def __init__(self) -> None:
        self._keys: OrderedDict[str, _KeyQueue[T]] = OrderedDict()  # first: the key with the turn
        self._turn_grants = 0
        self._by_model: dict[str, int] = {}
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def waiting_for(self, model: str) -> int:
        return self._by_model.get(model, 0)

    def waiting_by_model(self) -> dict[str, int]:
        return dict(self._by_model)

    def push(self, waiter: Waiter[T], weight: int, *, front: bool = False) -> None:
        queue = self._keys.get(waiter.key)
        if queue is None:
            queue = self._keys[waiter.key] = _KeyQueue(max(1, weight))
        else:
            queue.weight = max(1, weight)
        if front:
            queue.waiters.appendleft(waiter)
        else:
            queue.waiters.append(waiter)
        self._by_model[waiter.model] = self._by_model.get(waiter.model, 0) + 1
        self._size += 1

    def remove(self, waiter: Waiter[T]) -> bool:
        """Take a waiter out without a grant (cancelled or failed). False if it was not queued."""
        queue = self._keys.get(waiter.key)
        if queue is None:
            return False
        try:
            queue.waiters.remove(waiter)
        except ValueError:
            return False
        self._forget(waiter, queue)
        return True

    def grant(self, waiter: Waiter[T]) -> None:
        """The waiter got a slot: take it out and charge its key's turn."""
        queue = self._keys[waiter.key]
        first = next(iter(self._keys))
        if first != waiter.key:
            for key in list(self._keys):  # keys before it passed their turn
                if key == waiter.key:
                    break
                self._keys.move_to_end(key)
            self._turn_grants = 0
        queue.waiters.remove(waiter)
        self._turn_grants += 1
        if queue.waiters and self._turn_grants >= queue.weight:
            self._keys.move_to_end(waiter.key)
            self._turn_grants = 0
        self._forget(waiter, queue)

    def _forget(self, waiter: Waiter[T], queue: _KeyQueue[T]) -> None:
        left = self._by_model[waiter.model] - 1
        if left:
            self._by_model[waiter.model] = left
        else:
            del self._by_model[waiter.model]
        self._size -= 1
        if not queue.waiters:
            was_first = next(iter(self._keys)) == waiter.key
            del self._keys[waiter.key]
            if was_first:
                self._turn_grants = 0

    def attempt_order(self, blocked_models: set[str]) -> Iterator[Waiter[T]]:
        """Waiters to offer a slot to, in turn order: per key, the first waiter of each model.

        Models in `blocked_models` (no free slot anywhere) are skipped; the caller may add to the
        set while iterating. Stop iterating after a grant: the order changes.
        """
        for queue in list(self._keys.values()):
            seen: set[str] = set()
            for waiter in list(queue.waiters):
                model = waiter.model
                if model in seen or model in blocked_models or waiter.future.done():
                    continue
                seen.add(model)
                yield waiter

    def take_expired(self, enqueued_by: float) -> list[Waiter[T]]:
        """Remove and return every waiter enqueued at or before `enqueued_by` (its wait bound
        passed). A retry is queued at the front with its own, later time, so every waiter
        is looked at: at most the queue limit (1000) each time a bound may have passed."""
        expired = [w for w in self.waiters() if w.enqueued_at <= enqueued_by]
        for waiter in expired:
            self.remove(waiter)
        return expired

    def oldest_enqueued_at(self) -> float | None:
        return min((w.enqueued_at for w in self.waiters()), default=None)

    def waiters(self) -> Iterator[Waiter[T]]:
        for queue in self._keys.values():
            yield from queue.waiters
