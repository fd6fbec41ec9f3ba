"""Tables of simulated runs: one row per policy, figures per seed side by side."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pharos.sim.run import Result, Sample, percentile

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


def _turn_key(sample: Sample) -> tuple[str, int, int, str]:
    return (sample.user, sample.session_index, sample.turn_index, sample.klass)


def _loses(
    mine: Result,
    other: Result,
    figure: Callable[[Result], float],
    higher_wins: bool,
    tie: float,
) -> bool:
    """Whether `mine` is worse than `other` on `figure` by more than a tie."""
    return (figure(mine) - figure(other)) * (1 if higher_wins else -1) < -tie


def same_turns_hit_percent(mine: Result, other: Result) -> tuple[float, float, int]:
    """Both runs' hit ratio over only the turns both served, and how many. Runs of one
    scenario and seed serve the same turns (run.planned_turns), so this equals the runs' own
    ratios; it stays beside a hit loss as the check that they compared the same prompts."""
    theirs = {_turn_key(s): s for s in other.samples}
    shared = [(s, theirs[_turn_key(s)]) for s in mine.samples if _turn_key(s) in theirs]
    prompt = sum(a.prompt_tokens for a, _ in shared)
    if prompt == 0:
        return float("nan"), float("nan"), len(shared)
    return (
        100 * sum(a.cached_tokens for a, _ in shared) / prompt,
        100 * sum(b.cached_tokens for _, b in shared) / prompt,
        len(shared),
    )


Judged = list[tuple[int, list[tuple[str, bool, str]]]]
"""Per seed: each comparison's name, whether it was lost, and how it prints."""


def _judge(
    results: Sequence[Result],
    policy: str,
    baselines: Sequence[str],
    strictly_beats: str | None,
) -> Judged:
    """Every comparison `verdict` prints and counts, per seed: one pass that both the printed
    verdict and the set compared across tie streams (lost_comparisons) read."""
    seeds = sorted({r.seed for r in results})
    by_key = {(r.policy, r.seed): r for r in results}
    judged: Judged = []
    for seed in seeds:
        mine = by_key.get((policy, seed))
        others = [by_key[(b, seed)] for b in baselines if (b, seed) in by_key]
        if mine is None or not others:
            continue
        cells: list[tuple[str, bool, str]] = []
        for name, figure, higher_wins, tie, shown in _VERDICT_FIGURES:
            best = (max if higher_wins else min)(others, key=figure)
            lost = _loses(mine, best, figure, higher_wins, tie)
            mark = "LOSES" if lost else "holds"
            if lost and name == "hit":
                own, theirs, turns = same_turns_hit_percent(mine, best)
                mark += f" (on the {turns} turns both served: {own:.2f}% vs {theirs:.2f}%)"
            text = (
                f"{name} {shown.format(figure(mine))} vs {best.policy} "
                f"{shown.format(figure(best))} {mark}"
            )
            cells.append((name, lost, text))
        rival = by_key.get((strictly_beats, seed)) if strictly_beats is not None else None
        if rival is not None:
            for name, figure, _, tie, shown in _VERDICT_FIGURES[1:]:
                lost = figure(rival) - figure(mine) <= tie
                mark = "NOT STRICTLY" if lost else "strictly"
                text = f"{name} {mark} under {rival.policy}'s {shown.format(figure(rival))}"
                cells.append((f"{name} under {rival.policy}", lost, text))
        judged.append((seed, cells))
    return judged


def verdict(
    results: Sequence[Result],
    policy: str,
    baselines: Sequence[str],
    *,
    strictly_beats: str | None = None,
) -> tuple[str, int]:
    """Per seed, `policy` against the best of `baselines` on hit ratio and TTFT p50 and p95:
    the lines to print, and how many (seed, figure) comparisons it loses. A difference that
    rounds to nothing at the table's precision is a tie, not a loss. `strictly_beats`: a
    baseline `policy` must beat on TTFT p50 and p95 by more than a tie (issue 15: strictly
    better than sticky wherever engines differ in speed or load). A hit loss also shows the
    hit ratio over the turns both served (same_turns_hit_percent)."""
    lines: list[str] = []
    losses = compared = 0
    for seed, cells in _judge(results, policy, baselines, strictly_beats):
        losses += sum(lost for _, lost, _ in cells)
        compared += len(cells)
        lines.append(f"seed {seed}: " + "; ".join(text for _, _, text in cells))
    against = f"the best of {', '.join(baselines)}"
    if strictly_beats is not None:
        against += f", strictly under {strictly_beats} on p50 and p95"
    lines.append(f"{policy} against {against}: loses {losses} of {compared} comparisons")
    return "\n".join(lines), losses


def lost_comparisons(
    results: Sequence[Result],
    policy: str,
    baselines: Sequence[str],
    *,
    strictly_beats: str | None = None,
) -> frozenset[tuple[int, str]]:
    """The (seed, comparison) pairs `verdict` counts as lost, e.g. (3, "p95") or
    (3, "p50 under sticky"): what runs on several tie streams are compared by."""
    return frozenset(
        (seed, name)
        for seed, cells in _judge(results, policy, baselines, strictly_beats)
        for name, lost, _ in cells
        if lost
    )


def judged_alike(results: Sequence[Result], policies: Sequence[str]) -> dict[str, int]:
    """Per policy, the comparisons it loses judged as `verdict` judges cost: hit ratio, TTFT p50
    and p95 against the best of the other `policies` on each seed (no strictly-under-sticky
    rule, which sticky can't be held to). It says how hard the bar is, not only who misses it:
    over all sixteen scenarios, seeds 1-20 (2026-12-07, main 67ac10e), cost lost 172 of 960,
    sticky 585, cache-aware 864, least-outstanding 929 and round-robin 933."""
    return {
        policy: len(lost_comparisons(results, policy, [p for p in policies if p != policy]))
        for policy in policies
    }


def format_judged_alike(lost: dict[str, int]) -> str:
    """E.g. `cost 10, round-robin 60, sticky 34` (comparisons lost, judged alike)."""
    return ", ".join(f"{policy} {count}" for policy, count in lost.items())


def across_streams(lost_per_stream: Sequence[frozenset[tuple[int, str]]]) -> tuple[int, int]:
    """Comparisons lost on every stream, and on some streams but not all: the second are
    decided by Pharos's tie breaks alone, since a stream changes nothing else (sim/routers.py).
    Over streams 0-3 of 2026-12-07 (seeds 1-20, p50 and p95 against the best baseline), 92 of
    640 were lost on every stream and 126 on some (docs/routing-log.md)."""
    if not lost_per_stream:
        return 0, 0
    every = frozenset.intersection(*lost_per_stream)
    some = frozenset.union(*lost_per_stream)
    return len(every), len(some) - len(every)


def losses_by_baseline(
    results: Sequence[Result], policy: str, baselines: Sequence[str]
) -> dict[str, tuple[int, ...]]:
    """Per baseline alone, the seeds on which `policy` loses each verdict figure (hit, p50,
    p95) to it, ties as in `verdict`. The verdict judges each figure against whichever baseline
    is best on it, so one seed's bar can be sticky's hit ratio and cache-aware's p95: a router
    no one runs. This says which router a loss is to."""
    by_key = {(r.policy, r.seed): r for r in results}
    lost: dict[str, tuple[int, ...]] = {}
    for baseline in baselines:
        counts = [0] * len(_VERDICT_FIGURES)
        for (name, seed), mine in by_key.items():
            other = by_key.get((baseline, seed))
            if name != policy or other is None:
                continue
            for i, (_, figure, higher_wins, tie, _) in enumerate(_VERDICT_FIGURES):
                counts[i] += _loses(mine, other, figure, higher_wins, tie)
        lost[baseline] = tuple(counts)
    return lost


def format_losses_by_baseline(lost: dict[str, tuple[int, ...]]) -> str:
    """E.g. `sticky 3 / 0 / 6, cache-aware 0 / 2 / 5` (seeds lost on hit / p50 / p95)."""
    return ", ".join(f"{b} {' / '.join(str(n) for n in counts)}" for b, counts in lost.items())


def moved_turns(result: Result) -> list[Sample]:
    """The follow-ups served by another engine than the conversation's turn before (a
    classifier call stands alone: never a follow-up)."""
    last_engine: dict[tuple[str, int, str], tuple[int, str]] = {}
    moved: list[Sample] = []
    for sample in sorted(result.samples, key=lambda s: (s.user, s.session_index, s.turn_index)):
        conversation = (sample.user, sample.session_index, sample.klass)
        before = last_engine.get(conversation)
        if before is not None and before[1] != sample.engine and sample.klass != "classifier":
            moved.append(sample)
        last_engine[conversation] = (sample.turn_index, sample.engine)
    return moved


def moves(results: Sequence[Result], policy: str, against: str) -> str:
    """Per seed, what `policy`'s moves bought or lost against the same turns under `against`:
    how many follow-ups moved, the cached tokens and TTFT of those turns in both runs (sticky
    never moves a conversation, so each of its turns is what staying would have given)."""
    by_key = {(r.policy, r.seed): r for r in results}
    lines: list[str] = []
    for seed in sorted({r.seed for r in results}):
        mine, other = by_key.get((policy, seed)), by_key.get((against, seed))
        if mine is None or other is None:
            continue
        theirs = {_turn_key(s): s for s in other.samples}
        moved = moved_turns(mine)
        follow_ups = sum(1 for s in mine.samples if s.turn_index > 0 and s.klass != "classifier")
        paired = [(s, theirs[_turn_key(s)]) for s in moved if _turn_key(s) in theirs]
        line = f"seed {seed}: {policy} moved {len(moved)} of {follow_ups} follow-ups"
        if paired:
            cached = sum(a.cached_tokens for a, _ in paired)
            their_cached = sum(b.cached_tokens for _, b in paired)
            ttft = sum(a.ttft_s for a, _ in paired)
            their_ttft = sum(b.ttft_s for _, b in paired)
            line += (
                f"; on the {len(paired)} {against} also served: {cached} cached tokens vs "
                f"{their_cached}, TTFT summed {ttft:.2f} s vs {their_ttft:.2f} s"
            )
        lines.append(line)
    return "\n".join(lines)
