"""Table tests of every cost term, fallback and tie rule of the `cost` policy (spec §7)."""

from __future__ import annotations

import math

import pytest

from pharos.policy import DEFAULT_CONFIG, Candidate, PolicyConfig, RouteReq, Score, pick
from pharos.policy.cost import score_candidates
from pharos.policy.estimate import Fallbacks, fallbacks

REQ = RouteReq(prompt_tokens=1000, seed=0)


def cand(target_id: int = 1, **kw: object) -> Candidate:
    """A warm, idle candidate with every estimate known; tests override what they exercise."""
    base: dict[str, object] = {
        "target_id": target_id,
        "capacity": 2,
        "free_slots": 2,
        "queue_ahead": 0,
        "warm": True,
        "kv_usage": 0.1,
        "matched_tokens": 0,
        "prefill_s_per_token": 0.001,
        "load_s": 8.0,
        "service_s": 4.0,
        "fits_if_cold": True,
        "loading": False,
    }
    base.update(kw)
    return Candidate(**base)  # type: ignore[arg-type]


def only_score(
    c: Candidate, prompt_tokens: int = 1000, config: PolicyConfig = DEFAULT_CONFIG
) -> Score:
    return score_candidates(RouteReq(prompt_tokens, 0), [c], config)[0]


def as_tuple(fb: Fallbacks) -> tuple[float, float, float]:
    return (fb.prefill_s_per_token, fb.load_s, fb.service_s)


@pytest.mark.parametrize(
    ("free_slots", "queue_ahead", "capacity", "service_s", "wait_s"),
    [
        (1, 5, 2, 4.0, 0.0),  # a free slot: no wait, whatever the queue says
        (0, 0, 2, 4.0, 4 / 3),  # (0 + 1) / (2 + 1) * 4: the first of 2 busy slots frees
        (0, 3, 2, 4.0, 16 / 3),  # (3 + 1) / (2 + 1) * 4
        (0, 1, 4, 2.0, 0.8),  # (1 + 1) / (4 + 1) * 2
        (0, 0, 0, 3.0, 1.5),  # a capacity of 0 counts as 1, never a division by zero
    ],
)
def test_wait_term(
    free_slots: int, queue_ahead: int, capacity: int, service_s: float, wait_s: float
):
    c = cand(free_slots=free_slots, queue_ahead=queue_ahead, capacity=capacity, service_s=service_s)
    assert only_score(c).wait_s == pytest.approx(wait_s)


@pytest.mark.parametrize(
    ("warm", "loading", "fits", "load_s", "feasible"),
    [
        (True, False, True, 0.0, True),
        (None, False, None, 0.0, True),  # residency unknown: its one model is loaded
        (False, False, True, 8.0, True),  # cold: pays the load
        (False, False, None, 8.0, True),  # unknown fit never blocks
        (False, True, True, 0.0, True),  # a load under way is paid already
        (False, True, False, 0.0, True),  # ...even where a new load would not fit
        (False, False, False, 8.0, False),  # would evict a busy model: excluded
        (True, False, False, 0.0, True),  # fit only matters for a cold load
    ],
)
def test_load_term_and_feasibility(
    warm: bool | None, loading: bool, fits: bool | None, load_s: float, feasible: bool
):
    s = only_score(cand(warm=warm, loading=loading, fits_if_cold=fits))
    assert s.load_s == load_s
    assert s.feasible is feasible
    assert math.isinf(s.est_ttft_s) is (not feasible)


@pytest.mark.parametrize(
    ("prompt_tokens", "matched", "prefill_s"),
    [
        (1000, 0, 1.0),
        (1000, 600, 0.4),
        (1000, 1000, 0.0),
        (1000, 5000, 0.0),  # a match longer than the estimate covers the whole prompt, not less
    ],
)
def test_prefill_term(prompt_tokens: int, matched: int, prefill_s: float):
    s = only_score(cand(matched_tokens=matched), prompt_tokens=prompt_tokens)
    assert s.prefill_s == pytest.approx(prefill_s)


@pytest.mark.parametrize(
    ("kv_usage", "penalty_s"),
    [
        (None, 0.0),
        (0.5, 0.0),
        (0.9, 0.0),
        (0.95, 0.25),  # half the trust lost: 500 matched tokens * 1 ms * 0.5
        (1.0, 0.5),  # the whole match is distrusted
    ],
)
def test_kv_pressure_penalty(kv_usage: float | None, penalty_s: float):
    s = only_score(cand(kv_usage=kv_usage, matched_tokens=500))
    assert s.kv_penalty_s == pytest.approx(penalty_s)
    assert s.est_ttft_s == pytest.approx(0.5 + penalty_s)  # 500 uncached * 1 ms + penalty


def test_unknown_estimates_take_the_candidates_median():
    cands = [
        cand(1, prefill_s_per_token=0.002, load_s=4.0, service_s=1.0),
        cand(2, prefill_s_per_token=0.004, load_s=6.0, service_s=3.0),
        cand(3, prefill_s_per_token=None, load_s=None, service_s=None),
    ]
    assert as_tuple(fallbacks(cands, DEFAULT_CONFIG)) == pytest.approx((0.003, 5.0, 2.0))
    odd = [*cands, cand(4, prefill_s_per_token=0.010, load_s=20.0, service_s=9.0)]
    assert as_tuple(fallbacks(odd, DEFAULT_CONFIG)) == pytest.approx((0.004, 6.0, 3.0))


def test_unknown_estimates_fall_back_to_defaults_when_no_candidate_knows():
    c = cand(
        warm=False,
        free_slots=0,
        queue_ahead=1,
        capacity=2,
        prefill_s_per_token=None,
        load_s=None,
        service_s=None,
    )
    s = only_score(c, prompt_tokens=200)
    assert s.wait_s == pytest.approx(2 / 3 * 5.0)  # 5 s per request
    assert s.load_s == pytest.approx(10.0)  # 10 s per load
    assert s.prefill_s == pytest.approx(200 * 0.005)  # 5 ms per token
    assert s.est_ttft_s == pytest.approx(2 / 3 * 5.0 + 10.0 + 1.0)


def test_a_missing_estimate_is_never_zero():
    # Target 2 knows nothing; a 0 for its unknowns would make it look free of load and prefill.
    known = cand(1, warm=False, load_s=3.0, prefill_s_per_token=0.002)
    unknown = cand(2, warm=False, load_s=None, prefill_s_per_token=None)
    scores = score_candidates(REQ, [known, unknown], DEFAULT_CONFIG)
    assert scores[1].load_s == 3.0
    assert scores[1].prefill_s == pytest.approx(2.0)
    assert scores[0].est_ttft_s == scores[1].est_ttft_s


def test_lowest_estimate_wins():
    cold = cand(1, warm=False, load_s=8.0)
    warm = cand(2)
    d = pick(REQ, [cold, warm], DEFAULT_CONFIG)
    assert d.target_id == 2
    assert not d.enqueue


def test_infeasible_cold_load_is_excluded_even_when_cheapest():
    busy_warm = cand(1, free_slots=0, queue_ahead=10, service_s=30.0)  # wait 165 s
    cheap_but_infeasible = cand(2, warm=False, load_s=0.5, fits_if_cold=False)
    d = pick(REQ, [busy_warm, cheap_but_infeasible], DEFAULT_CONFIG)
    assert d.target_id == 1
    assert d.enqueue  # the only feasible target is busy
    assert d.why == "only_choice"


def test_no_feasible_target_enqueues_without_a_target():
    d = pick(REQ, [cand(1, warm=False, fits_if_cold=False)], DEFAULT_CONFIG)
    assert d.target_id is None
    assert d.enqueue
    assert "no feasible target" in d.reason


def test_enqueue_when_the_best_target_has_no_free_slot():
    cached_busy = cand(1, free_slots=0, matched_tokens=1000, service_s=0.2)  # est 0.1 s
    idle_uncached = cand(2)  # est 1.0 s
    d = pick(REQ, [cached_busy, idle_uncached], DEFAULT_CONFIG)
    assert d.target_id == 1
    assert d.enqueue


def test_ties_within_a_millisecond_go_to_the_less_utilized():
    own_speeds = PolicyConfig(same_speed_band=0.0)  # speeds 0.1% apart would count as one
    a = cand(1, capacity=4, free_slots=1)  # utilization 0.75
    b = cand(2, capacity=4, free_slots=3, prefill_s_per_token=0.0010009)  # +0.9 ms, util 0.25
    assert pick(REQ, [a, b], own_speeds).target_id == 2
    c = cand(3, capacity=4, free_slots=3, prefill_s_per_token=0.0010011)  # +1.1 ms: no tie
    assert pick(REQ, [a, c], own_speeds).target_id == 1


def test_exact_ties_are_broken_by_seed_and_not_by_candidate_order():
    cands = [cand(i) for i in range(1, 5)]
    winners = set()
    for seed in range(16):
        forward = pick(RouteReq(1000, seed), cands, DEFAULT_CONFIG).target_id
        backward = pick(RouteReq(1000, seed), cands[::-1], DEFAULT_CONFIG).target_id
        assert forward == backward
        winners.add(forward)
    assert winners == {1, 2, 3, 4}


def test_every_decision_has_scores_for_every_candidate():
    cands = [cand(1), cand(2, warm=False, fits_if_cold=False), cand(3, free_slots=0)]
    d = pick(REQ, cands, DEFAULT_CONFIG)
    assert [s.target_id for s in d.scores] == [1, 2, 3]
    assert d.scores[1].feasible is False
    assert d.score_of(3) is not None
    assert d.score_of(3).wait_s > 0  # type: ignore[union-attr]
    assert d.score_of(99) is None
