"""The warm decision (pharos.sim.warming.warm_choice): a second replica is warmed only when
the waiters' summed wait drops by more than the warm-up charges others (spec §16)."""

import pytest

from pharos.policy import Candidate
from pharos.sim.warming import WarmChoice, queue_wait_s, warm_choice

LOAD_S = 10.0
SERVICE_S = 5.0


def replica(target_id: int = 0, *, loading: bool = True, free: int = 0) -> Candidate:
    """A warm or loading target of the model, its 2 slots taken unless `free`."""
    return Candidate(
        target_id=target_id,
        capacity=2,
        free_slots=free,
        warm=not loading,
        loading=loading,
        load_s=LOAD_S,
        service_s=SERVICE_S,
    )


def cold(
    target_id: int = 1, *, fits: bool | None = True, evicts: bool = False, load_s: float = LOAD_S
) -> Candidate:
    return Candidate(
        target_id=target_id,
        capacity=2,
        free_slots=2,
        warm=False,
        load_s=load_s,
        fits_if_cold=fits,
        evicts_loaded=evicts,
    )


# (slots free at, waiting, service_s, summed wait)
QUEUES = [
    ([0.0, 0.0], 2, 5.0, 0.0),  # both start at once
    ([0.0, 0.0], 4, 5.0, 10.0),  # the second pair waits a service time
    ([15.0, 15.0, 10.0, 10.0], 6, 5.0, 80.0),  # 10, 10, 15, 15, 15, 15
    ([15.0, 15.0], 6, 5.0, 120.0),  # 15, 15, 20, 20, 25, 25
    ([3.0], 0, 5.0, 0.0),  # nobody waits
]


@pytest.mark.parametrize(("free_at_s", "waiting", "service_s", "expected_s"), QUEUES)
def test_the_queue_wait_is_each_waiter_served_in_order_on_the_first_slot_to_free(
    free_at_s: list[float], waiting: int, service_s: float, expected_s: float
) -> None:
    assert queue_wait_s(free_at_s, waiting, service_s) == pytest.approx(expected_s)


def test_six_waiters_behind_the_one_loading_replica_warm_a_host_with_room() -> None:
    # without: slots free at 10 + 5, waits 15, 15, 20, 20, 25, 25 (120 s); with a second
    # replica ready at 10 s: 10, 10, 15, 15, 15, 15 (80 s)
    assert warm_choice([replica(0), cold(1)], router_waiting=6) == WarmChoice(1, 40.0, 0.0)


# (candidates, requests waiting in the router)
NO_WARM_UP = [
    ([replica(0), cold(1)], 0),  # nobody waits
    ([replica(0, free=1), cold(1)], 6),  # a replica has a free slot: the queue drains onto it
    ([replica(0), cold(1, fits=False)], 6),  # the load would unload a busy model
    ([replica(0), cold(1, fits=None)], 6),  # host memory or a size unknown
    ([cold(0), cold(1)], 6),  # nothing serves it yet: the first request's pick pays the load
    ([replica(0, loading=False), cold(1)], 1),  # one waiter, a warm slot frees in 2.5 s < 10
]


@pytest.mark.parametrize(("candidates", "waiting"), NO_WARM_UP)
def test_nothing_is_warmed_when_no_waiter_would_start_sooner_or_no_host_has_room(
    candidates: list[Candidate], waiting: int
) -> None:
    assert warm_choice(candidates, router_waiting=waiting) is None


@pytest.mark.parametrize(
    ("reload_loads", "warmed"),
    [
        (1.0, True),  # 40 s saved against one reload, 10 s
        (4.0, False),  # 40 s saved against 40 s charged: not more
    ],
)
def test_unloading_an_idle_model_is_charged_its_reload(reload_loads: float, warmed: bool) -> None:
    choice = warm_choice(
        [replica(0), cold(1, evicts=True)], router_waiting=6, reload_loads=reload_loads
    )
    assert (choice is not None) is warmed
    if choice is not None:
        assert choice.charged_s == pytest.approx(LOAD_S * reload_loads)


def test_a_load_nearly_done_leaves_less_to_save_than_a_reload() -> None:
    # seen loading 9.5 of 10 s: slots free at 5.5; 4 waiters start 5.5, 5.5, 10.5, 10.5
    # (32 s), with a replica at 10 s: 5.5, 5.5, 10, 10 (31 s): 1 s saved
    candidates = [replica(0), cold(1, evicts=True)]
    assert warm_choice(candidates, 4, {0: 9.5}) is None
    beside = warm_choice([replica(0), cold(1)], 4, {0: 9.5})
    assert beside is not None and beside.saved_s == pytest.approx(1.0)


def test_a_host_with_room_beats_one_that_unloads_an_idle_model() -> None:
    choice = warm_choice([replica(0), cold(1, evicts=True), cold(2)], router_waiting=6)
    assert choice is not None and choice.target_id == 2


@pytest.mark.parametrize(("may_unload", "warmed"), [(frozenset(), None), (frozenset({1}), 1)])
def test_only_the_cold_targets_in_may_unload_may_unload_an_idle_model(
    may_unload: frozenset[int], warmed: int | None
) -> None:
    choice = warm_choice([replica(0), cold(1, evicts=True)], 6, may_unload=may_unload)
    assert (None if choice is None else choice.target_id) == warmed


def test_an_unknown_service_time_falls_back_to_the_policy_default() -> None:
    unknown = Candidate(target_id=0, capacity=2, free_slots=0, warm=False, loading=True)
    choice = warm_choice([unknown, cold(1)], router_waiting=6)
    # default load 10 s and service 5 s (policy.Defaults): the numbers of the first test
    assert choice is not None and choice.saved_s == pytest.approx(40.0)
