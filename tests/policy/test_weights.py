"""What the rework and evict weights charge (PolicyConfig defaults; docs/routing-log.md,
"Weights on the batch loop"): a re-prefill of a prefix another target holds costs 3.5x its
prefill, a slot's recent conversation a fresh prompt pushes out 2x its prefill."""

from __future__ import annotations

import pytest

from pharos.policy import DEFAULT_CONFIG, Candidate, RouteReq, pick
from pharos.policy.cost import score_candidates


def target(tid: int, *, matched: int = 0, evicts: int = 0, free: int = 2) -> Candidate:
    return Candidate(
        tid,
        2,
        free,
        warm=True,
        matched_tokens=matched,
        prefill_s_per_token=0.001,
        service_s=3.0,
        evicts_tokens=evicts,
    )


# prompt tokens, the other target's cached tokens, tokens this one's slot would push out:
# (rework s, evict s) charged to this one
CHARGES = [
    (2000, 1000, 0, 3.5, 0.0),  # 1 s of prefill the other holds, redone here: 3.5 s
    (2000, 0, 1500, 0.0, 3.0),  # 1.5 s a recent conversation re-prefills later: 3 s
    (2000, 1000, 1500, 3.5, 3.0),
    (2000, 3000, 0, 7.0, 0.0),  # a match longer than the prompt counts as the prompt
]


@pytest.mark.parametrize(("prompt", "held", "evicts", "rework_s", "evict_s"), CHARGES)
def test_a_target_is_charged_3_5x_the_prefix_it_would_redo_and_2x_the_slot_it_pushes_out(
    prompt: int, held: int, evicts: int, rework_s: float, evict_s: float
) -> None:
    scores = score_candidates(
        RouteReq(prompt_tokens=prompt, seed=0),
        [target(1, evicts=evicts), target(2, matched=held)],
        DEFAULT_CONFIG,
    )
    assert scores[0].rework_s == pytest.approx(rework_s)
    assert scores[0].evict_s == pytest.approx(evict_s)


# queue ahead on the cached target (2 slots, 3 s service: (q + 1) / 3 x 3 s of wait), tokens
# it holds of the 2,000: where the follow-up goes (1 cached, 2 idle and uncached)
WAITS = [
    (0, 1000, 1),  # 1 s wait + 1 s prefill against 2 s + 3.5 s rework
    (3, 1000, 1),  # 4 s + 1 s against 5.5 s
    (4, 1000, 2),  # 5 s + 1 s against 5.5 s: the idle target
    (8, 1800, 2),  # 9 s + 0.2 s against 2 s + 6.3 s
    (7, 1800, 1),  # 8 s + 0.2 s against 8.3 s
]


@pytest.mark.parametrize(("ahead", "held", "chosen"), WAITS)
def test_a_follow_up_waits_for_its_cached_target_until_the_wait_outweighs_3_5x_its_prefix(
    ahead: int, held: int, chosen: int
) -> None:
    cached = Candidate(
        1, 2, 0, ahead, warm=True, matched_tokens=held, prefill_s_per_token=0.001, service_s=3.0
    )
    decision = pick(RouteReq(prompt_tokens=2000, seed=0), [cached, target(2)], DEFAULT_CONFIG)
    assert decision.target_id == chosen
