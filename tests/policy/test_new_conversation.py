"""A person's new conversation is charged no rework (issue 15, chat seeds 10 and 12).

What a target holds of a new conversation is at most its first message, the system prompt
every chat of the app starts with. Prefilling that elsewhere is a one-time cost, already in
the prefill term, not the re-prefill of a conversation that rework_weight (3.5x) prices: with
it, all six users' first chats queued for the engine that served the first one (up to 8.7 s)
while the other engine idled.
"""

from __future__ import annotations

import pytest

from pharos.policy import DEFAULT_CONFIG, Candidate, RouteReq, pick
from pharos.policy.cost import score_candidates
from tests.policy.candidates import cand

PER_TOKEN_S = 0.001  # cand()'s learned prefill speed
SYSTEM_TOKENS = 300  # a long system prompt: most of a 400-token first turn


def candidates() -> list[Candidate]:
    """Target 1 holds the system prompt and has no free slot; target 2 is idle and holds none."""
    return [cand(1, matched_tokens=SYSTEM_TOKENS, free_slots=0, service_s=3.0), cand(2)]


def test_the_system_prompt_another_target_holds_is_charged_as_rework_only_for_a_follow_up() -> None:
    follow_up = score_candidates(RouteReq(400, 0), candidates(), DEFAULT_CONFIG)
    new = score_candidates(RouteReq(400, 0, new_conversation=True), candidates(), DEFAULT_CONFIG)
    rework_s = SYSTEM_TOKENS * PER_TOKEN_S * DEFAULT_CONFIG.rework_weight
    assert [s.rework_s for s in follow_up] == pytest.approx([0.0, rework_s])
    assert [s.rework_s for s in new] == [0.0, 0.0]
    # the prefill of the whole prompt on target 2 is charged either way
    assert new[1].prefill_s == pytest.approx(400 * PER_TOKEN_S)


# new conversation: where it goes. Target 1: 1/3 of its 3 s service time to wait, 0.1 s of
# prefill (1.1 s); target 2: 0.4 s of prefill, plus 300 x 0.001 x 3.5 = 1.05 s of rework when
# charged (1.45 s)
CASES = [
    (False, 1),  # a follow-up's cached prefix: waiting for it is cheaper than its re-prefill
    (True, 2),  # a new conversation: the idle target
]


@pytest.mark.parametrize(("new_conversation", "chosen"), CASES)
def test_only_a_new_conversation_leaves_the_full_target_for_the_idle_one(
    new_conversation: bool, chosen: int
) -> None:
    decision = pick(
        RouteReq(400, 0, new_conversation=new_conversation), candidates(), DEFAULT_CONFIG
    )
    assert decision.target_id == chosen
