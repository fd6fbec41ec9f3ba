"""Several runs of one fleet pooled: each policy's turns over all its runs, as one sample.

Why: a 300 s run serves 206 turns, so its p95 is the 11th slowest, and on the bypass fleet
sticky's p95 moved 3.59 -> 3.16 -> 4.59 s over three runs of the same sessions, map and
engines (2026-12-07), where cost's and sticky's differ by 0.4-0.8 s. Pooling N runs makes
the p95 the (11 N)th slowest turn; every run's own p50 and p95 are listed beside it, so the
spread between runs stays in sight.

`make scenario ARGS="... --repeat N"` prints this table after the runs' own; for runs already
made, pool their `--out` files:

    .venv/bin/python -m benchmarks.scenario.pooled /tmp/a.jsonl /tmp/b.jsonl
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import msgspec
from benchmarks.scenario.client import TurnResult
from benchmarks.scenario.report import counted, hit_ratio, markdown, percentile, ttfts_s

# what --out adds to each turn's record besides the TurnResult's own fields
_RUN_FIELDS = ("fleet", "repeat", "engine_index", "load_before")


@dataclass(frozen=True)
class Pooled:
    policy: str
    runs: int
    turns: int  # served, over every run
    p50_s: float | None  # the median, as each run's table; None: no turn was served
    p95_s: float | None
    hit: float | None  # None: no turn's timings came
    p50_per_run_s: tuple[float, ...]  # runs that served a turn, in the order given
    p95_per_run_s: tuple[float, ...]


def pool(policy: str, runs: Sequence[Sequence[TurnResult]]) -> Pooled:
    """`runs`: the policy's turns, one sequence per run (the bypassing client's are left out)."""
    per_run = [ttfts_s(counted(turns)) for turns in runs]
    every = sorted(t for ttfts in per_run for t in ttfts)
    served = [ttfts for ttfts in per_run if ttfts]
    return Pooled(
        policy=policy,
        runs=len(runs),
        turns=len(every),
        p50_s=statistics.median(every) if every else None,
        p95_s=percentile(every, 0.95) if every else None,
        hit=hit_ratio(t for turns in runs for t in counted(turns)),
        p50_per_run_s=tuple(statistics.median(ttfts) for ttfts in served),
        p95_per_run_s=tuple(percentile(ttfts, 0.95) for ttfts in served),
    )


HEADER = (
    "policy",
    "runs",
    "turns",
    "TTFT p50 pooled",
    "TTFT p95 pooled",
    "prompt-cache hit",
    "p50 per run",
    "p95 per run",
)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def _row(pooled: Pooled) -> tuple[str, ...]:
    return (
        pooled.policy,
        str(pooled.runs),
        str(pooled.turns),
        _seconds(pooled.p50_s),
        _seconds(pooled.p95_s),
        "unknown" if pooled.hit is None else f"{100 * pooled.hit:.1f}%",
        " / ".join(f"{v:.2f}" for v in pooled.p50_per_run_s) or "-",
        " / ".join(f"{v:.2f}" for v in pooled.p95_per_run_s) or "-",
    )


def table(runs_by_policy: Mapping[str, Sequence[Sequence[TurnResult]]]) -> str:
    """A Markdown table, one row per policy, in the mapping's order."""
    return markdown(HEADER, (_row(pool(p, runs)) for p, runs in runs_by_policy.items()))


class BadRecord(Exception):
    """A line of an --out file that is not a turn record."""


def read_out(lines: Iterable[str], source: str) -> dict[str, dict[str, list[list[TurnResult]]]]:
    """--out's JSON lines as fleet -> policy -> runs -> turns. A run is one (file, repeat):
    two files' repeat 0 are two runs."""
    runs: dict[str, dict[str, dict[tuple[str, int], list[TurnResult]]]] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            fleet, repeat = str(record["fleet"]), int(record["repeat"])
            turn = msgspec.convert(
                {k: v for k, v in record.items() if k not in _RUN_FIELDS}, TurnResult
            )
        except (ValueError, KeyError, TypeError, msgspec.ValidationError) as err:
            raise BadRecord(f"{source}:{number}: not a scenario turn record ({err})") from None
        by_policy = runs.setdefault(fleet, {}).setdefault(turn.policy, {})
        by_policy.setdefault((source, repeat), []).append(turn)
    return {
        fleet: {policy: list(by_run.values()) for policy, by_run in by_policy.items()}
        for fleet, by_policy in runs.items()
    }


def _merge(
    into: dict[str, dict[str, list[list[TurnResult]]]],
    more: dict[str, dict[str, list[list[TurnResult]]]],
) -> None:
    for fleet, by_policy in more.items():
        for policy, runs in by_policy.items():
            into.setdefault(fleet, {}).setdefault(policy, []).extend(runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scenario.pooled",
        description="Pool the turns of `make scenario --out FILE` runs: one table per fleet, "
        "each policy's TTFT p50/p95 and prompt-cache hit over all its runs, and every run's "
        "own p50 and p95.",
    )
    parser.add_argument("files", nargs="+", type=Path, help="--out files (JSON lines)")
    args = parser.parse_args(argv)
    pooled: dict[str, dict[str, list[list[TurnResult]]]] = {}
    for path in args.files:
        try:
            with path.open() as lines:
                _merge(pooled, read_out(lines, str(path)))
        except (OSError, UnicodeDecodeError, BadRecord) as err:
            print(f"pooled: {err}", file=sys.stderr)
            return 2
    if not pooled:
        print("pooled: no turns in " + ", ".join(map(str, args.files)), file=sys.stderr)
        return 2
    for fleet, by_policy in pooled.items():
        print(f"\n### fleet {fleet}, pooled\n{table(by_policy)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
