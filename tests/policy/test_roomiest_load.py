"""A cold load the estimates can't tell apart goes where it leaves its host the most memory
(issue 15, cold-burst-heavy): chat models loaded beside each other on two hosts, and the
burst's model then unloaded one of them on each."""

from __future__ import annotations

from pharos.policy import DEFAULT_CONFIG, Candidate, RouteReq, pick
from pharos.policy.cost import score_candidates
from tests.policy.test_cost import cand

GB = 1024**3
SEEDS = range(12)
FULL = {"free_slots": 0, "queue_ahead": 0}  # warm, both slots busy: the request would queue


def cold(target_id: int, room_gb: int | None) -> Candidate:
    return cand(
        target_id,
        warm=False,
        fits_if_cold=True,
        room_bytes=None if room_gb is None else room_gb * GB,
    )


def test_a_tied_cold_load_goes_to_the_host_with_the_most_room_left_whatever_the_seed() -> None:
    cands = [cold(1, 1), cold(2, 5), cold(3, 1)]
    chosen = {pick(RouteReq(1000, seed), cands, DEFAULT_CONFIG).target_id for seed in SEEDS}
    assert chosen == {2}


def test_hosts_with_equal_room_are_left_to_the_seed() -> None:
    cands = [cold(1, 1), cold(2, 5), cold(3, 5)]
    chosen = {pick(RouteReq(1000, seed), cands, DEFAULT_CONFIG).target_id for seed in SEEDS}
    assert chosen == {2, 3}


def test_a_tie_where_one_target_has_no_known_room_is_left_to_the_seed() -> None:
    cands = [cold(1, 1), cold(2, 5), cold(3, None)]
    chosen = {pick(RouteReq(1000, seed), cands, DEFAULT_CONFIG).target_id for seed in SEEDS}
    assert chosen == {1, 2, 3}


def test_of_tied_loads_that_each_unload_a_model_the_one_unloading_least_wins() -> None:
    cands = [
        cand(i, warm=False, fits_if_cold=True, evicts_loaded=True, room_bytes=room * GB)
        for i, room in ((1, -7), (2, -3), (3, -5))
    ]
    chosen = {pick(RouteReq(1000, seed), cands, DEFAULT_CONFIG).target_id for seed in SEEDS}
    assert chosen == {2}


def test_room_never_outweighs_a_lower_estimate() -> None:
    roomy = cand(2, warm=False, fits_if_cold=True, room_bytes=5 * GB, load_s=12.0)
    cands = [cold(1, 1), roomy]
    assert pick(RouteReq(1000, 0), cands, DEFAULT_CONFIG).target_id == 1


def test_a_second_replica_goes_where_its_host_holds_the_least_beside_it() -> None:
    # the first cold target in order had been kept on a tie: o0, beside the other chat model
    cands = [cand(1, **FULL), cold(2, 1), cold(3, 5)]
    scores = score_candidates(RouteReq(1000, 0), cands, DEFAULT_CONFIG)
    assert scores[1].est_ttft_s == scores[2].est_ttft_s
    decision = pick(RouteReq(1000, 0), cands, DEFAULT_CONFIG)
    assert (decision.target_id, decision.enqueue) == (3, False)
