"""The issue's table from what the clients timed and what the engines reported.

- TTFT p50/p95 over the turns served (client side, to the first delta);
- prompt-cache hit = sum(cache_n) / sum(cache_n + prompt_n), the engines' own timings;
  "unknown" when no turn carried timings (never 0);
- turns served of the planned ones (every policy sends the same turns, planned before the
  run; fewer: turns failed, or the run reached its bound, OVERRUN_FACTOR x the duration);
- wall: how long the policy took to serve them;
- follow-ups moved: turns after a conversation's first whose engine differs from the
  previous turn's (each move re-prefills the history elsewhere);
- prefill tok/s: each engine's median prefill speed from its own timings (prompt_n /
  prompt_ms, over turns that prefilled at least MIN_PREFILL_TOKENS), engine 0 first;
- queued: time the turn waited in Pharos's queue for a slot (p50 / p95; "-" without Pharos);
- model loads: for router fleets, the loads the routers logged (each a swap: 0.4-1.1 s);
- load: the machine's 1-minute load average as the policy's traffic started -> ended.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence

from benchmarks.scenario.client import TurnResult
from benchmarks.scenario.policies import PolicyRun

MIN_PREFILL_TOKENS = 32  # a few tokens' prefill time is mostly overhead


def prefill_speed(turns: Iterable[TurnResult], engine: str) -> str:
    speeds = sorted(
        1e3 * t.reply.prefilled_tokens / t.reply.prompt_ms
        for t in turns
        if t.engine == engine
        and t.reply is not None
        and t.reply.prefilled_tokens is not None
        and t.reply.prefilled_tokens >= MIN_PREFILL_TOKENS
        and t.reply.prompt_ms is not None
        and t.reply.prompt_ms > 0
    )
    return f"{statistics.median(speeds):.0f}" if speeds else "-"


def percentile(sorted_values: Sequence[float], share: float) -> float:
    """Nearest rank on a sorted list (p95 of 100 values is the 95th)."""
    return sorted_values[min(len(sorted_values) - 1, round(share * (len(sorted_values) - 1)))]


def moved_follow_ups(turns: Iterable[TurnResult]) -> tuple[int, int]:
    """(follow-ups whose engine differs from the turn before, follow-ups with both known)."""
    by_conv: dict[int, dict[int, str | None]] = {}
    for turn in turns:
        if turn.reply is not None:
            by_conv.setdefault(turn.conversation, {})[turn.turn] = turn.engine
    moved = known = 0
    for engines in by_conv.values():
        for number, engine in engines.items():
            before = engines.get(number - 1)
            if number == 0 or engine is None or before is None:
                continue
            known += 1
            moved += engine != before
    return moved, known


def counted(turns: Iterable[TurnResult]) -> list[TurnResult]:
    """The turns a policy is judged on: every user's, not the bypassing client's."""
    return [t for t in turns if not t.bypassed]


def ttfts_s(turns: Iterable[TurnResult]) -> list[float]:
    """The served turns' TTFTs, sorted."""
    return sorted(t.reply.ttft_s for t in turns if t.reply is not None)


def hit_ratio(turns: Iterable[TurnResult]) -> float | None:
    """sum(cache_n) / sum(cache_n + prompt_n) over the turns whose timings came; None when
    none did (unknown, never 0)."""
    cached = prefilled = 0
    for t in turns:
        reply = t.reply
        if reply is None or reply.cached_tokens is None or reply.prefilled_tokens is None:
            continue
        cached += reply.cached_tokens
        prefilled += reply.prefilled_tokens
    return cached / (cached + prefilled) if cached + prefilled else None


def row(run: PolicyRun) -> tuple[str, ...]:
    judged = counted(run.turns)
    served = [t for t in judged if t.reply is not None]
    failed = len(judged) - len(served)
    ttfts = ttfts_s(served)
    hit = hit_ratio(served)
    moved, known = moved_follow_ups(served)
    waits = sorted(t.queue_wait_s for t in served if t.queue_wait_s is not None)
    queued = f"{statistics.median(waits):.1f} / {percentile(waits, 0.95):.1f} s" if waits else "-"
    per_engine = "/".join(str(sum(t.engine == e for t in served)) for e in run.engines)
    return (
        run.policy,
        f"{statistics.median(ttfts):.2f} s" if ttfts else "-",
        f"{percentile(ttfts, 0.95):.2f} s" if ttfts else "-",
        "unknown" if hit is None else f"{100 * hit:.1f}%",
        str(len(served)) + (f" ({failed} failed)" if failed else ""),
        per_engine,
        "/".join(prefill_speed(run.turns, e) for e in run.engines),
        f"{moved}/{known}",
        queued,
        "-" if run.model_loads is None else str(run.model_loads),
        f"{run.load_before:.1f} -> {run.load_after:.1f}",
        f"{run.wall_s:.0f} s",
    )


HEADER = (
    "policy",
    "TTFT p50",
    "TTFT p95",
    "prompt-cache hit",
    "turns served",
    "per engine (e0/e1)",
    "prefill tok/s (e0/e1)",
    "follow-ups moved",
    "queued p50 / p95",
    "model loads",
    "load 1m",
    "wall",
)


def markdown(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(r) + " |" for r in (header, *rows)]
    lines.insert(1, "|" + "---|" * len(header))
    return "\n".join(lines)


def table(runs: Iterable[PolicyRun]) -> str:
    """A Markdown table, one row per policy run, in the order they ran."""
    return markdown(HEADER, (row(run) for run in runs))
