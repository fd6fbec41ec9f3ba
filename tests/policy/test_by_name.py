"""The policy reads candidates and scores by name: reordering a field cannot mis-score silently
(issue 8). A reference scorer written from spec §7, field by field, is the oracle."""

from __future__ import annotations

import inspect
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pharos.policy import DEFAULT_CONFIG, Candidate, PolicyConfig, RouteReq, Score, pick
from pharos.policy.cost import score_candidates
from pharos.policy.estimate import fallbacks
from pharos.policy.least_load import pick_least_load
from pharos.policy.types import CANDIDATE_FIELDS


def reference(c: Candidate, prompt_tokens: int, cands: list[Candidate]) -> dict[str, object]:
    """est_ttft = wait + load + prefill + KV penalty + rework, every input read by its name."""
    config = DEFAULT_CONFIG

    def fb(name: str, default: float) -> float:
        known = sorted(v for v in (getattr(o, name) for o in cands) if v is not None)
        if not known:
            return default
        mid = len(known) // 2
        return known[mid] if len(known) % 2 else (known[mid - 1] + known[mid]) / 2

    capacity = max(c.capacity, 1)
    service = c.service_s if c.service_s is not None else fb("service_s", config.default_service_s)
    wait = 0.0 if c.free_slots > 0 else (c.queue_ahead + 1) / (capacity + 1) * service
    cold = c.warm is False and not c.loading
    feasible = not (cold and c.fits_if_cold is False)
    load = 0.0
    if cold:
        load = c.load_s if c.load_s is not None else fb("load_s", config.default_load_s)
        if c.evicts_loaded:
            load *= 2
    per_token = c.prefill_s_per_token
    if per_token is None:
        per_token = fb("prefill_s_per_token", config.default_prefill_s_per_token)
    matched = min(max(c.matched_tokens, 0), prompt_tokens)
    prefill = (prompt_tokens - matched) * per_token
    penalty = 0.0
    if c.kv_usage is not None and c.kv_usage > config.kv_pressure_from and matched > 0:
        lost = (c.kv_usage - config.kv_pressure_from) / (1 - config.kv_pressure_from)
        penalty = matched * per_token * min(lost, 1.0)
    top = min(max([0, *(o.matched_tokens for o in cands)]), prompt_tokens)
    rework = max(top - matched, 0) * per_token * config.rework_weight
    evict = c.evicts_tokens * per_token * config.evict_weight if c.evicts_tokens > 0 else 0.0
    util = (max(capacity - c.free_slots, 0) + c.queue_ahead) / capacity
    return {
        "target_id": c.target_id,
        "feasible": feasible,
        "est_ttft_s": (wait + load + prefill + penalty + rework + evict if feasible else math.inf),
        "wait_s": wait,
        "load_s": load,
        "prefill_s": prefill,
        "kv_penalty_s": penalty,
        "utilization": util,
        "rework_s": rework,
        "evict_s": evict,
        "away_s": 0.0,  # no home: RouteReq's home_target_id is -1 here (test_held_away.py)
        "spread_s": 0.0,  # no RouteReq.conversations here (test_spread.py)
    }


candidates = st.lists(
    st.builds(
        Candidate,
        target_id=st.integers(0, 1000),
        capacity=st.integers(0, 8),
        free_slots=st.integers(0, 8),
        queue_ahead=st.integers(0, 5),
        warm=st.sampled_from([True, False, None]),
        kv_usage=st.sampled_from([None, 0.1, 0.92, 0.99, 1.0]),
        matched_tokens=st.integers(-10, 5000),
        prefill_s_per_token=st.sampled_from([None, 0.001, 0.004]),
        load_s=st.sampled_from([None, 2.0, 9.0]),
        service_s=st.sampled_from([None, 1.0, 6.0]),
        fits_if_cold=st.sampled_from([None, True, False]),
        loading=st.booleans(),
        evicts_tokens=st.sampled_from([0, 300, 4000]),
        evicts_loaded=st.booleans(),
    ),
    min_size=1,
    max_size=12,
    unique_by=lambda c: c.target_id,
)


@given(candidates, st.integers(0, 8000))
def test_every_score_field_matches_the_reference_read_by_name(
    cands: list[Candidate], prompt_tokens: int
) -> None:
    scores = score_candidates(RouteReq(prompt_tokens, 0), cands, DEFAULT_CONFIG)
    for c, score in zip(cands, scores, strict=True):
        expected = reference(c, prompt_tokens, cands)
        got = score._asdict()
        assert got.keys() == expected.keys()
        for name, value in expected.items():
            assert got[name] == pytest.approx(value), name


@given(candidates, st.integers(0, 8000), st.integers(0, 2**64 - 1))
def test_the_pick_is_a_feasible_target_with_the_reference_lowest_estimate(
    cands: list[Candidate], prompt_tokens: int, seed: int
) -> None:
    d = pick(RouteReq(prompt_tokens, seed), cands, DEFAULT_CONFIG)
    ests = [float(reference(c, prompt_tokens, cands)["est_ttft_s"]) for c in cands]  # type: ignore[arg-type]
    if all(math.isinf(e) for e in ests):
        assert d.target_id is None
        return
    chosen = next(i for i, c in enumerate(cands) if c.target_id == d.target_id)
    c = cands[chosen]
    if ests[chosen] > min(ests) + DEFAULT_CONFIG.tie_s + 1e-12:
        # the one exception: a second replica, loaded where the host has room, for a request
        # that would queue (no warm target has a free slot)
        assert c.warm is False and not c.loading and c.fits_if_cold is True
        assert not c.evicts_loaded and c.free_slots > 0
        assert not any(o.free_slots > 0 and (o.warm is not False or o.loading) for o in cands)
    assert d.enqueue is (c.free_slots <= 0)


@given(candidates, st.integers(0, 2**64 - 1))
def test_least_load_scores_match_the_reference_utilization(
    cands: list[Candidate], seed: int
) -> None:
    d = pick_least_load(RouteReq(100, seed), cands, DEFAULT_CONFIG)
    for c, score in zip(cands, d.scores, strict=True):
        expected = reference(c, 100, cands)
        assert (score.target_id, score.feasible) == (c.target_id, expected["feasible"])
        assert score.utilization == pytest.approx(expected["utilization"])


def test_candidate_fields_are_listed_once_in_constructor_order() -> None:
    # Positional builders (sched.candidates) pass fields in this order; a reorder of the
    # constructor must reorder CANDIDATE_FIELDS too, and the sched tests read them back by name.
    params = list(inspect.signature(Candidate).parameters)
    assert tuple(params) == CANDIDATE_FIELDS
    values = (1, 2, 3, 4, True, 0.5, 6, 0.007, 8.0, 9.0, False, True, 13, 1.4, True, 2.5, 17)
    built = Candidate(*values)
    assert tuple(getattr(built, name) for name in CANDIDATE_FIELDS) == values


def test_score_fields_keep_their_names() -> None:
    assert Score._fields == (
        "target_id",
        "feasible",
        "est_ttft_s",
        "wait_s",
        "load_s",
        "prefill_s",
        "kv_penalty_s",
        "utilization",
        "rework_s",
        "evict_s",
        "away_s",
        "spread_s",
    )


def test_fallbacks_are_read_by_name() -> None:
    cands = [
        Candidate(1, 1, 1, prefill_s_per_token=0.002, load_s=None, service_s=7.0),
        Candidate(2, 1, 1, prefill_s_per_token=None, load_s=4.0, service_s=None),
    ]
    fb = fallbacks(cands, PolicyConfig())
    assert (fb.prefill_s_per_token, fb.load_s, fb.service_s) == (0.002, 4.0, 7.0)


def test_candidates_compare_by_value() -> None:
    assert Candidate(1, 2, 1, warm=True) == Candidate(1, 2, 1, warm=True)
    assert Candidate(1, 2, 1, warm=True) != Candidate(1, 2, 1, warm=None)
    assert "free_slots=1" in repr(Candidate(1, 2, 1))
