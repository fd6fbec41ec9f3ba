"""The engine-side wait: what replies on a target lately waited inside the engine (issue 15)."""

from __future__ import annotations

import pytest

from pharos.policy import DEFAULT_CONFIG, RouteReq, pick
from pharos.policy.cost import score_candidates
from tests.policy.candidates import cand

REQ = RouteReq(prompt_tokens=1000, seed=0)


# free_slots, engine_queued_s: the wait the score adds
CASES = [
    (2, None, 0.0),  # unknown: nothing added, never a guessed 0 either way
    (2, 0.0, 0.0),
    (2, 1.5, 1.5),  # a free slot Pharos counts may still queue behind a bypassing client
    (0, 1.5, 4 / 3 + 1.5),  # busy: (0 + 1) / (2 + 1) x 4 s, then the engine's own queue
]


@pytest.mark.parametrize(("free", "queued", "wait_s"), CASES)
def test_the_engine_side_wait_adds_to_the_wait_term(
    free: int, queued: float | None, wait_s: float
) -> None:
    score = score_candidates(
        REQ, [cand(1, free_slots=free, engine_queued_s=queued)], DEFAULT_CONFIG
    )
    assert score[0].wait_s == pytest.approx(wait_s)
    assert score[0].est_ttft_s == pytest.approx(wait_s + 1.0)


def test_a_new_conversation_goes_where_the_engine_does_not_queue_unseen_traffic() -> None:
    noisy, quiet = cand(1, engine_queued_s=2.0), cand(2, engine_queued_s=0.05)
    assert pick(REQ, [noisy, quiet], DEFAULT_CONFIG).target_id == 2


def test_a_cached_conversation_stays_when_its_prefill_saved_outweighs_the_queue() -> None:
    noisy = cand(1, engine_queued_s=0.5, matched_tokens=900)
    quiet = cand(2, engine_queued_s=0.0)
    assert pick(REQ, [noisy, quiet], DEFAULT_CONFIG).target_id == 1
