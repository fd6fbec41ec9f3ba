"""A busy target's wait is at least until the earliest prefill holding its slots ends (issue 15).

The learned service time is an average: where near-prefill-only calls make most replies it is a
fraction of a second, also while cold 14k-token prefills hold every slot (agents seed 3).
"""

from __future__ import annotations

import pytest

from pharos.policy import DEFAULT_CONFIG, Candidate, RouteReq, pick
from pharos.policy.cost import score_candidates

SHORT = RouteReq(prompt_tokens=1000, seed=0)


def cand(target_id: int, **kw: object) -> Candidate:
    base: dict[str, object] = {
        "target_id": target_id,
        "capacity": 2,
        "free_slots": 0,
        "warm": True,
        "prefill_s_per_token": 0.0025,
        "service_s": 0.6,
    }
    base.update(kw)
    return Candidate(**base)  # type: ignore[arg-type]


# queue_ahead, slots_busy_s: the wait term
CASES = [
    (0, None, 0.2),  # not known (a slot someone else holds): (0 + 1) / (2 + 1) x 0.6 s
    (0, 0.05, 0.2),  # the prefills end sooner than the average says: the average stands
    (0, 30.0, 30.0),  # two cold agent prefills with 30 s to go
    (2, 0.5, 0.6),  # (2 + 1) / 3 x 0.6 s outweighs the bound
]


@pytest.mark.parametrize(("ahead", "busy_s", "wait_s"), CASES)
def test_the_wait_is_the_larger_of_the_average_and_the_prefills_holding_the_slots(
    ahead: int, busy_s: float | None, wait_s: float
) -> None:
    score = score_candidates(
        SHORT, [cand(1, queue_ahead=ahead, slots_busy_s=busy_s)], DEFAULT_CONFIG
    )
    assert score[0].wait_s == pytest.approx(wait_s)


def test_a_free_slot_waits_for_nothing_whatever_the_bound() -> None:
    score = score_candidates(SHORT, [cand(1, free_slots=1, slots_busy_s=30.0)], DEFAULT_CONFIG)
    assert score[0].wait_s == 0.0


# slots_busy_s of the cached target: where the classifier call goes | enqueued
PLACEMENT = [
    (None, 1, True),  # the average says 0.2 s: wait for the cached target (what main did)
    (30.0, 2, False),  # its slots hold 30 s of prefill: the free one, uncached (~7 s)
]


@pytest.mark.parametrize(("busy_s", "target_id", "enqueued"), PLACEMENT)
def test_a_short_call_leaves_its_cached_target_when_long_prefills_hold_every_slot(
    busy_s: float | None, target_id: int, enqueued: bool
) -> None:
    cached = cand(1, matched_tokens=900, slots_busy_s=busy_s)
    free = cand(2, free_slots=1, service_s=2.5)
    decision = pick(SHORT, [cached, free], DEFAULT_CONFIG)
    assert (decision.target_id, decision.enqueue) == (target_id, enqueued)
