"""Equal engines' learned speeds differ by sampling noise: on a cache-neutral request (every
target holds the same prefix) speeds within config.same_speed_band count as one, so load
decides where a new conversation goes (issue 15, chat: all six users had piled onto the
engine learned faster while the other sat idle)."""

from __future__ import annotations

import dataclasses

import pytest

from pharos.policy import DEFAULT_CONFIG, Candidate, RouteReq, pick
from pharos.policy.cost import score_candidates
from pharos.policy.estimate import shared_prefill_speed

OFF = dataclasses.replace(DEFAULT_CONFIG, same_speed_band=0.0)


def _target(
    target_id: int,
    free_slots: int,
    per_token_s: float | None,
    matched_tokens: int = 120,
    evicts_tokens: int = 0,
) -> Candidate:
    return Candidate(
        target_id=target_id,
        capacity=2,
        free_slots=free_slots,
        matched_tokens=matched_tokens,
        prefill_s_per_token=per_token_s,
        service_s=5.0,
        evicts_tokens=evicts_tokens,
    )


def test_a_new_conversation_goes_to_the_idle_target_when_the_busy_one_learned_under_10pct_faster():
    # as chat seed 2 at 568 s, speeds closer: target 0 idle at 6.87 ms/token (learned), target 1
    # one slot busy at 6.54 (4.8% faster); both hold the 120-token system prompt of a 401-token
    # first turn
    idle = _target(0, free_slots=2, per_token_s=0.00687)
    busy = _target(1, free_slots=1, per_token_s=0.00654)
    request = RouteReq(prompt_tokens=401, seed=0)
    assert pick(request, [idle, busy], OFF).target_id == 1  # the noise decided, before
    assert pick(request, [idle, busy], DEFAULT_CONFIG).target_id == 0


def test_a_target_more_than_10pct_faster_still_wins_a_new_conversation_though_busier():
    idle = _target(0, free_slots=2, per_token_s=0.0069)
    busy = _target(1, free_slots=1, per_token_s=0.0060)  # 15% faster: a real difference
    assert pick(RouteReq(prompt_tokens=401, seed=0), [idle, busy], DEFAULT_CONFIG).target_id == 1


@pytest.mark.parametrize(
    ("first", "second", "shared"),
    [
        # first target (matched, ms/token, evicts) | second target       | one speed?
        ((120, 0.0060, 0), (120, 0.0066, 0), True),  # same prefix, 10% apart: the midpoint
        ((120, 0.0060, 0), (120, 0.0067, 0), False),  # 11.7% apart: each its own
        ((900, 0.0060, 0), (120, 0.0062, 0), False),  # a follow-up: one holds more of it
        ((0, 0.0060, 0), (0, 0.0062, 800), False),  # a side call would push a chat out
        ((0, 0.0060, 0), (0, 0.0062, 0), False),  # predicted nowhere: maybe a lost follow-up
        ((120, 0.0060, 0), (120, None, 0), False),  # one speed unknown: the fallback's job
    ],
)
def test_one_speed_is_shared_only_by_cache_neutral_requests_on_speeds_within_the_band(
    first: tuple[int, float | None, int], second: tuple[int, float | None, int], shared: bool
):
    candidates = [
        _target(tid, 2, per_token_s=speed, matched_tokens=matched, evicts_tokens=evicts)
        for tid, (matched, speed, evicts) in enumerate((first, second))
    ]
    speed = shared_prefill_speed(candidates, DEFAULT_CONFIG.same_speed_band)
    scores = score_candidates(RouteReq(prompt_tokens=1000, seed=0), candidates, DEFAULT_CONFIG)
    if shared:
        assert first[1] is not None and second[1] is not None
        assert speed == pytest.approx((first[1] + second[1]) / 2)
        assert scores[0].prefill_s == pytest.approx(880 * speed)
        assert scores[1].prefill_s == pytest.approx(880 * speed)
    else:
        assert speed == -1.0
        if first[1] is not None:
            assert scores[0].prefill_s == pytest.approx((1000 - first[0]) * first[1])


def test_the_band_at_zero_keeps_each_targets_own_speed():
    candidates = [_target(0, 2, 0.0060), _target(1, 2, 0.0061)]
    assert shared_prefill_speed(candidates, 0.0) == -1.0
    scores = score_candidates(RouteReq(prompt_tokens=1000, seed=0), candidates, OFF)
    assert [s.prefill_s for s in scores] == pytest.approx([880 * 0.0060, 880 * 0.0061])
