"""Scheduler acquire + release with 64 targets serving one model. Reported, never asserted.

Each round acquires a lease (candidates from 64 views, a prefix lookup, the cost pick, taking
the slot) and releases it with feedback (EWMA samples, a prefix record, serving the queue).
An acquire that finds a free slot never suspends, so the coroutine is stepped by hand: this
measures the scheduler, not the event loop.

The `info` line counts the garbage collections during the timed rounds (none so far: a round
frees what it allocates, so the benchmark doesn't call obs.looplag.freeze_startup_objects()
as `pharos serve` does) and gives an empty timed loop's p99. The slow rounds are scattered,
none of them a collection: machine noise, so the p99 follows the p50.

Run: .venv/bin/python benchmarks/bench_sched.py
"""

from __future__ import annotations

import asyncio
import gc
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import MappingProxyType

from pharos.clock import FakeClock
from pharos.engine.types import Kind, Load, ModelInfo, Residency, Snapshot
from pharos.engine.usage import Usage
from pharos.policy import IMPLEMENTATION
from pharos.prefix import Chain, PrefixIndex, chain_for_chat
from pharos.sched import Feedback, Lease, RouteRequest, Scheduler
from pharos.state import BackendSpec, State
from pharos.state.view import TargetView

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: the repo root
from tests.state.fakes import NO_SESSION, FakeEngine, engine_fns

TARGETS = 64
SMOKE = os.environ.get("PHAROS_BENCH_SMOKE") == "1"  # tiny counts: CI checks it still runs
ROUNDS = 100 if SMOKE else 5_000
MODEL = "qwen2.5"
ROUND_S = 0.01  # fake time between rounds: 100 requests a second
FAST_INTERVAL_S = 1.0  # StateOptions' default: each backend's load round


class StaticTargets:
    """A TargetSource over fixed views; observe and reply_succeeded do nothing."""

    def __init__(self, views: list[TargetView]) -> None:
        self._views = views
        self._by_backend: dict[str, list[TargetView]] = {}
        for view in views:
            self._by_backend.setdefault(view.backend_url, []).append(view)

    def targets_for_model(self, _model: str, _now: float) -> Sequence[TargetView]:
        return self._views

    def targets_of_backend(self, backend_url: str, _now: float) -> Sequence[TargetView]:
        return self._by_backend.get(backend_url, [])

    def model_listed(self, _model: str) -> bool:
        return True

    def observe(self, _target_id: int, **_estimates: float | None) -> None:
        return None

    def reply_succeeded(self, _target_id: int, _now: float) -> None:
        return None


def mixed_views(rng: random.Random) -> list[TargetView]:
    views = []
    for target_id in range(TARGETS):
        url = f"http://10.0.0.{target_id // 2}:8080"
        views.append(
            TargetView(
                target_id=target_id,
                key=f"{url} {MODEL}",
                backend_url=url,
                model=MODEL,
                served_model=MODEL,
                kind=Kind.OLLAMA,
                up=True,
                draining=False,
                residency=rng.choice((Residency.LOADED, Residency.COLD, Residency.UNKNOWN)),
                running=rng.choice((None, 0, 1)),
                waiting=rng.choice((None, 0)),
                capacity=rng.choice((None, 4, 8)),
                kv_usage=rng.choice((None, 0.3, 0.95)),
                size_bytes=rng.choice((None, 4_000_000_000)),
                vram_bytes=rng.choice((None, 5_000_000_000)),
                config_capacity=rng.choice((None, 2)),
                memory_bytes=rng.choice((None, 16_000_000_000)),
                generation=1,
                prefill_s_per_token=rng.choice((None, 0.002)),
                load_s=rng.choice((None, 6.0)),
                service_s=rng.choice((None, 3.0)),
                last_fast_scrape_at=1000.0,
            )
        )
    return views


def acquire_now(sched: Scheduler, request: RouteRequest) -> Lease:
    coro = sched.acquire("bench", 1, request)
    try:
        coro.send(None)
    except StopIteration as done:
        lease = done.value
        assert isinstance(lease, Lease)
        return lease
    coro.close()
    raise RuntimeError("acquire suspended: the benchmark expects a free slot every round")


def percentile(sorted_ns: Sequence[int], q: float) -> float:
    return sorted_ns[min(len(sorted_ns) - 1, int(q * len(sorted_ns)))] / 1000.0


def state_targets(rng: random.Random, clock: FakeClock) -> tuple[State, FakeEngine]:
    """A real State over TARGETS fake backends serving MODEL (and a second model each, which
    `fits_if_cold` reads), after one round each: what `pharos serve` routes from."""
    engine = FakeEngine()
    state = State(clock, NO_SESSION, **engine_fns(engine))
    urls = [f"http://10.0.1.{n}:8080" for n in range(TARGETS)]
    for url in urls:
        sizes = rng.choice((None, 4_000_000_000))  # known sizes: fits_if_cold reads the host
        engine.snapshots[url] = Snapshot(
            version="1.0",
            models=MappingProxyType(
                {
                    MODEL: ModelInfo(
                        state=rng.choice((Residency.LOADED, Residency.COLD, Residency.UNKNOWN)),
                        size_bytes=sizes,
                    ),
                    "other": ModelInfo(
                        state=rng.choice((Residency.LOADED, Residency.COLD)), size_bytes=sizes
                    ),
                }
            ),
            loads=MappingProxyType(
                {
                    MODEL: Load(
                        running=rng.choice((None, 0, 1)),
                        waiting=rng.choice((None, 0)),
                        capacity=rng.choice((None, 4, 8)),
                        kv_usage=rng.choice((None, 0.3, 0.95)),
                    )
                }
            ),
        )
    state.set_backends(
        [BackendSpec(url, capacity=rng.choice((None, 2)), memory_bytes=16 << 30) for url in urls]
    )
    return state, engine


def timed_rounds(
    sched: Scheduler,
    clock: FakeClock,
    conversations: list[Chain],
    feedback: Feedback,
    between: Callable[[int], None] | None = None,
) -> tuple[list[int], int]:
    """Each round's acquire + release in ns, sorted, and the collections during them.
    `between(i)` runs untimed before round i (State's scrape rounds)."""
    samples: list[int] = []
    collections: list[int] = []

    def count_collections(phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(1)

    gc.callbacks.append(count_collections)
    for i in range(ROUNDS):
        if between is not None:
            between(i)
        request = RouteRequest(MODEL, 1200, conversations[i % len(conversations)], seed=i)
        start = time.perf_counter_ns()
        lease = acquire_now(sched, request)
        lease.release(feedback)
        samples.append(time.perf_counter_ns() - start)
        clock.advance(ROUND_S)
    gc.callbacks.remove(count_collections)
    samples.sort()
    return samples, len(collections)


def report(name: str, samples: list[int], collections: int) -> None:
    p50, p99 = percentile(samples, 0.5), percentile(samples, 0.99)
    print(f"bench {name} p50_us={p50:.1f} p99_us={p99:.1f} policy={IMPLEMENTATION}")
    print(f"info {name} gc_collections={collections}")


def main() -> None:
    rng = random.Random(7)
    conversations = [
        chain_for_chat(
            MODEL, None, [("system", "You are terse."), ("user", f"question {i} " * 200)]
        )
        for i in range(50)
    ]
    feedback = Feedback(
        status=200,
        ttft_s=0.4,
        duration_s=2.0,
        usage=Usage(
            prompt_tokens=1200,
            cached_tokens=900,
            completion_tokens=40,
            engine_load_s=None,
            engine_prefill_s=None,
        ),
    )
    clock = FakeClock()
    index = PrefixIndex(clock=clock)
    sched = Scheduler(StaticTargets(mixed_views(rng)), index, clock)
    report(f"acquire-release-{TARGETS}", *timed_rounds(sched, clock, conversations, feedback))

    clock = FakeClock()
    state, _engine = state_targets(rng, clock)
    loop = asyncio.new_event_loop()
    urls = [backend.url for backend in state.backends()]
    for url in urls:
        loop.run_until_complete(state.run_round(url))
    sched = Scheduler(state, PrefixIndex(clock=clock), clock)
    rounds_per_scrape = max(1, round(FAST_INTERVAL_S / ROUND_S / len(urls)))

    def scrape_due(i: int) -> None:
        """Each backend's fast round once a fake second (a full one every fifth), spread
        over the rounds as the scraper spreads them."""
        if i % rounds_per_scrape == 0:
            loop.run_until_complete(state.run_round(urls[(i // rounds_per_scrape) % len(urls)]))

    name = f"acquire-release-{TARGETS}-state"
    report(name, *timed_rounds(sched, clock, conversations, feedback, scrape_due))
    loop.close()

    noop: list[int] = []
    for _ in range(ROUNDS):
        start = time.perf_counter_ns()
        noop.append(time.perf_counter_ns() - start)
    noop.sort()
    print(f"info acquire-release-{TARGETS} noop_p99_us={percentile(noop, 0.99):.2f}")


if __name__ == "__main__":
    main()
