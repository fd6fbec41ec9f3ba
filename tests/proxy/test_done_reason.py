"""A finished request's `reason` is built when read (issue 13: 17k instructions a request at
finish), from the lease's Decision: read later, after other requests were routed and replied,
it is what it was when the request finished."""

from __future__ import annotations

from pharos.fakeengine import FakeVLLM, no_sleep
from tests.proxy.rig import Backend, RigFactory

MODEL = "qwen2.5-0.5b"


async def test_a_reason_read_after_later_requests_is_the_one_it_had_at_finish(
    rig: RigFactory,
) -> None:
    r = await rig(Backend(FakeVLLM(sleep=no_sleep)), Backend(FakeVLLM(sleep=no_sleep)))
    at_finish: list[str] = []
    history: list[dict[str, str]] = []
    for turn in range(6):
        history.append({"role": "user", "content": f"question {turn % 3} " * 40})
        status, _ = await r.chat(MODEL, "", messages=list(history))
        assert status == 200
        await r.until_done(turn + 1)
        at_finish.append(r.done[turn].reason)
        history.append({"role": "assistant", "content": f"answer {turn}"})
    assert all(reason for reason in at_finish)
    assert [done.reason for done in r.done] == at_finish
