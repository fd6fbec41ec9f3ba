"""A lease: one slot on one target, and what its reply will be judged against (spec §8)."""

from __future__ import annotations

from collections.abc import Callable

from pharos.policy import Candidate, Decision
from pharos.prefix import Match
from pharos.sched.learning import (
    Dispatch,
    PrefixOutcome,
    dispatch_of,
    load_outcome,
    predicted_tokens,
    prefix_outcome,
)
from pharos.sched.replies import without_reply_credit
from pharos.sched.types import ABANDONED, Feedback, QueueOutcome, RouteRequest
from pharos.state.view import TargetView

ReleaseFn = Callable[["Lease", Feedback, bool], "int | None"]
"""The scheduler's hook: (lease, feedback, used). used=False: granted but never dispatched.
Returns the prediction (tokens) the reply was judged by, None when it judged none."""


class Lease:
    """One slot on one target, held from dispatch until the reply ends."""

    __slots__ = (
        "_judged_tokens",
        "_on_release",
        "_released",
        "candidate",
        "client_key",
        "decision",
        "predicted",
        "queue_wait_s",
        "queued_by",
        "request",
        "side_call",
        "target",
        "waited",
    )

    def __init__(
        self,
        on_release: ReleaseFn,
        target: TargetView,
        candidate: Candidate,
        decision: Decision,
        request: RouteRequest,
        predicted: Match | None,
        queue_wait_s: float,
        waited: bool,
        client_key: str = "",
        side_call: bool = True,
        queued_by: Decision | None = None,
    ) -> None:
        self._on_release = on_release
        self._released = False
        self._judged_tokens: int | None = None
        self.target = target
        self.candidate = candidate  # what the policy saw of the target
        self.decision = decision
        self.request = request
        self.predicted = predicted  # the prefix index's match on this target, if any
        self.queue_wait_s = queue_wait_s
        self.waited = waited  # granted from the fair queue rather than at once
        self.client_key = client_key  # the API key that asked: its reply's end marks side calls
        self.side_call = side_call  # sent within SIDE_CALL_GAP_S of that key's last reply
        self.queued_by = queued_by  # granted from the fair queue: the decision it queued by

    @property
    def route_outcome(self) -> str:
        """The `route` decision stage: why this target won."""
        return self.decision.why

    @property
    def queue_outcome(self) -> QueueOutcome:
        """`engine_queue`: sent into a full engine's own queue (sched/engine_joins.py), the one
        way a lease holds a decision to wait; `waited`: granted from our fair queue."""
        if self.decision.enqueue:
            return "engine_queue"
        return "waited" if self.waited else "immediate"

    @property
    def dispatch(self) -> Dispatch:
        return dispatch_of(self.candidate)

    @property
    def predicted_tokens(self) -> int | None:
        return predicted_tokens(None if self.predicted is None else self.predicted.matched_bytes)

    def load_outcome(self, feedback: Feedback) -> str | None:
        """The `load` decision stage: cold_start, unexpected_load, control or None."""
        return load_outcome(self.dispatch, feedback, control=self.request.control)

    def prefix_outcome(self, feedback: Feedback) -> PrefixOutcome:
        """The `prefix` decision stage: the prediction the scheduler judged the reply by (what
        the index recorded, without the reply credit) against the engine's cached tokens, so a
        wrong_prediction is one the index corrected. Judged with the credit, ~10 a real-engine
        run were counted where nothing was corrected (make scenario sends ShareGPT's answers)."""
        judged = self._judged_tokens
        if judged is None and self.predicted is not None:
            chain = self.request.chain
            matched_bytes = self.predicted.matched_bytes
            if chain is not None:
                matched_bytes = without_reply_credit(matched_bytes, chain)
            judged = predicted_tokens(matched_bytes)
        return prefix_outcome(judged, feedback.cached_tokens)

    @property
    def released(self) -> bool:
        return self._released

    def release(self, feedback: Feedback) -> None:
        """Free the slot, learn from the reply, serve the queue. A second call is a no-op."""
        if self._released:
            return
        self._released = True
        self._judged_tokens = self._on_release(self, feedback, True)

    def abandon(self) -> None:
        """Give back a slot granted to a request that was cancelled before it could use it."""
        if self._released:
            return
        self._released = True
        self._on_release(self, ABANDONED, False)
