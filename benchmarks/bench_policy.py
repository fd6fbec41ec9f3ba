"""Routing decision time, 64 mixed candidates (spec §15: p99 < 100 µs). Reported, not asserted.

Run: .venv/bin/python benchmarks/bench_policy.py

An `info` line per figure says what its p99 is made of: the garbage collections that ran
during the timed rounds (none so far: a pick frees what it allocates, so it never calls
obs.looplag.freeze_startup_objects() as `pharos serve` does) and an empty timed loop's p99,
the timer's own noise. The slow rounds are spread over every candidate set alike: machine
noise, so the p99 follows the p50.
"""

from __future__ import annotations

import gc
import os
import random
import time
from collections.abc import Sequence

from pharos.policy import DEFAULT_CONFIG, IMPLEMENTATION, POLICIES, Candidate, RouteReq

CANDIDATES = 64
SMOKE = os.environ.get("PHAROS_BENCH_SMOKE") == "1"  # tiny counts: CI checks it still runs
ROUNDS = 200 if SMOKE else 20_000


def mixed_candidates(rng: random.Random) -> list[Candidate]:
    """Warm, cold, loading and unknown-residency targets; some estimates unknown; some busy."""
    out: list[Candidate] = []
    for target_id in range(CANDIDATES):
        capacity = rng.choice((1, 2, 4, 8))
        out.append(
            Candidate(
                target_id=target_id,
                capacity=capacity,
                free_slots=rng.randint(0, capacity),
                queue_ahead=rng.randint(0, 3),
                warm=rng.choice((True, False, None)),
                kv_usage=rng.choice((None, 0.2, 0.95)),
                matched_tokens=rng.choice((0, 0, 512, 4096)),
                prefill_s_per_token=rng.choice((None, 0.002, 0.004)),
                load_s=rng.choice((None, 3.0, 12.0)),
                service_s=rng.choice((None, 2.0, 6.0)),
                fits_if_cold=rng.choice((None, True, False)),
                loading=rng.random() < 0.1,
            )
        )
    return out


def percentile(sorted_ns: Sequence[int], q: float) -> float:
    return sorted_ns[min(len(sorted_ns) - 1, int(q * len(sorted_ns)))] / 1000.0


def noop_p99_us(rounds: int) -> float:
    """The p99 of timing nothing: perf_counter_ns and the loop, the floor under every figure."""
    samples: list[int] = []
    for _ in range(rounds):
        start = time.perf_counter_ns()
        samples.append(time.perf_counter_ns() - start)
    samples.sort()
    return percentile(samples, 0.99)


def main() -> None:
    rng = random.Random(7)
    sets = [mixed_candidates(rng) for _ in range(32)]
    collections: list[int] = []

    def count_collections(phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(1)

    for name, label in (("cost", "pick-cost-64"), ("least-load", "pick-least-load-64")):
        pick = POLICIES[name]
        samples: list[int] = []
        collections.clear()
        gc.callbacks.append(count_collections)
        for i in range(ROUNDS):
            request = RouteReq(prompt_tokens=6000, seed=i)
            candidates = sets[i % len(sets)]
            start = time.perf_counter_ns()
            pick(request, candidates, DEFAULT_CONFIG)
            samples.append(time.perf_counter_ns() - start)
        gc.callbacks.remove(count_collections)
        samples.sort()
        p50, p99 = percentile(samples, 0.5), percentile(samples, 0.99)
        print(f"bench {label} p50_us={p50:.1f} p99_us={p99:.1f} policy={IMPLEMENTATION}")
        print(
            f"info {label} gc_collections={len(collections)} noop_p99_us={noop_p99_us(ROUNDS):.2f}"
        )


if __name__ == "__main__":
    main()
