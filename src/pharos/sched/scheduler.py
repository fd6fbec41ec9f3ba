"""Admission, in-flight counts and the fair queue (spec §8).

Picking a target and taking its slot happen in one synchronous step (no await
between them), which the event loop makes atomic.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from pharos.clock import Clock
from pharos.policy import DEFAULT_CONFIG, POLICIES, Candidate, Decision, PolicyConfig, RouteReq
from pharos.prefix import Match, PrefixOp
from pharos.sched.candidates import (
    Generations,
    build_candidates,
    index_of,
    unseen_requests,
    usable_views,
)
from pharos.sched.engine_joins import EngineQueueJoins, joins_engine_queue
from pharos.sched.fairqueue import FairQueue, Waiter
from pharos.sched.fits import FitsIfCold, never_fits
from pharos.sched.gauges import Gauges, PeerGauges
from pharos.sched.held_affinity import KeyHomes, UnseenPeaks, is_new_conversation
from pharos.sched.lease import Lease
from pharos.sched.prefills import PrefillsInFlight, prefill_estimate_s
from pharos.sched.replies import with_reply_credited
from pharos.sched.reply_learner import ReplyLearner
from pharos.sched.side_calls import is_side_call
from pharos.sched.types import (
    Feedback,
    PrefixStore,
    QueueFull,
    QueueTimeout,
    RouteRequest,
    TargetSource,
    Unavailable,
    UnknownModel,
)

DEFAULT_QUEUE_LIMIT = 1000
DEFAULT_CAPACITY = 2
DEFAULT_QUEUE_WAIT_S = 600.0
"""limits.queue_wait: long enough for a cold load of a large model (minutes), not forever."""
_TIMER_SLACK_S = 0.01  # the loop's timer may fire a hair before the clock reaches the bound


class Scheduler:
    def __init__(
        self,
        targets: TargetSource,
        prefix: PrefixStore,
        clock: Clock,
        *,
        policy: str = "cost",
        queue_limit: int = DEFAULT_QUEUE_LIMIT,
        default_capacity: int = DEFAULT_CAPACITY,
        on_prefix_op: Callable[[PrefixOp], None] | None = None,
        policy_config: PolicyConfig = DEFAULT_CONFIG,
        queue_wait_s: float = DEFAULT_QUEUE_WAIT_S,
    ) -> None:
        pick = POLICIES.get(policy)
        if pick is None:
            raise ValueError(f"policy: unknown {policy!r}, expected one of {sorted(POLICIES)}")
        if queue_limit < 0:
            raise ValueError(f"queue_limit must be >= 0, got {queue_limit}")
        if queue_wait_s <= 0:
            raise ValueError(f"queue_wait_s must be > 0, got {queue_wait_s}")
        if default_capacity < 1:
            raise ValueError(f"default_capacity must be >= 1, got {default_capacity}")
        self._pick = pick
        self._policy_config = policy_config
        self._targets = targets
        self._prefix = prefix
        self._clock = clock
        self._queue_limit = queue_limit
        self._queue_wait_s = queue_wait_s
        self._next_expiry: float | None = None  # earliest time a waiter's bound passes
        self._default_capacity = default_capacity
        self._local: dict[int, int] = {}  # target id -> our leases
        self._keys: dict[int, str] = {}  # target id -> target key, for export
        self._homes = KeyHomes()
        self._unseen = UnseenPeaks()
        self._replies = ReplyLearner(targets, prefix, clock, self._homes, on_prefix_op)
        self._candidates: dict[str, list[Candidate]] = {}  # per model: the last pick's, reused
        self._peers = PeerGauges()
        self._prefills = PrefillsInFlight()
        self._joins = EngineQueueJoins()
        # a waiter's request and the decision it queued by (its reason says what was expected)
        self._queue: FairQueue[tuple[RouteRequest, Decision | None]] = FairQueue()
        self._serving = False
        self._serve_again = False
        self._seq = 0

    # ---- admission ------------------------------------------------------------------------

    async def acquire(self, key: str, weight: int, request: RouteRequest) -> Lease:
        """A lease on the best target, at once or after waiting in the fair queue.

        Raises UnknownModel / Unavailable when no up backend serves the model, QueueFull when
        the queue is at its bound. Cancellation while waiting leaves the queue.
        """
        if self._queue.waiting_for(request.model):
            self._serve()  # a slot the engine freed since the last kick goes to waiters first
        now = self._clock.now()
        side_call = self._is_side_call(key, now, request)
        if side_call:
            self._homes.side_call_from(key)
        lease, _, queued_by = self._try(
            request, now, key, queued_since=None, side_call=side_call, sent_as_side_call=side_call
        )
        if lease is not None:
            return lease
        if len(self._queue) >= self._queue_limit:
            raise QueueFull(f"{len(self._queue)} requests are already waiting")
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        size = -1 if request.retry else request.prompt_tokens
        waiter: Waiter[tuple[RouteRequest, Decision | None]] = Waiter(
            key, request.model, (request, queued_by), future, now, side_call, size
        )
        self._queue.push(waiter, weight, front=request.retry)
        expiry = now + self._queue_wait_s
        if self._next_expiry is None or expiry < self._next_expiry:
            self._next_expiry = expiry
        # The bound is judged by the injected clock in _serve; this timer only makes sure
        # _serve runs then even if no scrape round or release kicks the queue.
        timer = asyncio.get_running_loop().call_later(
            self._queue_wait_s + _TIMER_SLACK_S, self._serve
        )
        try:
            granted = await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled() and future.exception() is None:
                result = future.result()
                if isinstance(result, Lease):
                    result.abandon()
            else:
                self._queue.remove(waiter)
            raise
        finally:
            timer.cancel()
        assert isinstance(granted, Lease)
        return granted

    def _is_side_call(self, key: str, sent_at: float, request: RouteRequest) -> bool:
        return is_side_call(self._replies.reply_end_of_key.get(key), sent_at, request)

    def _try(
        self,
        request: RouteRequest,
        now: float,
        key: str,
        *,
        queued_since: float | None,
        side_call: bool = False,
        sent_as_side_call: bool = False,
        queued_by: Decision | None = None,
    ) -> tuple[Lease | None, bool, Decision | None]:
        """Pick and, when the pick has a free slot, take it. Returns (lease, any slot free, the
        decision to wait when there is no lease).

        `side_call`: judged now (a waiter's by its enqueue time against its key's latest reply);
        `sent_as_side_call`: judged when the request arrived, what its release goes by.

        Raises UnknownModel / Unavailable when no up, non-draining target serves the model.
        """
        views = self._targets.targets_for_model(request.model, now)
        usable = usable_views(views, request.exclude_target_ids)
        if not usable:
            if not self._targets.model_listed(request.model):
                raise UnknownModel(f"no backend serves model {request.model!r}")
            raise Unavailable(f"no backend serving model {request.model!r} is up")
        never = never_fits(request.model, usable)
        if never is not None:
            raise never
        matches: dict[int, Match] = {}
        chain = request.chain
        home = -1
        conversations: dict[int, int] | None = None
        new_conversation = first_chat = False
        if chain is not None and chain.hashes:
            matches = with_reply_credited(
                self._prefix.lookup(chain, Generations(usable), len(usable)), chain
            )
            if not side_call and is_new_conversation(chain, matches):
                new_conversation = self._homes.one_person(key)
                if len(self._homes):
                    home = self._homes.home_of(key, now)
                    if home < 0 and self._homes.shared(key):
                        conversations = self._homes.conversations(now)
                first_chat = new_conversation and self._homes.newcomer(key)
        router_waiting = self._queue.waiting_for(request.model)
        peers = self._peers
        peer_inflight: dict[str, int] = {}
        if peers.reporting:  # without peers: two Python calls an acquire fewer
            router_waiting += peers.waiting(request.model, now)
            peer_inflight = peers.inflight_by_key(now)
        if queued_since is not None:
            router_waiting -= 1
        unseen = unseen_requests(usable, self._local, peer_inflight, self._replies.last_reply_end)
        if unseen:
            self._unseen.observe(unseen, now)
        if first_chat:
            conversations = self._homes.people(now)
            for target_id, requests in self._unseen.people(now).items():
                conversations[target_id] = conversations.get(target_id, 0) + requests
        replies = self._replies
        fits_of = FitsIfCold(
            self._targets.targets_of_backend,
            now,
            local_inflight=self._local,
            peer_inflight=peer_inflight,
            last_reply_end=replies.last_reply_end,
        )
        candidates, any_free = build_candidates(
            usable,
            local_inflight=self._local,
            peer_inflight=peer_inflight,
            last_reply_end=replies.last_reply_end,
            router_waiting=router_waiting,
            matches=matches,
            default_capacity=self._default_capacity,
            fits_of=fits_of,
            prompt_tokens=request.prompt_tokens,
            recent=replies.finished if side_call else None,
            now=now,
            engine_queued=replies.engine_queued_now(now),
            free_fit_of=fits_of,
            prefills=None if side_call else self._prefills,
            previous=self._candidates.get(request.model),
        )
        self._candidates[request.model] = candidates
        decision = self._pick(
            # positional: 69 ns, keyword 233
            RouteReq(
                request.prompt_tokens,
                request.seed,
                home,
                conversations,
                new_conversation,
                first_chat,
            ),
            candidates,
            self._policy_config,
        )
        if decision.target_id is None:
            return None, any_free, decision
        index = index_of(candidates, decision.target_id)
        view = usable[index]
        if decision.enqueue and not joins_engine_queue(
            self._joins, view, now, self._local, self._peers, self._replies.last_reply_end
        ):
            return None, any_free, decision
        self._local[view.target_id] = self._local.get(view.target_id, 0) + 1
        self._keys[view.target_id] = view.key
        if not sent_as_side_call and key:
            self._homes.started(key)
        lease = Lease(
            self._release,
            view,
            candidates[index],
            decision,
            request,
            matches.get(view.target_id),
            0.0 if queued_since is None else max(0.0, now - queued_since),
            queued_since is not None,
            key,
            sent_as_side_call,
            queued_by,
        )
        chosen = candidates[index]
        if decision.enqueue:
            self._joins.sent(lease, view.target_id, now)
        if conversations is not None:
            self._homes.opened(lease, view.target_id)
        ours_ahead_s = self._prefills.running_for_s(view.target_id, now)
        if ours_ahead_s > 0:
            replies.sent(lease, ours_ahead_s)
        if decision.enqueue:
            return lease, True, None  # it waits in the engine's queue: no prefill of ours yet
        self._prefills.start(
            view.target_id,
            lease,
            now
            + prefill_estimate_s(
                request.prompt_tokens,
                chosen.matched_tokens,
                chosen.prefill_s_per_token,
                self._policy_config.default_prefill_s_per_token,
            ),
        )
        return lease, True, None

    # ---- the queue ------------------------------------------------------------------------

    def kick(self) -> None:
        """Re-run the queue: a scrape round ended, or a peer's slots freed."""
        self._serve()

    def _serve(self) -> None:
        if self._serving:  # a callback re-entered: finish the current run, then go again
            self._serve_again = True
            return
        self._serving = True
        try:
            self._serve_again = True
            while self._serve_again:
                self._serve_again = False
                self._expire(self._clock.now())
                while self._grant_one():
                    pass
        finally:
            self._serving = False

    def _expire(self, now: float) -> None:
        """Fail every waiter whose limits.queue_wait has passed (503 with Retry-After)."""
        if self._next_expiry is None or now < self._next_expiry:
            return
        for waiter in self._queue.take_expired(now - self._queue_wait_s):
            if waiter.future.done():
                continue
            waited_s = now - waiter.enqueued_at
            waiter.future.set_exception(
                QueueTimeout(
                    f"waited {waited_s:.0f}s (limits.queue_wait) for a free slot for "
                    f"model {waiter.model!r}: every target serving it stayed busy",
                    waited_s,
                )
            )
        oldest = self._queue.oldest_enqueued_at()
        self._next_expiry = None if oldest is None else oldest + self._queue_wait_s

    def _grant_one(self) -> bool:
        """Offer free slots to waiters in turn order; True if one waiter was settled."""
        if not len(self._queue):
            return False
        now = self._clock.now()
        blocked: set[str] = set()
        for waiter in self._queue.attempt_order(blocked, now):
            request, queued_by = waiter.payload
            try:
                lease, any_free, _ = self._try(
                    request,
                    now,
                    waiter.key,
                    queued_since=waiter.enqueued_at,
                    side_call=self._is_side_call(waiter.key, waiter.enqueued_at, request),
                    sent_as_side_call=waiter.side_call,
                    queued_by=queued_by,
                )
            except (UnknownModel, Unavailable) as failure:
                self._queue.remove(waiter)
                waiter.future.set_exception(failure)
                return True
            if lease is not None:
                self._queue.grant(waiter)
                waiter.future.set_result(lease)
                return True
            if not any_free:
                blocked.add(waiter.model)
        return False

    # ---- release ------------------------------------------------------------------------

    def _release(self, lease: Lease, feedback: Feedback, used: bool) -> int | None:
        """Frees the slot, has the reply learned from (sched/reply_learner.py) and serves the
        queue. Returns the prediction the reply was judged by (the lease's `prefix` stage)."""
        target_id = lease.target.target_id
        self._prefills.finish(target_id, lease)
        self._joins.released(lease)
        if not lease.side_call and lease.client_key:
            self._homes.left(lease.client_key)
        self._homes.closed(lease)
        left = self._local.get(target_id, 0) - 1
        if left > 0:
            self._local[target_id] = left
        else:
            self._local.pop(target_id, None)
        try:
            return self._replies.released(lease, feedback, used)
        finally:
            if self._serving or len(self._queue):
                self._serve()

    # ---- peers and introspection ----------------------------------------------------------

    def export(self) -> Gauges:
        """This origin's in-flight per target key and waiters per model, for peers."""
        self._seq = max(self._seq + 1, int(self._clock.time() * 1_000_000))
        inflight = {self._keys[tid]: n for tid, n in self._local.items()}
        return Gauges(inflight=inflight, waiting=self._queue.waiting_by_model(), seq=self._seq)

    def merge(self, origin: int, gauges: Gauges) -> None:
        """Replace that origin's last report; its freed slots may serve our waiters."""
        self._peers.merge(origin, gauges, self._clock.now())
        self._serve()

    def forget(self, origin: int) -> None:
        """Drop a leaving origin's report at once."""
        self._peers.forget(origin)
        self._serve()

    def peer_totals(self) -> Gauges:
        return self._peers.totals(self._clock.now())

    def inflight(self, target_id: int) -> int:
        """This instance's leases on the target."""
        return self._local.get(target_id, 0)

    def inflight_cluster(self, target_id: int, target_key: str) -> int:
        """Ours plus what live peers reported (pharos_target_inflight_cluster)."""
        return self._local.get(target_id, 0) + self._peers.inflight(target_key, self._clock.now())

    def waiting_count(self) -> int:
        return len(self._queue)

    def queued(self) -> list[tuple[str, str, float]]:
        """(key, model, enqueued_at monotonic s) of every waiter, for /status's queue table."""
        return [(w.key, w.model, w.enqueued_at) for w in self._queue.waiters()]

    def waiting_for(self, model: str) -> int:
        return self._queue.waiting_for(model)
