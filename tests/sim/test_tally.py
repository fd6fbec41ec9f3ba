"""VerdictTally: `pharos sim --verdict`'s sums over scenarios, on one tie stream or several."""

from pharos.sim import Result, Sample, verdict
from pharos.sim.tally import VerdictTally


def run(policy: str, seed: int, ttft_s: float, cached_tokens: int) -> Result:
    """Three ten-token prompts, each `ttft_s` to first token with `cached_tokens` cached."""
    samples = tuple(Sample("chat", "u", ttft_s, 10, cached_tokens, 0.0) for _ in range(3))
    return Result("s", policy, seed, samples, model_loads=0)


# scenario  cost (TTFT s, cached)  sticky      what cost loses
# A         1 s, 8                 2 s, 7      nothing
# B         3 s, 5                 2 s, 9      hit, p50, p95
A = [run("cost", 1, 1.0, 8), run("sticky", 1, 2.0, 7)]
B = [run("cost", 1, 3.0, 5), run("sticky", 1, 2.0, 9)]
# B on a second tie stream, where cost ties sticky on p50 and p95 and still loses the hit
B_STREAM_1 = [run("cost", 1, 2.0, 5), B[1]]


def test_one_stream_sums_each_scenarios_verdict_and_judges_sticky_alike() -> None:
    tally = VerdictTally([0])
    for results in (A, B):
        tally.add([results], ["sticky"], strictly_beats=None, engines_differ=False)
    assert tally.losses == verdict(A, "cost", ["sticky"])[1] + verdict(B, "cost", ["sticky"])[1]
    assert tally.losses == 3
    summary = tally.summary().splitlines()
    assert summary[0].endswith("sticky 1 / 1 / 1")  # seed 1 of B, on each figure
    assert summary[1].endswith("every scenario: cost 3, sticky 3")  # A's 3 for sticky, B's for cost
    assert summary[2] == "verdict over every scenario: cost loses 3 comparisons"


def test_several_streams_count_every_stream_apart_from_some_only() -> None:
    tally = VerdictTally([0, 1])
    tally.add([A, A], ["sticky"], strictly_beats=None, engines_differ=False)
    text = tally.add([B, B_STREAM_1], ["sticky"], strictly_beats=None, engines_differ=False)
    assert text.endswith("loses 3 / 1 comparisons; 1 on every stream, 2 on some only (tie breaks)")
    assert tally.losses == 4
    assert tally.summary().splitlines()[-1] == (
        "verdict over every scenario, tie streams 0,1: cost loses 3 / 1 comparisons; "
        "1 on every stream, 2 on some only (tie breaks)"
    )


def test_engines_that_differ_without_a_sticky_run_say_so() -> None:
    results = [run("cost", 1, 1.0, 8), run("round-robin", 1, 2.0, 7)]
    text = VerdictTally([0]).add(
        [results], ["round-robin"], strictly_beats=None, engines_differ=True
    )
    assert text.endswith("(its engines differ: cost against sticky is not judged, no sticky run)")
