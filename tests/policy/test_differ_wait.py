"""The wait behind busy slots counts requests in flight as part done (issue 15).

A busy slot frees after what is left of its request, not a whole service time: with `capacity`
slots busy the k-th frees after k / (capacity + 1) of one (residuals uniform over it). Counting
a full service per slot sent short follow-ups to re-prefill elsewhere: sharegpt-noisy seed 1, a
247-token turn with 236 cached on e0 moved to e1, though both of e0's slots freed 0.34 s later.
"""

from __future__ import annotations

from pharos.policy import DEFAULT_CONFIG, Candidate, RouteReq, pick
from pharos.policy.cost import score_candidates

PER_TOKEN_S = 0.0049  # what e1 had learned then


def home_and_elsewhere(queue_ahead: int) -> list[Candidate]:
    home = Candidate(
        target_id=0,
        capacity=2,
        free_slots=0,
        queue_ahead=queue_ahead,
        warm=True,
        matched_tokens=236,
        prefill_s_per_token=PER_TOKEN_S,
        service_s=4.32,
    )
    elsewhere = Candidate(
        target_id=1,
        capacity=2,
        free_slots=2,
        queue_ahead=queue_ahead,
        warm=True,
        matched_tokens=7,
        prefill_s_per_token=PER_TOKEN_S,
        service_s=6.66,
    )
    return [home, elsewhere]


def test_a_short_follow_up_waits_for_its_busy_engine_rather_than_re_prefill_elsewhere() -> None:
    # waiters ahead | where the 247-token turn goes | home's wait
    cases = [
        (0, 0, 4.32 / 3),  # the first of two busy slots to free
        (1, 0, 2 * 4.32 / 3),  # the case seen: 2.88 s against 4.55 s of prefill and rework
        (2, 0, 3 * 4.32 / 3),  # 4.37 s against 1.18 s of prefill and 3 x 1.12 s of rework
        (3, 1, 4 * 4.32 / 3),  # a longer queue: re-prefilling elsewhere is quicker
    ]
    for queue_ahead, target, wait_s in cases:
        candidates = home_and_elsewhere(queue_ahead)
        request = RouteReq(prompt_tokens=247, seed=0)
        assert pick(request, candidates, DEFAULT_CONFIG).target_id == target, queue_ahead
        home = score_candidates(request, candidates, DEFAULT_CONFIG)[0]
        assert abs(home.wait_s - wait_s) < 1e-9, queue_ahead
