"""Why a target won, as a fixed label and as a sentence for people (spec §7, §13)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from pharos.policy.types import Candidate, Score, Terms, Why

ENGINE_QUEUE_NOTE = "no free slot: sent into the engine's own queue"
"""A decision to wait reaches a lease only when the scheduler sends the request into a full
engine's own queue (sched/engine_joins.py); a request granted from our fair queue carries the
decision made when its slot freed. Was "queued: no free slot", read as our queue."""


def why_against_least_loaded(chosen: Terms, least_loaded: Terms) -> Why:
    """`cache` if the chosen target's cached prefix saved more than its loaded model did against
    the least utilized target, `warm` if the loaded model saved more, else `least_loaded`. A
    key home's charge (away_s) counts as cache: the home holds the person's last chat in its
    slot and host cache (issue 15: such picks had been labelled `least_loaded`). The spread
    charge (spread_s) is load, neither cache nor warm."""
    if chosen.target_id == least_loaded.target_id:
        return "least_loaded"
    cache_saved_s = (least_loaded.prefill_s + least_loaded.kv_penalty_s + least_loaded.rework_s) - (
        chosen.prefill_s + chosen.kv_penalty_s + chosen.rework_s
    )
    cache_saved_s += least_loaded.evict_s - chosen.evict_s
    cache_saved_s += least_loaded.away_s - chosen.away_s
    warm_saved_s = least_loaded.load_s - chosen.load_s
    if cache_saved_s <= 0 and warm_saved_s <= 0:
        return "least_loaded"
    return "cache" if cache_saved_s >= warm_saved_s else "warm"


def waited_reason(granted: str, arrival: str, waited_s: float) -> str:
    """A request granted from the fair queue: the reason its slot was granted by, then how long
    it queued and the reason it queued by, with its expected wait: `warm, est 0.1s vs 7.5s (less
    cached); queued 4.6s, on arrival: warm, wait 0.3s, est 0.5s vs 7.5s (less cached)`. On the
    real speed fleet (make scenario, 2026-12-07) turns granted 3.5-5.2 s after they queued
    showed only the grant's `wait 33-63 ms`. The arrival decision's engine-queue note is
    dropped: it queued in ours."""
    arrival = arrival.removesuffix(f", {ENGINE_QUEUE_NOTE}")
    return f"{granted}; queued {format_s(waited_s)}, on arrival: {arrival}"


def format_s(seconds: float) -> str:
    if math.isinf(seconds):
        return "inf"
    if seconds >= 0.1:
        return f"{seconds:.1f}s"
    return f"{seconds * 1000:.0f}ms"


def format_tokens(tokens: int) -> str:
    if tokens >= 1000:
        return f"{tokens / 1000:.1f}k"
    return str(tokens)


def residency_word(candidate: Candidate) -> str:
    if candidate.warm is None:
        return "residency unknown"
    if candidate.warm:
        return "warm"
    return "loading" if candidate.loading else "cold"


def _runner_up_tag(chosen: Score, other: Score) -> str:
    gaps = (
        (other.load_s - chosen.load_s, "cold"),
        (other.wait_s - chosen.wait_s, "busy"),
        (
            other.prefill_s
            + other.kv_penalty_s
            + other.rework_s
            - chosen.prefill_s
            - chosen.kv_penalty_s
            - chosen.rework_s,
            "less cached",
        ),
        (
            other.evict_s - chosen.evict_s,
            "evicts a conversation",
        ),
        (other.away_s - chosen.away_s, "off its key's home"),
        (other.spread_s - chosen.spread_s, "more conversations"),
    )
    gap, tag = max(gaps, key=lambda g: g[0])
    return tag if gap > 0 else "tie"


def describe(
    candidate: Candidate,
    scores: Sequence[Score],
    best: int,
    runner_up_idx: int,
    infeasible: int,
    enqueue: bool,
) -> str:
    """E.g. `warm, 1.2k cached tok, est 0.4s vs 3.1s (cold)`. runner_up_idx -1: none."""
    chosen = scores[best]
    parts = [residency_word(candidate)]
    if candidate.matched_tokens > 0:
        parts.append(f"{format_tokens(candidate.matched_tokens)} cached tok")
    if chosen.wait_s > 0:
        parts.append(f"wait {format_s(chosen.wait_s)}")
    runner_up = scores[runner_up_idx] if runner_up_idx >= 0 else None
    estimate = f"est {format_s(chosen.est_ttft_s)}"
    if runner_up is not None:
        estimate += f" vs {format_s(runner_up.est_ttft_s)} ({_runner_up_tag(chosen, runner_up)})"
    parts.append(estimate)
    if infeasible:
        parts.append(
            f"{infeasible} cold load{'s' if infeasible > 1 else ''} would evict busy models"
        )
    if enqueue:
        parts.append(ENGINE_QUEUE_NOTE)
    return ", ".join(parts)
