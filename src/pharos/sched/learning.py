"""What one finished reply teaches: EWMA samples and the prefix index's update (spec §5 Stats, §6).

Pure functions; the scheduler applies the results.
"""

from __future__ import annotations

import enum
from typing import Final, Literal, final

from pharos.policy import Candidate
from pharos.sched.candidates import BYTES_PER_TOKEN
from pharos.sched.types import Feedback

MIN_UNCACHED_TOKENS = 256
"""Below this a prefill time measures fixed overhead (llama.cpp: 20-100 ms for 1 token)."""

MIN_WRONG_TOKENS = 32
"""A prediction that missed by fewer tokens is not judged wrong: a 7-token claim (a shared
system prompt, 14 tokens in SmolLM2's template) missed when llama.cpp took an empty slot, and
its correction forgot the new conversation's whole chain (diagnostic run, equal fleet)."""

MIN_LOAD_S = 0.010
"""An engine-reported load under 10 ms loaded nothing: residency was a scrape behind."""

PrefixOutcome = Literal["predicted_hit", "wrong_prediction", "unpredicted_hit", "miss", "unknown"]


class Dispatch(enum.Enum):
    WARM = "warm"  # loaded, or residency unknown (the engine's one model is always loaded)
    COLD = "cold"  # known cold and no load under way: this request pays the load
    JOINED = "joined"  # cold with a load already under way: it waits for part of a load


def dispatch_of(candidate: Candidate) -> Dispatch:
    if candidate.warm is not False:
        return Dispatch.WARM
    return Dispatch.JOINED if candidate.loading else Dispatch.COLD


def effective_dispatch(dispatch: Dispatch, engine_load_s: float | None) -> Dispatch:
    """The engine's own load time overrides residency: under 10 ms nothing loaded; at least 10 ms
    on a warm dispatch the model was unloaded behind our back (`unexpected_load`)."""
    if engine_load_s is None:
        return dispatch
    if engine_load_s < MIN_LOAD_S:
        return Dispatch.WARM
    if dispatch is Dispatch.WARM:
        return Dispatch.COLD
    return dispatch


@final
class Samples:
    """A slotted class with Final attributes, not a frozen dataclass (policy.RouteReq's reason):
    one per release, whose dataclass __init__ ran interpreted (~4.6k instructions, callgrind)."""

    __slots__ = ("load_s", "prefill_s_per_token", "service_s")

    def __init__(
        self,
        prefill_s_per_token: float | None = None,
        load_s: float | None = None,
        service_s: float | None = None,
    ) -> None:
        self.prefill_s_per_token: Final = prefill_s_per_token
        self.load_s: Final = load_s
        self.service_s: Final = service_s

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Samples)
            and self.prefill_s_per_token == other.prefill_s_per_token
            and self.load_s == other.load_s
            and self.service_s == other.service_s
        )

    def __hash__(self) -> int:
        return hash((self.prefill_s_per_token, self.load_s, self.service_s))

    def __repr__(self) -> str:
        return (
            f"Samples(prefill_s_per_token={self.prefill_s_per_token!r}, "
            f"load_s={self.load_s!r}, service_s={self.service_s!r})"
        )

    @property
    def empty(self) -> bool:
        return self.prefill_s_per_token is None and self.load_s is None and self.service_s is None


NO_SAMPLES = Samples()


def samples_from(feedback: Feedback, dispatch: Dispatch, *, control: bool) -> Samples:
    """EWMA samples from one reply; none from control requests or failed replies."""
    if control or not feedback.succeeded:
        return NO_SAMPLES
    effective = effective_dispatch(dispatch, feedback.engine_load_s)
    prefill = None
    if feedback.prompt_tokens is not None and feedback.cached_tokens is not None:
        uncached = feedback.prompt_tokens - feedback.cached_tokens
        if uncached >= MIN_UNCACHED_TOKENS:
            if feedback.engine_prefill_s is not None:
                prefill = feedback.engine_prefill_s / uncached
            elif effective is Dispatch.WARM and feedback.ttft_s is not None:
                prefill = feedback.ttft_s / uncached
    load = None
    if effective is Dispatch.COLD:
        measured = feedback.engine_load_s if feedback.engine_load_s is not None else feedback.ttft_s
        if measured is not None and measured >= MIN_LOAD_S:
            load = measured
    return Samples(prefill, load, _service_sample(feedback, effective))


def _service_sample(feedback: Feedback, effective: Dispatch) -> float | None:
    """A warm reply's whole duration; a cold or joined one's duration after its load.

    Without the second, a burst for a cold model taught a load time (its first reply) but no
    service time, and waiting behind the warm, busy target was costed at the assumed 5 s:
    live, two router-mode llama-servers loaded the model twice ("cold, est 2.2s vs 2.5s
    (busy)"). The load ends by the first token at the latest, so duration - ttft (decode
    only) bounds the service time from below when the engine reports no load time."""
    duration_s = feedback.duration_s
    if duration_s is None or feedback.client_left:
        return None
    if effective is Dispatch.WARM:
        return duration_s
    loaded_by_s = feedback.engine_load_s if feedback.engine_load_s is not None else feedback.ttft_s
    if loaded_by_s is None or loaded_by_s > duration_s:
        return None
    return duration_s - loaded_by_s


def engine_queued_sample(
    feedback: Feedback, dispatch: Dispatch, ours_ahead_s: float = 0.0
) -> float | None:
    """How long a warm reply waited inside the engine before its prefill behind traffic Pharos
    doesn't see: TTFT from dispatch minus the engine's own prefill time, minus `ours_ahead_s`,
    the prefills of ours expected still to run on the target when it was sent (llama-server
    computes one batch at a time: that wait was ours, and known). Pharos's occupancy can't see
    a client that bypasses it once that client's requests only wait (Running can't exceed the
    slots), so a slot Pharos counts free may still queue there; None without both times or on a
    cold dispatch. Without `ours_ahead_s` a 17k-token agent prompt that waited 31 s behind
    another of ours taught its engine a 31 s queue and every agent left it (batch-loop sim,
    agents seed 14: hit 81.6% against sticky's 90.0%)."""
    if not feedback.succeeded or dispatch is not Dispatch.WARM:
        return None
    ttft_s, prefill_s = feedback.ttft_s, feedback.engine_prefill_s
    if (
        ttft_s is None
        or prefill_s is None
        or (feedback.engine_load_s is not None and (feedback.engine_load_s >= MIN_LOAD_S))
    ):
        return None
    return max(0.0, ttft_s - prefill_s - ours_ahead_s)


def load_outcome(dispatch: Dispatch, feedback: Feedback, *, control: bool) -> str | None:
    """The `load` decision stage (spec §13): cold_start, unexpected_load, control, or None."""
    if control:
        return "control"
    if dispatch is Dispatch.COLD:
        return "cold_start"
    if (
        dispatch is Dispatch.WARM
        and feedback.engine_load_s is not None
        and feedback.engine_load_s >= MIN_LOAD_S
    ):
        return "unexpected_load"
    return None


class PrefixAction(enum.Enum):
    NONE = "none"
    RECORD = "record"  # the engine now holds this prompt
    CORRECT = "correct"  # forget this prompt on this target


def predicted_tokens(matched_bytes: int | None) -> int | None:
    return None if matched_bytes is None else matched_bytes // BYTES_PER_TOKEN


def is_wrong_prediction(predicted: int | None, cached_tokens: int | None) -> bool:
    """Judged wrong when the engine cached under half the predicted tokens (spec §6), and
    at least MIN_WRONG_TOKENS fewer."""
    return (
        predicted is not None
        and predicted > 0
        and cached_tokens is not None
        and cached_tokens * 2 < predicted
        and predicted - cached_tokens >= MIN_WRONG_TOKENS
    )


def prefix_action(feedback: Feedback, predicted: int | None) -> PrefixAction:
    """Record on success; correct a wrong prediction (recording it again would undo the
    correction) and any prompt the engine answered with an error status (spec §9)."""
    if feedback.succeeded:
        if is_wrong_prediction(predicted, feedback.cached_tokens):
            return PrefixAction.CORRECT
        return PrefixAction.RECORD
    if feedback.status is not None and not 200 <= feedback.status < 300:
        return PrefixAction.CORRECT
    return PrefixAction.NONE


def prefix_outcome(predicted: int | None, cached_tokens: int | None) -> PrefixOutcome:
    """The `prefix` decision stage (spec §13)."""
    if cached_tokens is None:
        return "unknown"
    if predicted is not None and predicted > 0:
        wrong = is_wrong_prediction(predicted, cached_tokens)
        return "wrong_prediction" if wrong else "predicted_hit"
    return "unpredicted_hit" if cached_tokens > 0 else "miss"
