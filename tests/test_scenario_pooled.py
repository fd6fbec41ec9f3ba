"""benchmarks/scenario/pooled: several real-engine runs read as one sample per policy."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from benchmarks.scenario.client import Reply, TurnResult
from benchmarks.scenario.pooled import BadRecord, main, pool, read_out, table

REPO = Path(__file__).resolve().parents[1]


def _turn(
    ttft_s: float | None,
    cached: int | None = 0,
    prefilled: int | None = 100,
    bypassed: bool = False,
    policy: str = "pharos-cost",
    turn: int = 0,
) -> TurnResult:
    reply = None if ttft_s is None else Reply(ttft_s, cached, prefilled)
    return TurnResult(
        policy, "user0", 0, turn, f"r{turn}", "http://p", "http://e0", reply, bypassed=bypassed
    )


def test_the_pooled_p95_is_the_nearest_rank_over_every_run_and_each_run_keeps_its_own() -> None:
    # run 1: 20 turns at 1..20 s; run 2: 20 turns at 0.1 s. Alone their p95s are 19 and 0.1 s
    # (rank round(0.95 x 19) = 18 of 0..19); pooled, rank round(0.95 x 39) = 37 of 0..39 is
    # run 1's 18 s.
    run_1 = [_turn(float(s)) for s in range(1, 21)]
    run_2 = [_turn(0.1) for _ in range(20)]
    pooled = pool("pharos-cost", [run_1, run_2])
    assert (pooled.runs, pooled.turns) == (2, 40)
    assert pooled.p95_s == 18.0
    assert pooled.p95_per_run_s == (19.0, 0.1)
    assert pooled.p50_per_run_s == (10.5, 0.1)
    assert pooled.p50_s == pytest.approx(0.1 + (1.0 - 0.1) / 2)  # median of 20 x 0.1 and 1..20


def test_the_bypassing_clients_turns_and_failed_turns_are_not_pooled() -> None:
    turns = [_turn(1.0), _turn(50.0, bypassed=True), _turn(None)]
    pooled = pool("sticky", [turns])
    assert pooled.turns == 1
    assert pooled.p95_s == 1.0


# turns' (cache_n, prompt_n) -> pooled hit ratio; None when no turn's timings came
HIT_CASES = [
    ([(30, 70), (70, 30)], 0.5),  # summed over runs' tokens, not averaged per turn
    ([(0, 100)], 0.0),  # timings came and nothing was cached: 0, known
    ([(None, None)], None),  # no timings: unknown, never 0
]


@pytest.mark.parametrize(("timings", "hit"), HIT_CASES)
def test_the_pooled_hit_ratio_sums_the_engines_own_token_counts(
    timings: list[tuple[int | None, int | None]], hit: float | None
) -> None:
    runs = [[_turn(1.0, cached, prefilled)] for cached, prefilled in timings]
    assert pool("pharos-cost", runs).hit == hit


def test_a_policy_that_served_nothing_prints_dashes_not_zeros() -> None:
    printed = table({"sticky": [[_turn(None)]]})
    assert "| sticky | 1 | 0 | - | - | unknown | - | - |" in printed


def _records(fleet: str, repeat: int, turns: list[TurnResult]) -> list[str]:
    extra = {"fleet": fleet, "repeat": repeat, "engine_index": 0, "load_before": 0.5}
    return [json.dumps({**extra, **dataclasses.asdict(t)}) for t in turns]


def test_the_same_repeat_in_two_files_is_two_runs_and_fleets_stay_apart() -> None:
    a = _records("bypass", 0, [_turn(1.0), _turn(2.0, policy="sticky")])
    b = _records("bypass", 0, [_turn(3.0)]) + _records("speed", 1, [_turn(4.0)])
    read = read_out(a, "a.jsonl")
    more = read_out(b, "b.jsonl")
    assert [len(run) for run in read["bypass"]["pharos-cost"]] == [1]
    assert more["speed"]["pharos-cost"][0][0].reply == Reply(4.0, 0, 100)
    assert list(more) == ["bypass", "speed"]


def test_a_line_that_is_not_a_turn_names_its_file_and_line() -> None:
    lines = [*_records("bypass", 0, [_turn(1.0)]), "", '{"fleet": "bypass"}']
    with pytest.raises(BadRecord, match=r"^out\.jsonl:3: not a scenario turn record"):
        read_out(lines, "out.jsonl")


def test_the_command_pools_files_per_fleet_and_refuses_a_missing_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = tmp_path / "1.jsonl", tmp_path / "2.jsonl"
    first.write_text("\n".join(_records("bypass", 0, [_turn(1.0), _turn(3.0, turn=1)])) + "\n")
    second.write_text("\n".join(_records("bypass", 0, [_turn(2.0)])) + "\n")
    assert main([str(first), str(second)]) == 0
    out = capsys.readouterr().out
    assert "### fleet bypass, pooled" in out
    assert "| pharos-cost | 2 | 3 | 2.00 s | 3.00 s | 0.0% | 2.00 / 2.00 | 3.00 / 2.00 |" in out
    assert main([str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl" in capsys.readouterr().err


@pytest.mark.timeout(120)
def test_a_repeated_scenario_prints_the_runs_pooled_after_their_own_tables() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.scenario", "--fleet", "fake", "--duration", "3",
         "--users", "2", "--repeat", "2", "--policies", "pharos-cost,sticky"],
        cwd=REPO, env=dict(os.environ), capture_output=True, text=True, timeout=100,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    pooled = done.stdout.split("2 runs pooled:")[1]
    rows = [line.strip("| ").split(" | ") for line in pooled.splitlines() if line.startswith("|")]
    by_policy = {r[0]: r for r in rows[2:]}
    assert list(by_policy) == ["pharos-cost", "sticky"]
    for row in by_policy.values():
        assert row[1] == "2"
        assert int(row[2]) > 0
        assert len(row[7].split(" / ")) == 2
