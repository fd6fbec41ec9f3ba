"""`pharos sim --moves`: the follow-ups cost sent elsewhere, against the same turns under sticky."""

import pytest

from pharos.cmd.main import main
from pharos.sim import Result, Sample, moves
from pharos.sim.report import moved_turns


def turn(user: str, session: int, index: int, engine: str, cached: int, ttft_s: float) -> Sample:
    return Sample("chat", user, ttft_s, 100, cached, 0.0, index, engine, session)


# user a, session 0: e0, e0, e1 -> turn 2 moved; session 1 starts on e1: a new chat, no move
# user b, session 0: e1, e0     -> turn 1 moved
COST = [
    turn("a", 0, 0, "e0", 0, 1.0),
    turn("a", 0, 1, "e0", 80, 0.5),
    turn("a", 0, 2, "e1", 10, 0.7),
    turn("a", 1, 0, "e1", 0, 1.0),
    turn("b", 0, 0, "e1", 0, 1.0),
    turn("b", 0, 1, "e0", 20, 0.4),
]
STICKY = [
    turn("a", 0, 0, "e0", 0, 1.0),
    turn("a", 0, 1, "e0", 80, 0.5),
    turn("a", 0, 2, "e0", 90, 3.0),
    turn("b", 0, 0, "e1", 0, 1.0),
    turn("b", 0, 1, "e1", 85, 2.0),
]


def test_a_move_is_a_follow_up_on_another_engine_than_its_conversation_s_turn_before() -> None:
    moved = moved_turns(Result("s", "cost", 1, tuple(COST), 0))
    assert [(s.user, s.session_index, s.turn_index) for s in moved] == [("a", 0, 2), ("b", 0, 1)]


def test_moves_are_judged_against_the_same_turns_under_sticky() -> None:
    results = [Result("s", "cost", 1, tuple(COST), 0), Result("s", "sticky", 1, tuple(STICKY), 0)]
    assert moves(results, "cost", "sticky") == (
        "seed 1: cost moved 2 of 3 follow-ups; on the 2 sticky also served: 30 cached tokens "
        "vs 175, TTFT summed 1.10 s vs 5.00 s"
    )


def test_the_moves_flag_prints_a_line_per_seed(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["sim", "-s", "chat", "--policies", "cost,sticky", "--seeds", "1,2",
                   "--duration", "90", "--moves"])  # fmt: skip
    out = capsys.readouterr().out
    assert status == 0
    block = out.split("moves:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert [line.split(":")[0] for line in block] == ["seed 1", "seed 2"]
    assert all(" cost moved " in line for line in block)


def test_moves_without_cost_and_sticky_is_an_error_not_silence(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = main(["sim", "-s", "chat", "--policies", "cost,round-robin", "--moves"])
    assert status == 2
    assert "--moves compares cost with sticky" in capsys.readouterr().err
