"""Learning from each reply when its lease is released (spec §5 Stats, §6).

`ReplyLearner` owns what replies taught the scheduler: when each target's and each key's last
reply ended, each target's last finished prompts one per slot (build_candidates' evictions),
the per-target engine-queued EWMA, and our prefills expected still to run on a lease's target
when it was sent. It applies each reply's samples (`sched/learning.py`'s pure functions) to the
target's stats, the prefix index (its ops go to `on_prefix_op`, for peers) and the key's home.
The scheduler decides and grants slots; it reads this state and hands each release here.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import final

from pharos.clock import Clock
from pharos.prefix import PrefixOp
from pharos.sched.held_affinity import KeyHomes
from pharos.sched.learning import (
    PrefixAction,
    engine_queued_sample,
    predicted_tokens,
    prefix_action,
    samples_from,
)
from pharos.sched.lease import Lease
from pharos.sched.replies import without_reply_credit
from pharos.sched.types import Feedback, PrefixStore, TargetSource
from pharos.state.stats import ewma

ENGINE_QUEUED_HALF_LIFE_S = 30.0


@final
class ReplyLearner:
    """What replies taught, per target and per key. The scheduler reads `last_reply_end`,
    `reply_end_of_key`, `finished` and `engine_queued_now`; only this class writes them."""

    __slots__ = (
        "_clock",
        "_engine_queued",
        "_homes",
        "_on_prefix_op",
        "_ours_ahead",
        "_prefix",
        "_targets",
        "finished",
        "last_reply_end",
        "reply_end_of_key",
    )

    def __init__(
        self,
        targets: TargetSource,
        prefix: PrefixStore,
        clock: Clock,
        homes: KeyHomes,
        on_prefix_op: Callable[[PrefixOp], None] | None = None,
    ) -> None:
        self._targets = targets
        self._prefix = prefix
        self._clock = clock
        self._homes = homes
        self._on_prefix_op = on_prefix_op
        self.last_reply_end: dict[int, float] = {}  # target id -> its last reply's end
        self.reply_end_of_key: dict[str, float] = {}  # API key -> its last reply's end
        self.finished: dict[int, deque[tuple[float, int, int]]] = {}  # per target and slot
        self._engine_queued: dict[int, tuple[float, float]] = {}  # target -> (EWMA, sampled at)
        # per lease sent while prefills of ours ran on its target: how long they were expected
        # to go on (learning.engine_queued_sample); popped at release
        self._ours_ahead: dict[Lease, float] = {}

    def sent(self, lease: Lease, ours_ahead_s: float) -> None:
        """`lease` was granted while prefills of ours ran on its target, for `ours_ahead_s`."""
        self._ours_ahead[lease] = ours_ahead_s

    def engine_queued_now(self, now: float) -> dict[int, float] | None:
        """Each target's engine-side wait, halved every ENGINE_QUEUED_HALF_LIFE_S since its
        last sample: a target avoided for it teaches nothing new, and the traffic moves on.
        None before any sample."""
        if not self._engine_queued:
            return None
        return self._decayed(now)

    def _decayed(self, now: float) -> dict[int, float]:
        if not self._engine_queued:
            return {}
        return {
            tid: value * 0.5 ** ((now - at) / ENGINE_QUEUED_HALF_LIFE_S)
            for tid, (value, at) in self._engine_queued.items()
        }

    def released(self, lease: Lease, feedback: Feedback, used: bool) -> int | None:
        """The lease's slot is free again (the scheduler's part): learn from its reply when it
        was used. Returns the prediction the reply was judged by (the lease's `prefix` stage)."""
        ours_ahead_s = self._ours_ahead.pop(lease, 0.0) if self._ours_ahead else 0.0
        if not used:
            return None
        target_id = lease.target.target_id
        now = self._clock.now()
        self.last_reply_end[target_id] = now
        if lease.client_key:
            self.reply_end_of_key[lease.client_key] = now
        if feedback.succeeded:
            self._remember_slot(lease, now)
            self._home_ended(lease, target_id, now)
        return self._learn(lease, feedback, now, ours_ahead_s)

    def _home_ended(self, lease: Lease, target_id: int, now: float) -> None:
        """A person's chat replied on the target: where the key's next new chat goes home."""
        chain = lease.request.chain
        if chain is None or not lease.client_key or lease.side_call or lease.request.control:
            return
        self._homes.ended(lease.client_key, chain, target_id, now)

    def _remember_slot(self, lease: Lease, now: float) -> None:
        """The prompt now sits in a slot of the target (per-slot engines): a fresh prompt
        routed there would push out the oldest of these (build_candidates' evicts). A side
        call's slot is not kept; it took the oldest one when every slot was accounted for."""
        chain = lease.request.chain
        if chain is None or not chain.hashes:
            return
        target_id = lease.target.target_id
        finished = self.finished.get(target_id)
        if lease.side_call:
            if finished and len(finished) == finished.maxlen:
                finished.popleft()
            return
        links = set(chain.hashes)
        kept = [entry for entry in finished or () if entry[2] not in links]  # same chat: 1 slot
        finished = self.finished[target_id] = deque(kept, maxlen=lease.candidate.capacity)
        finished.append((now, lease.request.prompt_tokens, chain.hashes[-1]))

    def _learn(
        self, lease: Lease, feedback: Feedback, now: float, ours_ahead_s: float = 0.0
    ) -> int | None:
        """`now`: when the reply ended (the release's one clock read); `ours_ahead_s`: our
        prefills expected still to run on its target when the lease was granted."""
        request = lease.request
        target_id = lease.target.target_id
        if request.control:
            return None
        samples = samples_from(feedback, lease.dispatch, control=False)
        queued_s = engine_queued_sample(feedback, lease.dispatch, ours_ahead_s)
        if queued_s is not None:
            before = self._decayed(now).get(target_id)
            self._engine_queued[target_id] = (ewma(before, queued_s), now)
        if not samples.empty:
            self._targets.observe(
                target_id,
                prefill_s_per_token=samples.prefill_s_per_token,
                load_s=samples.load_s,
                service_s=samples.service_s,
            )
        if feedback.succeeded:
            self._targets.reply_succeeded(target_id, now)
        chain = request.chain
        if chain is None or not chain.hashes:
            return None
        judged_tokens = lease.predicted_tokens
        if lease.predicted is not None:  # tools counted or not, per target (prefix/tools.py)
            recorded_bytes = without_reply_credit(lease.predicted.matched_bytes, chain)
            judged_tokens = predicted_tokens(
                self._prefix.observe_cached(
                    chain, target_id, recorded_bytes, feedback.cached_tokens
                )
            )
        action = prefix_action(feedback, judged_tokens)
        if action is PrefixAction.RECORD:
            self._prefix.record(chain, target_id, lease.target.generation, now)
        elif action is PrefixAction.CORRECT:
            self._prefix.correct(chain, target_id)
        else:
            return judged_tokens
        if self._on_prefix_op is not None:
            self._on_prefix_op(
                PrefixOp(
                    target_key=lease.target.key,
                    hashes=list(chain.hashes),
                    last_used_s=self._clock.time(),
                    remove=action is PrefixAction.CORRECT,
                )
            )
        return judged_tokens
