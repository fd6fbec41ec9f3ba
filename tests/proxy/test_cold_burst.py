"""Layer 3: a burst for a model cold on two load-on-demand engines loads it on one of them.

Found live (tests/live/test_router_pair.py, two router-mode llama-servers, flaky 1 in 3):
no 503 and no retry; the 4th request of the burst was routed "cold, est 2.2s vs 2.5s
(busy)". The first reply had taught a load time (2.2 s), but no reply had taught a service
time: the cold one and the one that joined its load teach none, so waiting behind the warm,
busy engine was costed with the assumed 5 s default and a second load looked cheaper.
"""

from __future__ import annotations

import asyncio

from pharos.fakeengine import FakeModel, FakeOllama, Ledger, scaled_sleep
from tests.proxy.rig import Backend, RigFactory

MODEL = "qwen2.5:0.5b"
BURST = 4
LEDGER = Ledger(load_s=0.3, decode_s_per_token=0.002)
"""A load long enough to be learned (over 10 ms), far shorter than the assumed 5 s service."""


def _engine() -> FakeOllama:
    return FakeOllama([FakeModel(MODEL)], ledger=LEDGER, sleep=scaled_sleep())


async def test_a_burst_for_a_model_cold_on_both_engines_waits_behind_the_one_load(
    rig: RigFactory,
) -> None:
    fakes = [_engine(), _engine()]
    r = await rig(*(Backend(fake) for fake in fakes))
    replies = await asyncio.gather(*(r.chat(MODEL, f"burst {i}") for i in range(BURST)))
    assert [status for status, _ in replies] == [200] * BURST
    await r.until_done(BURST)

    served = sorted({done.backend_url or "" for done in r.done})
    loads = [fake.counters.loads for fake in fakes]
    reasons = [done.reason for done in r.done]
    assert len(served) == 1, f"the burst was spread over {served}: {reasons}"
    assert sorted(loads) == [0, 1], loads
