"""Every policy serves the same turns: the workload is planned before the run (issue 15's
hit ratio compares the same prompts, not a faster policy's extra first turns)."""

import pytest

from pharos.sim import SCENARIOS, simulate
from pharos.sim.run import Result, planned_turns
from pharos.sim.traces import Session, TurnSpec


def turn(think_s: float) -> TurnSpec:
    return TurnSpec(think_s=think_s, user_text="hello", reply_text="hi", completion_tokens=4)


def session(start_s: float, *thinks_s: float) -> Session:
    return Session(
        user="u0",
        klass="chat",
        model="m",
        start_s=start_s,
        system="be brief",
        tools=None,
        turns=tuple(turn(t) for t in thinks_s),
        bytes_per_token=4.0,
    )


# (sessions as (start_s, think times), duration_s, open_after_s, turns planned per session)
PLANS = [
    ([(0.0, 1, 1, 1)], 10.0, 0.0, [3]),  # all three fit
    ([(0.0, 4, 4, 4)], 10.0, 0.0, [2]),  # the third would be sent at 12 s
    ([(0.0, 1, 1), (5.0, 1, 1)], 10.0, 0.0, [2, 2]),  # the second waits for its start
    ([(0.0, 3, 3), (0.0, 1, 1)], 10.0, 5.0, [1]),  # opened at 5 s, the second turn at 11
    ([(0.0, 2, 2), (0.0, 1, 9)], 10.0, 3.0, [2]),  # the next opens at 10 s: past the end
    ([(0.0, 2, 2), (0.0, 1, 9)], 10.0, 1.0, [2, 1]),  # cut inside the second
    ([(0.0, 2, 2), (0.0, 1, 9), (0.0, 1)], 30.0, 0.0, [2, 2, 1]),
]


@pytest.mark.parametrize(("specs", "duration_s", "open_after_s", "expected"), PLANS)
def test_a_users_turns_are_those_an_instant_fleet_would_see_sent_before_the_end(
    specs: list[tuple[float, ...]], duration_s: float, open_after_s: float, expected: list[int]
) -> None:
    sessions = [session(start, *thinks) for start, *thinks in specs]
    plan = planned_turns(sessions, duration_s, open_after_s)
    assert [turns for _, turns in plan] == expected
    assert [s for s, _ in plan] == sessions[: len(expected)]


def turns_of(result: Result) -> set[tuple[str, int, int]]:
    return {(s.user, s.session_index, s.turn_index) for s in result.samples}


@pytest.mark.parametrize("scenario", ["chat", "hetero", "noisy"])
def test_a_slow_policy_and_a_fast_one_serve_the_same_turns(scenario: str) -> None:
    short = SCENARIOS[scenario].with_duration(120.0)
    fast, slow = simulate(short, "cost", 1), simulate(short, "least-load", 1)
    assert fast.ttft(0.5) < slow.ttft(0.5)  # the runs differ in speed
    assert turns_of(fast) == turns_of(slow)
    assert len(fast.samples) == len(turns_of(fast))
