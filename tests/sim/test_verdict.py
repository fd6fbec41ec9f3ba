"""`pharos sim --verdict`: cost against the best baseline, per seed, on issue 15's figures."""

import pytest

from pharos.cmd.main import main
from pharos.sim import (
    Result,
    Sample,
    format_judged_alike,
    format_losses_by_baseline,
    judged_alike,
    losses_by_baseline,
    verdict,
)


def run(policy: str, seed: int, ttfts_s: list[float], cached_tokens: int) -> Result:
    """A run of ten-token prompts: `cached_tokens` of each prompt came from the cache."""
    samples = tuple(Sample("chat", "u", t, 10, cached_tokens, 0.0) for t in ttfts_s)
    return Result("s", policy, seed, samples, model_loads=0)


# policy   seed  TTFTs (s)         cached of 10
# cost     1     1, 1, 1           8        -> beats sticky on hit, ties cache-aware on p50/p95
# sticky   1     2, 2, 2           7
# cache    1     1, 1, 1           6
# cost     2     3, 3, 3           5        -> loses hit to sticky, p50 and p95 to cache-aware
# sticky   2     2, 2, 2           9
# cache    2     1, 1, 1           4
RESULTS = [
    run("cost", 1, [1, 1, 1], 8),
    run("sticky", 1, [2, 2, 2], 7),
    run("cache-aware", 1, [1, 1, 1], 6),
    run("cost", 2, [3, 3, 3], 5),
    run("sticky", 2, [2, 2, 2], 9),
    run("cache-aware", 2, [1, 1, 1], 4),
]


def test_each_figure_is_judged_against_the_best_baseline_on_it_and_a_tie_holds() -> None:
    lines, losses = verdict(RESULTS, "cost", ["sticky", "cache-aware"])
    seed1, seed2, total = lines.splitlines()
    assert seed1.count("holds") == 3 and "LOSES" not in seed1
    assert "hit 50.0% vs sticky 90.0% LOSES" in seed2
    assert "p50 3.00 s vs cache-aware 1.00 s LOSES" in seed2
    assert "p95 3.00 s vs cache-aware 1.00 s LOSES" in seed2
    assert losses == 3
    assert total.endswith("loses 3 of 6 comparisons")


def test_a_seed_without_a_baseline_run_is_not_judged() -> None:
    lines, losses = verdict(RESULTS[:1], "cost", ["sticky"])
    assert losses == 0 and lines.endswith("loses 0 of 0 comparisons")


def test_the_verdict_flag_exits_1_when_cost_loses_anywhere(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["sim", "-s", "chat", "--policies", "cost,round-robin", "--seeds", "1"]
    status = main([*argv, "--duration", "120", "--verdict"])
    out = capsys.readouterr().out
    assert "verdict:" in out and "cost against the best of round-robin" in out
    lost = int(out.rsplit("cost loses ", 1)[1].split()[0])
    assert status == (1 if lost else 0)


def test_the_verdict_needs_cost_and_a_baseline(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["sim", "-s", "chat", "--policies", "sticky", "--duration", "60", "--verdict"])
    assert status == 2
    assert "--verdict needs cost and at least one baseline" in capsys.readouterr().err


def test_each_baseline_alone_counts_the_seeds_it_beats_cost_on_each_figure() -> None:
    # RESULTS above: seed 2 loses hit to sticky (9 of 10 cached against 5) and p50 and p95 to
    # both (sticky 2 s, cache-aware 1 s, cost 3 s); seed 1 loses nothing to either
    lost = losses_by_baseline(RESULTS, "cost", ["sticky", "cache-aware"])
    assert lost == {"sticky": (1, 1, 1), "cache-aware": (0, 1, 1)}
    assert format_losses_by_baseline(lost) == "sticky 1 / 1 / 1, cache-aware 0 / 1 / 1"


def test_the_verdict_flag_says_which_baseline_each_loss_is_to(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["sim", "-s", "chat", "--policies", "cost,round-robin,sticky", "--seeds", "1"]
    main([*argv, "--duration", "120", "--verdict"])
    out = capsys.readouterr().out.splitlines()
    alone = [line for line in out if line.startswith("seeds lost to each baseline alone")]
    assert len(alone) == 2  # the scenario's, then the sum over every scenario
    assert alone[0].endswith(alone[1].rsplit(": ", 1)[1])  # one scenario: the same counts
    assert "round-robin " in alone[0] and "sticky " in alone[0]
    assert out[-1].startswith("verdict over every scenario: cost loses ")


def test_every_router_judged_alike_counts_what_it_loses_to_the_best_of_the_others() -> None:
    # RESULTS above, each router against the best of the other two on each seed:
    # cost         seed 2 loses hit (sticky), p50 and p95 (cache-aware)             -> 3
    # sticky       seed 1 loses hit (cost), p50 and p95 (both at 1 s); seed 2 p50, p95 -> 5
    # cache-aware  seed 1 loses hit (cost; p50 and p95 tie at 1 s); seed 2 hit (sticky) -> 2
    lost = judged_alike(RESULTS, ["cost", "sticky", "cache-aware"])
    assert lost == {"cost": 3, "sticky": 5, "cache-aware": 2}
    assert lost["cost"] == verdict(RESULTS, "cost", ["sticky", "cache-aware"])[1]
    assert format_judged_alike(lost) == "cost 3, sticky 5, cache-aware 2"


def test_the_verdict_flag_judges_every_router_alike_per_scenario_and_over_all(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["sim", "-s", "chat,hetero", "--policies", "cost,round-robin,sticky", "--seeds", "1,2"]
    main([*argv, "--duration", "120", "--verdict"])
    out = capsys.readouterr().out.splitlines()
    alike = [line for line in out if line.startswith("every router judged as cost is")]
    assert len(alike) == 3  # chat's, hetero's, then the sum over both
    counts = [dict(c.rsplit(" ", 1) for c in line.rsplit(": ", 1)[1].split(", ")) for line in alike]
    assert [list(c) for c in counts] == [["cost", "round-robin", "sticky"]] * 3
    for policy in ("cost", "round-robin", "sticky"):
        assert int(counts[2][policy]) == int(counts[0][policy]) + int(counts[1][policy])
    # chat's engines are equal, so the verdict holds cost to no more than the others are held to
    chat_verdict = next(line for line in out if line.startswith("cost against the best"))
    assert chat_verdict.split("loses ")[1].split()[0] == counts[0]["cost"]
