"""The wait term on busy targets: the (queue_ahead + 1)-th of `capacity` busy slots frees after
(queue_ahead + 1) / (capacity + 1) of a service time, the requests in flight part done
(issue 15; tests/policy/test_differ_wait.py). (queue_ahead + 1) / capacity overstated waits in
the simulator's chat runs (seeds 1-3, waits of requests it queued: mean 1.83 s, predicted
2.83 s), and near-ties then moved conversations it should not. The equal helper's first slot
at 1 / (capacity + 1) and then 1 / capacity a place lost 34 comparisons where this loses 32."""

from __future__ import annotations

import pytest

from pharos.policy import DEFAULT_CONFIG, Candidate, RouteReq, pick
from pharos.policy.cost import score_candidates


def _busy(queue_ahead: int, capacity: int = 2, service_s: float = 6.0) -> Candidate:
    return Candidate(
        target_id=1,
        capacity=capacity,
        free_slots=0,
        queue_ahead=queue_ahead,
        matched_tokens=1000,
        prefill_s_per_token=0.001,
        service_s=service_s,
    )


@pytest.mark.parametrize(
    ("queue_ahead", "capacity", "wait_s"),
    [
        # waiters ahead, slots: the wait
        (0, 2, 2.0),  # 6 s / 3: the first of two running requests to end
        (0, 1, 3.0),  # 6 s / 2: one running request, half done on average
        (2, 2, 6.0),  # the third to free: 3 / 3 of 6 s
        (0, 4, 1.2),  # 6 s / 5
    ],
)
def test_the_first_slot_to_free_waits_a_service_time_over_capacity_plus_one(
    queue_ahead: int, capacity: int, wait_s: float
):
    (score,) = score_candidates(RouteReq(1000, 0), [_busy(queue_ahead, capacity)], DEFAULT_CONFIG)
    assert score.wait_s == pytest.approx(wait_s)


def test_a_cached_turn_waits_for_its_busy_target_rather_than_re_prefill_elsewhere():
    # cold-burst seed 5 at 204 s: the cached target's two slots run ~7 s requests; the idle one
    # would prefill 1.2 s again and pay 2.3 s of rework. A 3.48 s wait (6.95 / 2) lost to that
    # by 2.5 ms and the conversation moved, 1.6k cached tokens lost; 6.95 / 3 = 2.32 s keeps it
    cached = Candidate(6, 2, 0, matched_tokens=1770, prefill_s_per_token=0.000633, service_s=6.954)
    idle = Candidate(0, 2, 2, matched_tokens=120, prefill_s_per_token=0.0007007, service_s=8.26)
    decision = pick(RouteReq(1855, 0), [cached, idle], DEFAULT_CONFIG)
    assert decision.target_id == 6
    assert decision.enqueue
