"""A new conversation's key home: every other target is charged PolicyConfig.away_s (issue 15)."""

from __future__ import annotations

import dataclasses

import pytest

from pharos.policy import DEFAULT_CONFIG, RouteReq, pick
from pharos.policy.cost import score_candidates
from tests.policy.candidates import cand

AWAY_S = DEFAULT_CONFIG.away_s
OFF = dataclasses.replace(DEFAULT_CONFIG, away_s=0.0)


def test_only_the_targets_off_home_are_charged_and_the_charge_is_in_the_estimate() -> None:
    scores = score_candidates(
        RouteReq(1000, 0, home_target_id=1), [cand(1), cand(2), cand(3)], DEFAULT_CONFIG
    )
    assert [s.away_s for s in scores] == [0.0, AWAY_S, AWAY_S]
    assert [s.est_ttft_s for s in scores] == pytest.approx([1.0, 1.0 + AWAY_S, 1.0 + AWAY_S])


def test_without_a_home_nothing_is_charged() -> None:
    scores = score_candidates(RouteReq(1000, 0), [cand(1), cand(2)], DEFAULT_CONFIG)
    assert [s.away_s for s in scores] == [0.0, 0.0]


# home's free slots, the other's, away_s config: the target the new conversation goes to
CASES = [
    (1, 2, DEFAULT_CONFIG, 1),  # home busier, still free: it stays home
    (1, 2, OFF, 2),  # off: the least utilized target, as before
    (0, 2, DEFAULT_CONFIG, 2),  # home full: a wait of 4/3 s outweighs the charge
]


@pytest.mark.parametrize(("home_free", "other_free", "config", "chosen"), CASES)
def test_a_new_conversation_stays_home_unless_another_target_saves_more_than_the_charge(
    home_free: int, other_free: int, config: object, chosen: int
) -> None:
    request = RouteReq(1000, 7, home_target_id=1)
    candidates = [cand(1, free_slots=home_free), cand(2, free_slots=other_free)]
    assert pick(request, candidates, config).target_id == chosen  # type: ignore[arg-type]


def test_a_faster_target_still_wins_by_more_than_the_charge() -> None:
    home = cand(1, prefill_s_per_token=0.003)  # 3.0 s for 1000 tokens
    fast = cand(2, prefill_s_per_token=0.001)  # 1.0 s + the charge
    assert pick(RouteReq(1000, 0, home_target_id=1), [home, fast], DEFAULT_CONFIG).target_id == 2


# home's and the other target's learned prefill s/token: the charge on the other target
SPEED_CASES = [
    (0.001, 0.001, AWAY_S),  # equal speeds: the whole charge
    (0.003, 0.001, AWAY_S / 3),  # 3x faster than home: charged a third (hetero)
    (0.001, 0.003, AWAY_S),  # slower than home: the whole charge, never more
    (0.00100, 0.00095, AWAY_S),  # within the same-speed band: one shared speed, the whole
]


@pytest.mark.parametrize(("home_per_token", "other_per_token", "charged_s"), SPEED_CASES)
def test_a_target_faster_than_home_is_charged_in_proportion_to_its_speed(
    home_per_token: float, other_per_token: float, charged_s: float
) -> None:
    matched = {"matched_tokens": 100}  # the shared system prompt on both: cache-neutral
    home = cand(1, prefill_s_per_token=home_per_token, **matched)
    other = cand(2, prefill_s_per_token=other_per_token, **matched)
    scores = score_candidates(RouteReq(1000, 0, home_target_id=1), [home, other], DEFAULT_CONFIG)
    assert scores[0].away_s == 0.0
    assert scores[1].away_s == pytest.approx(charged_s)


# the home's engine-side wait (Candidate.engine_queued_s): the others are charged all the same
# (it was waived from 0.1 s, and the people whose homes our own batches queued at wandered)
QUEUED_S = [None, 0.01, 0.1, 0.5, 3.0]


@pytest.mark.parametrize("queued_s", QUEUED_S)
def test_a_home_the_engine_lately_queued_at_is_still_home(queued_s: float | None) -> None:
    home = cand(1, engine_queued_s=queued_s)
    scores = score_candidates(RouteReq(1000, 0, home_target_id=1), [home, cand(2)], DEFAULT_CONFIG)
    assert scores[1].away_s == AWAY_S
    assert scores[0].wait_s == (queued_s or 0.0)  # the queue is in the home's own wait


def test_a_home_that_is_not_a_candidate_charges_nobody() -> None:
    """The key's home serves another model, or is excluded on a retry: no target is charged,
    so the estimates stay what they are without a home."""
    request = RouteReq(1000, 0, home_target_id=9)
    scores = score_candidates(request, [cand(1), cand(2)], DEFAULT_CONFIG)
    assert [s.away_s for s in scores] == [0.0, 0.0]
    assert [s.est_ttft_s for s in scores] == pytest.approx([1.0, 1.0])


def test_a_pick_that_went_home_is_labelled_cache_not_least_loaded() -> None:
    """spec §13's `route` values are only_choice, least_loaded, cache and warm: the home holds the
    person's last chat (its slot and host cache), so a pick it decides is `cache`."""
    request = RouteReq(1000, 7, home_target_id=1)
    decision = pick(request, [cand(1, free_slots=1), cand(2, free_slots=2)], DEFAULT_CONFIG)
    assert decision.target_id == 1
    assert decision.why == "cache"
    off = pick(request, [cand(1, free_slots=1), cand(2, free_slots=2)], OFF)
    assert (off.target_id, off.why) == (2, "least_loaded")


def test_the_reason_names_the_home_when_it_decided_the_pick() -> None:
    request = RouteReq(1000, 7, home_target_id=1)
    decision = pick(request, [cand(1, free_slots=1), cand(2, free_slots=2)], DEFAULT_CONFIG)
    assert decision.reason.endswith("(off its key's home)")
