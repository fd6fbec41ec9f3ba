"""Pre-emptive warming: load a model on a second host before a request has to pay for it
(spec §16, "Should a cold target ever be chosen pre-emptively").

On a scrape round, per model: when every warm (or loading) replica's slots are taken,
requests wait, and a cold host holds the model without unloading anything busy, the router
sends that host a one-token request for the model (a request loads a cold model) if the
waiters' summed wait drops by more than the warm-up charges others. The waiters then see a
loading target, its load paid, and join it. `warm_choice` is the decision, a pure function;
`Warmer` runs it and holds at most one warm-up per target.

Measured in the simulator and not wired into `serve`, so it lives here, beside the simulator's
routers that call it, and not in sched/: on top of the cost policy's own second
replica (a request that would queue loads one on a host with room) it fires only where it
must unload an idle model, and there it trades the chats' tail for the burst's (docs/routing-log.md,
"Pre-emptive warming": cold-burst, 10 seeds, 10 burst users: burst p95 17.36 -> 12.41 s,
chat p95 0.86 -> 4.43 s, comparisons lost 5 -> 15).
"""

from __future__ import annotations

import asyncio
import heapq
import random
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from pharos.clock import Clock
from pharos.engine.types import Residency
from pharos.policy import DEFAULT_CONFIG, Candidate, PolicyConfig
from pharos.policy.estimate import fallbacks
from pharos.sched.candidates import build_candidates, usable_views
from pharos.sched.fits import FitsIfCold
from pharos.sched.lease import Lease
from pharos.sched.scheduler import DEFAULT_CAPACITY, Scheduler
from pharos.sched.types import Feedback, RouteRequest, TargetSource
from pharos.state.view import TargetView

_INF = float("inf")
WARM_KEY = "pharos-warm-up"
"""The key warm-ups acquire their lease under (never a client's)."""
DEFAULT_WARM_TIMEOUT_S = 120.0
"""A warm-up that hasn't answered by then is abandoned (a load of a large model takes a
minute or two; an engine that hangs must not hold the warm-up's slot forever)."""
ACQUIRE_BOUND_S = 1.0
"""The decision saw a free cold target: a warm-up the pick would queue instead gives up
rather than wait in the fair queue beside clients' requests (where it would count as one)."""


@dataclass(frozen=True)
class WarmChoice:
    target_id: int
    saved_s: float  # the waiters' summed wait the new replica saves
    charged_s: float  # what it costs others: the reload of the idle model it unloads, or 0


def queue_wait_s(slot_free_at_s: Iterable[float], waiting: int, service_s: float) -> float:
    """The summed wait of `waiting` requests served in order, each on the slot that frees
    first, each taking `service_s`: a FIFO queue over slots that free at the given times."""
    heap = sorted(slot_free_at_s)
    if not heap:
        return _INF
    total = 0.0
    for _ in range(waiting):
        start = heapq.heappop(heap)
        total += start
        heapq.heappush(heap, start + service_s)
    return total


def warm_choice(
    candidates: Sequence[Candidate],
    router_waiting: int,
    loading_for_s: Mapping[int, float] | None = None,
    config: PolicyConfig = DEFAULT_CONFIG,
    *,
    may_unload: frozenset[int] | None = None,
    reload_loads: float = 1.0,
) -> WarmChoice | None:
    """The cold target to warm for a model, or None.

    `candidates`: the model's targets as the policy sees them; `router_waiting`: requests for
    the model in the fair queue (all instances); `loading_for_s`: how long each loading target
    has been seen loading (its remaining load is the load estimate minus that). Replicas are
    the warm and loading targets. None unless every replica's slots are taken, someone waits,
    and a cold target fits without unloading anything busy (fits_if_cold True).

    Warm when the waiters' summed wait, served FIFO on the replicas' slots (a warm slot frees
    in half a service time, a loading one after its remaining load and a service time), drops
    by more than the warm-up charges others: nothing when the host holds the model beside
    everything it has loaded, else the unloaded model's reload (`reload_loads` loads; only
    cold targets in `may_unload` may unload an idle model, when it is given). Not the cost
    policy's per-request comparison: a single waiter never pays a load to save a shorter wait,
    but a queue of them can (cold-burst: six requests behind one loading replica).
    """
    if router_waiting <= 0:
        return None
    replicas: list[Candidate] = []
    cold: list[Candidate] = []
    for c in candidates:
        if c.warm is False and not c.loading:
            if c.fits_if_cold is True and (
                not c.evicts_loaded or may_unload is None or c.target_id in may_unload
            ):
                cold.append(c)
        else:
            replicas.append(c)
            if c.free_slots > 0:
                return None  # the queue drains onto it at the next kick
    if not replicas or not cold:
        return None  # nothing serves it yet: the first request's pick pays the load
    fb = fallbacks(list(candidates), config)
    waiting = router_waiting
    services: list[float] = []
    for c in replicas:
        if c.queue_ahead > router_waiting:
            waiting += c.queue_ahead - router_waiting  # the engine's own waiters
        services.append(fb.service_s if c.service_s is None else c.service_s)
    service_s = sum(services) / len(services)
    free_at_s: list[float] = []
    for c in replicas:
        capacity = c.capacity if c.capacity > 0 else 1
        if c.loading:
            load_s = fb.load_s if c.load_s is None else c.load_s
            seen_s = 0.0 if loading_for_s is None else loading_for_s.get(c.target_id, 0.0)
            free_at_s += [max(0.0, load_s - seen_s) + service_s] * capacity
        else:
            free_at_s += [service_s / 2] * capacity
    without_s = queue_wait_s(free_at_s, waiting, service_s)
    best: WarmChoice | None = None
    for c in cold:
        load_s = fb.load_s if c.load_s is None else c.load_s
        capacity = c.capacity if c.capacity > 0 else 1
        saved_s = without_s - queue_wait_s(free_at_s + [load_s] * capacity, waiting, service_s)
        charged_s = reload_loads * load_s if c.evicts_loaded else 0.0
        if saved_s > charged_s and (
            best is None or saved_s - charged_s > best.saved_s - best.charged_s
        ):
            best = WarmChoice(c.target_id, saved_s, charged_s)
    return best


def warm_candidates(
    views: Sequence[TargetView],
    targets: TargetSource,
    sched: Scheduler,
    now: float,
    *,
    router_waiting: int,
    default_capacity: int = DEFAULT_CAPACITY,
) -> list[Candidate]:
    """The model's usable targets as candidates, occupancy from the scheduler's in-flight
    counts (ours and live peers'), for `warm_choice`. No prefix matches: warming is per
    model, not per prompt."""
    inflight: dict[int, int] = {}
    peer_inflight: dict[str, int] = {}
    backends = {view.backend_url for view in views}
    for backend_url in backends:
        for view in targets.targets_of_backend(backend_url, now):
            inflight[view.target_id] = sched.inflight(view.target_id)
    totals = sched.peer_totals()
    if totals.inflight:
        peer_inflight = dict(totals.inflight)
    fits_of = FitsIfCold(
        targets.targets_of_backend,
        now,
        local_inflight=inflight,
        peer_inflight=peer_inflight,
        last_reply_end={},
    )
    candidates, _ = build_candidates(
        list(views),
        local_inflight=inflight,
        peer_inflight=peer_inflight,
        last_reply_end={},
        router_waiting=router_waiting,
        matches={},
        default_capacity=default_capacity,
        fits_of=fits_of,
        free_fit_of=fits_of,
    )
    return candidates


WarmSend = Callable[[TargetView], Awaitable[Feedback]]
"""Sends the warm-up (a one-token request for the view's served model) to its backend."""


class Warmer:
    """Runs `warm_choice` for each model on a scrape round and sends the warm-ups, at most one
    per target at a time, each bounded by `timeout_s`, none while draining.

    A warm-up holds a control lease on its target (never learned from), so the scheduler
    counts the target as loading at once and the waiters join it rather than load another.
    `unload_spare_only`: a warm-up may unload only idle models that keep a free slot on
    another replica, with nobody waiting for them."""

    def __init__(
        self,
        targets: TargetSource,
        sched: Scheduler,
        clock: Clock,
        send: WarmSend,
        *,
        config: PolicyConfig = DEFAULT_CONFIG,
        timeout_s: float = DEFAULT_WARM_TIMEOUT_S,
        default_capacity: int = DEFAULT_CAPACITY,
        seed: int = 0,
        reload_loads: float = 1.0,
        unload_spare_only: bool = False,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        self._reload_loads = reload_loads
        self._unload_spare_only = unload_spare_only
        self._targets = targets
        self._sched = sched
        self._clock = clock
        self._send = send
        self._config = config
        self._timeout_s = timeout_s
        self._default_capacity = default_capacity
        self._rng = random.Random(seed)
        self._warming: dict[int, asyncio.Task[None]] = {}
        self._loading_since: dict[int, float] = {}  # target id -> first round seen loading
        self._draining = False
        self.sent = 0  # warm-ups started, for tests and the simulator's report
        self.failed = 0  # of them: timed out, refused or the engine unreachable

    @property
    def warming(self) -> frozenset[int]:
        """Target ids with a warm-up in flight."""
        return frozenset(self._warming)

    def drain(self) -> None:
        """No new warm-ups; those in flight finish or time out."""
        self._draining = True

    def round(self, models: Iterable[str]) -> list[WarmChoice]:
        """One scrape round: the warm-ups started now."""
        if self._draining:
            return []
        now = self._clock.now()
        started: list[WarmChoice] = []
        for model in models:
            views = usable_views(self._targets.targets_for_model(model, now), frozenset())
            if len(views) < 2:
                continue
            waiting = self._sched.waiting_for(model)
            waiting += self._sched.peer_totals().waiting.get(model, 0)
            candidates = warm_candidates(
                views,
                self._targets,
                self._sched,
                now,
                router_waiting=waiting,
                default_capacity=self._default_capacity,
            )
            loading_for_s = self._loading_for(candidates, now)
            may_unload = (
                self._spare_hosts(candidates, views, now) if self._unload_spare_only else None
            )
            choice = warm_choice(
                candidates,
                waiting,
                loading_for_s,
                self._config,
                may_unload=may_unload,
                reload_loads=self._reload_loads,
            )
            if choice is None or choice.target_id in self._warming:
                continue
            others = frozenset(v.target_id for v in views if v.target_id != choice.target_id)
            request = RouteRequest(
                model, 1, None, self._rng.getrandbits(64), exclude_target_ids=others, control=True
            )
            task = asyncio.get_running_loop().create_task(self._warm(choice.target_id, request))
            self._warming[choice.target_id] = task
            self.sent += 1
            started.append(choice)
        return started

    def _spare_hosts(
        self, candidates: Sequence[Candidate], views: Sequence[TargetView], now: float
    ) -> frozenset[int]:
        """The cold targets whose load unloads only models that have a free slot on another
        replica and nobody waiting for them: the unloaded replica's traffic has room."""
        ok: set[int] = set()
        for c, view in zip(candidates, views, strict=True):
            if not (c.warm is False and not c.loading and c.evicts_loaded):
                continue
            spare = True
            for other in self._targets.targets_of_backend(view.backend_url, now):
                if other.target_id == view.target_id or other.residency is not Residency.LOADED:
                    continue
                if self._sched.inflight_cluster(other.target_id, other.key) > 0:
                    continue
                if not self._has_room_elsewhere(other, now):
                    spare = False
                    break
            if spare:
                ok.add(c.target_id)
        return frozenset(ok)

    def _has_room_elsewhere(self, unloaded: TargetView, now: float) -> bool:
        if self._sched.waiting_for(unloaded.model) > 0:
            return False
        for view in self._targets.targets_for_model(unloaded.model, now):
            if view.target_id == unloaded.target_id or not view.up or view.draining:
                continue
            if view.residency not in (Residency.LOADED, Residency.UNKNOWN):
                continue
            capacity = view.capacity or view.config_capacity or self._default_capacity
            if self._sched.inflight_cluster(view.target_id, view.key) < capacity:
                return True
        return False

    def _loading_for(self, candidates: Sequence[Candidate], now: float) -> dict[int, float]:
        """How long each loading candidate has been seen loading; others are forgotten."""
        loading_for_s: dict[int, float] = {}
        for c in candidates:
            if c.warm is False and c.loading:
                since = self._loading_since.setdefault(c.target_id, now)
                loading_for_s[c.target_id] = now - since
            else:
                self._loading_since.pop(c.target_id, None)
        return loading_for_s

    async def _warm(self, target_id: int, request: RouteRequest) -> None:
        try:
            await asyncio.wait_for(self._lease_and_send(request), self._timeout_s)
        except Exception:  # timed out (TimeoutError), refused (SchedError), unreachable
            self.failed += 1  # the load may still finish; the next round sees its residency
        finally:
            self._warming.pop(target_id, None)

    async def _lease_and_send(self, request: RouteRequest) -> None:
        lease: Lease = await asyncio.wait_for(
            self._sched.acquire(WARM_KEY, 1, request), ACQUIRE_BOUND_S
        )
        try:
            feedback = await self._send(lease.target)
        except BaseException:
            lease.abandon()
            raise
        lease.release(feedback)
