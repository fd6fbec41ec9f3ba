"""Prefix index benchmark: a 50-message conversation, and process RSS with 200k entries.

Run: .venv/bin/python benchmarks/bench_prefix.py
Prints `bench prefix-lookup-50 p50_us=N p99_us=N`, `bench prefix-record-50 p50_us=N p99_us=N`,
`bench prefix-chain-50 p50_us=N p99_us=N` and `mem prefix-200k rss_mb=N` (the whole process's
RSS, in a fresh interpreter, every entry holding 4 slots: the worst case), then the same with
one slot per entry and `info` lines (tracemalloc of the index alone, time of a full export).

The 194-link rows are the 32 KiB bench chat's shape (benchmarks/compare.py): a follow-up turn
re-recording a chain whose first 192 links its target already holds
(`prefix-record-194-followup`), the lookup of a chain one of two candidates holds whole (so
`stop_after` never ends it early: `prefix-lookup-194-full`) and of one matching nothing
(`prefix-lookup-194-none`).
"""

from __future__ import annotations

import gc
import os
import resource
import subprocess
import sys
import time
import tracemalloc

from pharos.clock import FakeClock
from pharos.prefix import DEFAULT_CAP_ENTRIES, MAX_SLOTS, Chain, PrefixIndex, Source, chain_for_chat

MESSAGES = 50
SMOKE = os.environ.get("PHAROS_BENCH_SMOKE") == "1"  # tiny counts: CI checks it still runs
ITERATIONS = 50 if SMOKE else 5_000
CAP_ENTRIES = 2_000 if SMOKE else DEFAULT_CAP_ENTRIES
TARGETS = 8
LONG_MESSAGES = 194


def _percentiles_us(samples_ns: list[int]) -> tuple[float, float]:
    ordered = sorted(samples_ns)
    p50 = ordered[len(ordered) // 2]
    p99 = ordered[min(len(ordered) - 1, (len(ordered) * 99) // 100)]
    return p50 / 1000.0, p99 / 1000.0


def _conversation(seed: int) -> Chain:
    messages: list[tuple[str, object]] = [("system", "You are a helpful assistant. " * 20)]
    for turn in range(1, MESSAGES):
        role = "user" if turn % 2 else "assistant"
        messages.append((role, f"conversation {seed} turn {turn}: " + "lorem ipsum " * 50))
    return chain_for_chat("qwen2.5:7b", None, messages)


def _rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _print(name: str, samples_ns: list[int]) -> None:
    p50, p99 = _percentiles_us(samples_ns)
    print(f"bench {name} p50_us={p50:.1f} p99_us={p99:.1f}")


def bench_chain() -> None:
    messages: list[tuple[str, object]] = [("system", "You are a helpful assistant. " * 20)]
    messages += [("user", "lorem ipsum " * 50)] * (MESSAGES - 1)
    samples = []
    for _ in range(ITERATIONS // 5):
        start = time.perf_counter_ns()
        chain_for_chat("qwen2.5:7b", None, messages)
        samples.append(time.perf_counter_ns() - start)
    _print(f"prefix-chain-{MESSAGES}", samples)


def bench_lookup_and_record() -> None:
    clock = FakeClock()
    index = PrefixIndex(clock=clock)
    chains = [_conversation(seed) for seed in range(200)]
    for n, chain in enumerate(chains):  # every link held by 2-4 targets
        for k in range(2 + n % 3):
            index.record(chain, (n + k) % TARGETS, 1, clock.now() + k)

    def generation_of(_target_id: int) -> int | None:
        return 1

    lookups = []
    records = []
    for i in range(ITERATIONS):
        chain = chains[i % len(chains)]
        start = time.perf_counter_ns()
        index.lookup(chain, generation_of)
        lookups.append(time.perf_counter_ns() - start)
        clock.advance(0.01)
        start = time.perf_counter_ns()
        index.record(chain, i % TARGETS, 1, clock.now(), Source.LOCAL)
        records.append(time.perf_counter_ns() - start)
    _print(f"prefix-lookup-{MESSAGES}", lookups)
    _print(f"prefix-record-{MESSAGES}", records)


def _long_chat(seed: int, extra_turns: int) -> list[tuple[str, object]]:
    messages: list[tuple[str, object]] = [("system", "You are a helpful assistant. " * 4)]
    for turn in range(1, LONG_MESSAGES - 2 + extra_turns):
        role = "user" if turn % 2 else "assistant"
        messages.append((role, f"chat {seed} turn {turn}: " + "lorem ipsum " * 13))
    return messages


def bench_long_chat() -> None:
    """194-link rows: 2 candidates, target 0 holds the chat, a full 200k index around it."""
    clock = FakeClock()
    index = PrefixIndex(clock=clock)
    for n in range(CAP_ENTRIES // 2):  # a fuller index: shards at half their cap
        index.record(Chain(((n * 0x9E3779B97F4A7C15) & 0xFFFF_FFFF_FFFF_FFFF,), (1,)), 1, 1, 0.0)
    base = _long_chat(0, 0)
    index.record(chain_for_chat("qwen2.5:7b", None, base), 0, 1, clock.now())
    rounds = ITERATIONS // 5
    followups = []
    for k in range(rounds):
        turn = [("user", f"follow-up {k}: " + "lorem ipsum " * 13), ("assistant", f"answer {k}")]
        followups.append(chain_for_chat("qwen2.5:7b", None, base + turn))
    unknown = chain_for_chat("qwen2.5:7b", None, _long_chat(1, 2))
    assert len(followups[0].hashes) == len(unknown.hashes) == LONG_MESSAGES

    def generation_of(target_id: int) -> int | None:
        return 1 if target_id in (0, 1) else None

    records, full, none = [], [], []
    for chain in followups:
        clock.advance(0.01)
        start = time.perf_counter_ns()
        index.record(chain, 0, 1, clock.now(), Source.LOCAL)
        records.append(time.perf_counter_ns() - start)
        start = time.perf_counter_ns()
        found = index.lookup(chain, generation_of, 2)
        full.append(time.perf_counter_ns() - start)
        assert found[0].matched_bytes == chain.cum_bytes[-1]
        start = time.perf_counter_ns()
        index.lookup(unknown, generation_of, 2)
        none.append(time.perf_counter_ns() - start)
    _print(f"prefix-record-{LONG_MESSAGES}-followup", records)
    _print(f"prefix-lookup-{LONG_MESSAGES}-full", full)
    _print(f"prefix-lookup-{LONG_MESSAGES}-none", none)


def _fill(index: PrefixIndex, slots_per_entry: int) -> None:
    for n in range(index.cap_entries):
        chain = Chain(((n * 0x9E3779B97F4A7C15) & 0xFFFF_FFFF_FFFF_FFFF,), (1000,))
        for target_id in range(slots_per_entry):
            index.record(chain, target_id, 7, float(n), Source.PEER)


def measure_memory(slots_per_entry: int) -> None:
    """Runs in a fresh interpreter: RSS of the whole process with the index full."""
    index = PrefixIndex(CAP_ENTRIES)
    _fill(index, slots_per_entry)
    gc.collect()
    assert len(index) == CAP_ENTRIES
    rss_full_mb = _rss_mb()
    start = time.perf_counter_ns()
    exported = index.export(lambda target_id: f"http://backend-{target_id}:8000 model")
    export_ms = (time.perf_counter_ns() - start) / 1e6
    del exported
    tracemalloc.start()
    traced = PrefixIndex(CAP_ENTRIES)
    _fill(traced, slots_per_entry)
    index_mb = tracemalloc.get_traced_memory()[0] / (1024 * 1024)
    tracemalloc.stop()
    name = "prefix-200k" if slots_per_entry == MAX_SLOTS else f"prefix-200k-{slots_per_entry}slot"
    print(f"mem {name} rss_mb={rss_full_mb:.1f}")
    print(
        f"info {name} slots_per_entry={slots_per_entry} index_only_mb={index_mb:.1f} "
        f"export_ms={export_ms:.0f}"
    )


def bench_memory() -> None:
    for slots_per_entry in (MAX_SLOTS, 1):
        subprocess.run([sys.executable, __file__, "--memory", str(slots_per_entry)], check=True)


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--memory":
        measure_memory(int(sys.argv[2]))
        return
    gc.freeze()
    bench_chain()
    bench_lookup_and_record()
    bench_long_chat()
    bench_memory()


if __name__ == "__main__":
    main()
