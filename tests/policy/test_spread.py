"""A shared key's new conversation is charged PolicyConfig.spread_s per conversation live on a
target, per slot (issue 15: real-equal, where one API key carries six people)."""

from __future__ import annotations

import dataclasses

import pytest

from pharos.policy import DEFAULT_CONFIG, RouteReq, pick
from pharos.policy.cost import score_candidates
from tests.policy.candidates import cand

SPREAD_S = DEFAULT_CONFIG.spread_s
OFF = dataclasses.replace(DEFAULT_CONFIG, spread_s=0.0)


def test_each_live_conversation_is_charged_per_slot_and_the_charge_is_in_the_estimate() -> None:
    request = RouteReq(1000, 0, conversations={1: 3, 2: 1})
    scores = score_candidates(request, [cand(1), cand(2), cand(3)], DEFAULT_CONFIG)
    # two slots each: 3 / 2, 1 / 2 and 0 / 2 of the charge
    assert [s.spread_s for s in scores] == pytest.approx([1.5 * SPREAD_S, 0.5 * SPREAD_S, 0.0])
    assert [s.est_ttft_s for s in scores] == pytest.approx(
        [1.0 + 1.5 * SPREAD_S, 1.0 + 0.5 * SPREAD_S, 1.0]
    )


def test_without_conversations_nothing_is_charged() -> None:
    scores = score_candidates(RouteReq(1000, 0), [cand(1), cand(2)], DEFAULT_CONFIG)
    assert [s.spread_s for s in scores] == [0.0, 0.0]


def test_a_target_with_more_slots_is_charged_less_per_conversation() -> None:
    request = RouteReq(1000, 0, conversations={1: 2, 2: 2})
    scores = score_candidates(request, [cand(1), cand(2, capacity=4, free_slots=4)], DEFAULT_CONFIG)
    assert [s.spread_s for s in scores] == pytest.approx([SPREAD_S, 0.5 * SPREAD_S])


# each target's learned prefill s/token (the first is the fastest): the charge for 2 live
# conversations on each, 2 slots
SPEED_CASES = [
    ((0.001, 0.001), (SPREAD_S, SPREAD_S)),  # equal: one conversation's worth each
    ((0.001, 0.002), (SPREAD_S, 2 * SPREAD_S)),  # half as fast: twice the charge
    ((0.001, None), (SPREAD_S, SPREAD_S)),  # unknown: the median's, here the fastest's
]


@pytest.mark.parametrize(("per_token", "charged_s"), SPEED_CASES)
def test_a_slower_target_is_charged_more_per_conversation_in_proportion_to_its_prefill_time(
    per_token: tuple[float | None, float | None], charged_s: tuple[float, float]
) -> None:
    matched = {"matched_tokens": 100}  # the shared system prompt on both
    cands = [cand(i + 1, prefill_s_per_token=p, **matched) for i, p in enumerate(per_token)]
    scores = score_candidates(RouteReq(1000, 0, conversations={1: 2, 2: 2}), cands, DEFAULT_CONFIG)
    assert [s.spread_s for s in scores] == pytest.approx(list(charged_s))


# live conversations on 1 and 2, free slots on 1 and 2, config: where the new chat goes
CASES = [
    ((3, 1), (1, 1), DEFAULT_CONFIG, 2),  # equally free: the target with fewer conversations
    ((3, 1), (2, 1), DEFAULT_CONFIG, 2),  # 1 idler now, but its chats will come back
    ((3, 1), (2, 1), OFF, 1),  # off: the least utilized target of the moment, as before
    ((3, 1), (2, 0), DEFAULT_CONFIG, 1),  # 2 full: a wait of 4/3 s outweighs 0.1 s
    ((1, 3), (1, 1), DEFAULT_CONFIG, 1),
]


@pytest.mark.parametrize(("live", "free", "config", "chosen"), CASES)
def test_a_shared_keys_new_chat_goes_where_fewer_conversations_live_unless_it_would_wait(
    live: tuple[int, int], free: tuple[int, int], config: object, chosen: int
) -> None:
    request = RouteReq(1000, 7, conversations={1: live[0], 2: live[1]})
    candidates = [cand(1, free_slots=free[0]), cand(2, free_slots=free[1])]
    assert pick(request, candidates, config).target_id == chosen  # type: ignore[arg-type]


def test_a_pick_the_spread_decided_is_labelled_least_loaded_and_names_it() -> None:
    request = RouteReq(1000, 7, conversations={1: 3, 2: 1})
    decision = pick(request, [cand(1, free_slots=2), cand(2, free_slots=1)], DEFAULT_CONFIG)
    assert decision.target_id == 2
    assert decision.why == "least_loaded"
    assert decision.reason.endswith("(more conversations)")
