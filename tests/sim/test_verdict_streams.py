"""A verdict over several tie streams: which losses hold on every stream and which only on some
(those are decided by Pharos's tie breaks alone, since a stream changes nothing else)."""

from __future__ import annotations

import re

import pytest

from pharos.cmd.main import main
from pharos.sim import SCENARIOS, across_streams, simulate, simulate_streams

CHAT = SCENARIOS["chat"].with_duration(60.0)

# lost per stream | on every stream, on some only
ACROSS_CASES = [
    ([], (0, 0)),  # no streams: nothing lost
    ([{(1, "p50")}], (1, 0)),  # one stream: all of it every stream's
    ([{(1, "p50")}, {(1, "p50")}], (1, 0)),  # the same loss on both
    ([{(1, "p50")}, {(2, "p95")}], (0, 2)),  # different losses: both tie-decided
    ([{(1, "p50"), (2, "hit")}, {(1, "p50")}, set()], (0, 2)),  # one stream lost nothing
    ([{(1, "p50"), (2, "hit")}, {(1, "p50"), (2, "hit"), (3, "p95")}], (2, 1)),
]


@pytest.mark.parametrize(("lost", "expected"), ACROSS_CASES)
def test_losses_split_into_every_stream_and_some_only(
    lost: list[set[tuple[int, str]]], expected: tuple[int, int]
) -> None:
    assert across_streams([frozenset(s) for s in lost]) == expected


def test_baselines_run_once_and_pharos_once_per_stream() -> None:
    runs = simulate_streams(CHAT, ["cost", "sticky"], [2], [0, 3])
    (cost_0, sticky_0), (cost_3, sticky_3) = runs
    assert sticky_0 is sticky_3
    assert [s.ttft_s for s in cost_3.samples] == [
        s.ttft_s for s in simulate(CHAT, "cost", 2, tie_stream=3).samples
    ]
    assert [s.ttft_s for s in cost_0.samples] == [
        s.ttft_s for s in simulate(CHAT, "cost", 2).samples
    ]


def _lost(out: str) -> int:
    match = re.search(r"cost loses (\d+) comparisons", out)
    assert match is not None, out
    return int(match.group(1))


def test_several_streams_count_what_each_stream_alone_loses(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["sim", "-s", "chat,noisy", "--policies", "cost,sticky,cache-aware", "--seeds", "1,2"]
    argv += ["--duration", "120", "--verdict"]
    alone = []
    for stream in ("0", "1"):
        main([*argv, "--tie-stream", stream])
        alone.append(_lost(capsys.readouterr().out))
    main([*argv, "--tie-stream", "0,1"])
    out = capsys.readouterr().out
    assert "seeds 1,2, tie streams 0,1 (tables: 0)" in out
    match = re.search(
        r"verdict over every scenario, tie streams 0,1: cost loses (\d+) / (\d+) comparisons; "
        r"(\d+) on every stream, (\d+) on some only",
        out,
    )
    assert match is not None, out
    first, second, every, some = (int(g) for g in match.groups())
    assert [first, second] == alone
    assert 2 * every + some == first + second  # a loss on both counts on each stream
