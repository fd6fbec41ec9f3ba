"""From the outside in: the simulator's agents scenario through the real scheduler and policy.

Before the prefill bound (sched/prefills.py), classifier calls and chat turns queued for their
cached engine while cold 13-14k-token agent prompts held both its slots, beside a free slot on
the other engine. Virtual time: each run takes well under a second.
"""

from __future__ import annotations

import pytest

from pharos.sim.run import simulate
from pharos.sim.scenarios import SCENARIOS

DURATION_S = 120.0
LONGEST_WAIT_S = 5.0

# seed: the longest router wait before the bound (s), for the record | after it: 2.4, 2.9, 0.3
SEEDS = [
    1,  # a classifier call 37.3
    4,  # a chat turn 27.4
    5,  # a chat turn 21.5, a classifier call 16.7
]


@pytest.mark.xfail(
    strict=True,
    reason="llama-server's batch loop (simulated since 2026-12-07): a short prompt in the slot "
    "after a 16-18k-token one waits inside the engine for that prompt's batches (slot order), "
    "so both slots stay held while the bound prices the short one's end at its own prefill; "
    "longest router waits 56.0 / 26.7 / 20.2 s (seeds 1, 4, 5)",
)
@pytest.mark.parametrize("seed", SEEDS)
def test_no_request_waits_long_in_the_router_behind_long_prefills(seed: int) -> None:
    result = simulate(SCENARIOS["agents"].with_duration(DURATION_S), "cost", seed)
    waits = {
        s.klass: max(x.router_wait_s for x in result.samples if x.klass == s.klass)
        for s in result.samples
    }
    assert set(waits) == {"agent", "chat", "classifier"}
    assert max(waits.values()) < LONGEST_WAIT_S, waits
