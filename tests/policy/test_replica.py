"""A request that would queue loads a second replica where the host has room (issue 15,
spec §16 "pre-emptive warming of a second replica"): cold-burst's chats queued on one host
per model while the third host sat empty."""

from __future__ import annotations

import pytest

from pharos.policy import DEFAULT_CONFIG, RouteReq, pick
from pharos.policy.cost import score_candidates
from tests.policy.test_cost import cand

REQ = RouteReq(prompt_tokens=1000, seed=0)
FULL = {"free_slots": 0, "queue_ahead": 0}  # warm, both slots busy: a ~2 s wait (4 s service)
ROOM = {"warm": False, "fits_if_cold": True}  # cold, loads beside what its host holds: 8 s


def test_a_request_that_would_queue_loads_a_replica_where_its_host_has_room() -> None:
    full, cold = cand(1, **FULL), cand(2, **ROOM)
    scores = score_candidates(REQ, [full, cold], DEFAULT_CONFIG)
    assert scores[0].est_ttft_s < scores[1].est_ttft_s  # queueing is cheaper for this request
    decision = pick(REQ, [full, cold], DEFAULT_CONFIG)
    assert (decision.target_id, decision.enqueue) == (2, False)


def test_the_cheapest_of_several_hosts_with_room_gets_the_replica() -> None:
    cands = [cand(1, **FULL), cand(2, **ROOM, load_s=12.0), cand(3, **ROOM), cand(4, **ROOM)]
    assert pick(REQ, cands, DEFAULT_CONFIG).target_id == 3  # 3 and 4 tie: the first kept


# the cold candidate's other fields | why it gets no replica, so the request queues on 1
@pytest.mark.parametrize(
    "cold",
    [
        {**ROOM, "evicts_loaded": True},  # fits only by unloading an idle model
        {"warm": False, "fits_if_cold": None},  # host memory unknown (llama.cpp router mode)
        {"warm": False, "fits_if_cold": False},  # would evict a busy model: infeasible
        {"warm": False, "fits_if_cold": True, "loading": True, **FULL},  # a load under way
    ],
)
def test_no_replica_unless_the_load_unloads_nothing(cold: dict[str, object]) -> None:
    decision = pick(REQ, [cand(1, **FULL), cand(2, **cold)], DEFAULT_CONFIG)
    assert (decision.target_id, decision.enqueue) == (1, True)


def test_no_replica_while_a_warm_target_has_a_free_slot() -> None:
    # 1 holds the conversation (900 tokens cached) and is full; 2 is warm with a free slot but
    # would re-prefill it all: the policy chose to queue on 1, and a load elsewhere is no
    # better than running on 2 now
    cached_full = cand(1, **FULL, matched_tokens=900)
    warm_free = cand(2, prefill_s_per_token=0.01)
    decision = pick(REQ, [cached_full, warm_free, cand(3, **ROOM)], DEFAULT_CONFIG)
    assert (decision.target_id, decision.enqueue) == (1, True)


# cold candidate | its load term (8 s load estimate)
@pytest.mark.parametrize(
    ("cold", "load_s"),
    [
        (ROOM, 8.0),  # loads beside what its host holds
        ({**ROOM, "evicts_loaded": True}, 16.0),  # unloads an idle model: its next request reloads
        ({"warm": True, "evicts_loaded": True}, 0.0),  # warm: no load, whatever the flag
    ],
)
def test_a_load_that_unloads_an_idle_model_is_charged_the_reload(
    cold: dict[str, object], load_s: float
) -> None:
    assert score_candidates(REQ, [cand(1, **cold)], DEFAULT_CONFIG)[0].load_s == load_s


def test_a_burst_on_a_cold_model_loads_where_it_unloads_nothing_even_on_a_slower_host() -> None:
    # two hosts holding chat models idle, one empty and 2x slower at prefill
    unloads = [cand(i, warm=False, fits_if_cold=True, evicts_loaded=True) for i in (1, 2)]
    empty = cand(3, warm=False, fits_if_cold=True, prefill_s_per_token=0.002)
    assert pick(REQ, [*unloads, empty], DEFAULT_CONFIG).target_id == 3


def test_when_every_load_unloads_one_the_request_still_loads() -> None:
    decision = pick(REQ, [cand(1, warm=False, evicts_loaded=True)], DEFAULT_CONFIG)
    assert (decision.target_id, decision.enqueue) == (1, False)


def test_the_reason_says_it_is_a_second_replica() -> None:
    replica = pick(REQ, [cand(1, **FULL), cand(2, **ROOM)], DEFAULT_CONFIG).explain()
    assert replica.startswith("a second replica, where its host has room: cold, est 9.0s vs")
    queued = pick(REQ, [cand(1, **FULL), cand(2, **ROOM, evicts_loaded=True)], DEFAULT_CONFIG)
    assert "replica" not in queued.explain()
