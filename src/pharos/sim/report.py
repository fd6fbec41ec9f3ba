"""Tables of simulated runs: one row per policy, figures per seed side by side."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pharos.sim.run import Result, percentile

COLUMNS = ("hit%", "loads", "p50 s", "p95 s", "p99 s", "fair", "turns")


def _cells(result: Result) -> tuple[str, ...]:
    return (
        f"{100 * result.cache_hit_ratio:.1f}",
        str(result.model_loads),
        f"{result.ttft(0.50):.2f}",
        f"{result.ttft(0.95):.2f}",
        f"{result.ttft(0.99):.2f}",
        f"{result.fairness:.2f}",
        str(len(result.samples)),
    )


def table(results: Sequence[Result]) -> str:
    """Rows: policy; columns: each figure, `a / b / c` over the seeds in order."""
    policies = list(dict.fromkeys(r.policy for r in results))
    seeds = sorted({r.seed for r in results})
    header = ["policy", *COLUMNS]
    rows = [header]
    for policy in policies:
        by_seed = {r.seed: r for r in results if r.policy == policy}
        cells = [_cells(by_seed[s]) for s in seeds if s in by_seed]
        rows.append([policy, *(" / ".join(c[i] for c in cells) for i in range(len(COLUMNS)))])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def class_table(results: Sequence[Result]) -> str:
    """TTFT p50/p95 per request class and policy, all seeds pooled."""
    classes = sorted({c for r in results for c in r.classes})
    policies = list(dict.fromkeys(r.policy for r in results))
    rows = [["policy", *(f"{c} p50/p95" for c in classes)]]
    for policy in policies:
        mine = [r for r in results if r.policy == policy]
        row = [policy]
        for klass in classes:
            pooled = sorted(s.ttft_s for r in mine for s in r.samples if s.klass == klass)
            row.append(f"{percentile(pooled, 0.5):.2f}/{percentile(pooled, 0.95):.2f}")
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(widths[i]) for i, c in enumerate(row)) for row in rows)


def _hit_percent(result: Result) -> float:
    return 100 * result.cache_hit_ratio


def _p50_s(result: Result) -> float:
    return result.ttft(0.50)


def _p95_s(result: Result) -> float:
    return result.ttft(0.95)


# Issue 15's bar: cost at least as good as the best baseline on each of these, every seed.
# (name, figure, higher is better, how far apart counts as a tie, how it prints)
_VERDICT_FIGURES: tuple[tuple[str, Callable[[Result], float], bool, float, str], ...] = (
    ("hit", _hit_percent, True, 0.05, "{:.1f}%"),
    ("p50", _p50_s, False, 0.005, "{:.2f} s"),
    ("p95", _p95_s, False, 0.005, "{:.2f} s"),
)


def verdict(results: Sequence[Result], policy: str, baselines: Sequence[str]) -> tuple[str, int]:
    """Per seed, `policy` against the best of `baselines` on hit ratio and TTFT p50 and p95:
    the lines to print, and how many (seed, figure) comparisons it loses. A difference that
    rounds to nothing at the table's precision is a tie, not a loss."""
    seeds = sorted({r.seed for r in results})
    by_key = {(r.policy, r.seed): r for r in results}
    lines: list[str] = []
    losses = 0
    for seed in seeds:
        mine = by_key.get((policy, seed))
        others = [by_key[(b, seed)] for b in baselines if (b, seed) in by_key]
        if mine is None or not others:
            continue
        cells: list[str] = []
        for name, figure, higher_wins, tie, shown in _VERDICT_FIGURES:
            best = (max if higher_wins else min)(others, key=figure)
            ahead = (figure(mine) - figure(best)) * (1 if higher_wins else -1)
            lost = ahead < -tie
            losses += lost
            mark = "LOSES" if lost else "holds"
            cells.append(
                f"{name} {shown.format(figure(mine))} vs {best.policy} "
                f"{shown.format(figure(best))} {mark}"
            )
        lines.append(f"seed {seed}: " + "; ".join(cells))
    compared = 3 * len(lines)
    lines.append(
        f"{policy} against the best of {', '.join(baselines)}: "
        f"loses {losses} of {compared} comparisons"
    )
    return "\n".join(lines), losses
