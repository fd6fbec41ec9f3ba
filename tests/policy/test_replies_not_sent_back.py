"""A client that sends back another reply than the engine generated keeps its conversation
on one engine (issue 15, outside in: two fake llama-servers behind a real Pharos).

make scenario's client sends ShareGPT's answers back; the fake llama.cpp holds only the
prompt in its slot, so every follow-up finds just the previous prompt cached while Pharos
predicts the reply with it. Judged with that credit, the old verdict forgot the whole
conversation and turn 3 went by load (live: 3 of 3 moved follow-ups)."""

from __future__ import annotations

from pharos.fakeengine import FakeLlamaCpp
from pharos.fakeengine.engine import scaled_sleep
from tests.proxy.rig import Backend, RigFactory, rig

__all__ = ["rig"]

MODEL = "smollm2"
SYSTEM = "You are a helpful assistant."


async def test_every_turn_stays_on_the_engine_holding_the_conversation(rig: RigFactory) -> None:
    fast = scaled_sleep(50.0)  # the fakes' prefill and decode, 50x sped up
    r = await rig(*(Backend(FakeLlamaCpp(MODEL, seed=s, sleep=fast)) for s in (0, 1)))
    messages = [{"role": "system", "content": SYSTEM}]
    for turn in range(4):
        messages.append({"role": "user", "content": f"question {turn}: " + "q" * 300})
        status, _ = await r.chat(MODEL, "", messages=messages, max_tokens=8)
        assert status == 200
        await r.until_done(turn + 1)
        # not what the fake generated: a long answer of the client's own
        messages.append({"role": "assistant", "content": f"answer {turn}: " + "a" * 2400})
    first, *follow_ups = r.done
    assert all(done.backend_url == first.backend_url for done in follow_ups), [
        (done.backend_url, done.reason) for done in r.done
    ]
    for done in follow_ups[1:]:  # turns 3 and 4: the index still held the conversation
        assert dict(done.decisions)["prefix"] != "miss", done.reason
        assert done.cached_tokens is not None and done.cached_tokens > 300, done.reason
