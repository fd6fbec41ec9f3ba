"""From the outside in: a conversation sent turn after turn to a real Pharos, whose Proxy chains
each chat through its ChainMemo, is recorded under the Python loop's chain of every body, also
when a turn edits one byte deep inside the history or cuts it short (issue 13)."""

from __future__ import annotations

import json

from pharos.fakeengine import FakeLlamaCpp, no_sleep
from tests.proxy.rig import Backend, RigFactory
from tests.proxy.test_chain_on_the_wire import MODEL, python_chain


def _history(turns: int) -> list[dict[str, str]]:
    roles = ("user", "assistant")
    return [
        {"role": roles[i % 2], "content": f"turn {i}: Résumé — 请翻译 {'x' * (i * 37 % 300)}"}
        for i in range(turns)
    ]


async def test_every_turn_of_an_edited_conversation_is_recorded_under_its_own_chain(
    rig: RigFactory,
) -> None:
    """Each turn extends or cuts the one the engine's slot holds, so no prediction is wrong and
    every turn is recorded whole; the two last turns repeat the history before the edit."""
    r = await rig(Backend(FakeLlamaCpp(sleep=no_sleep)))
    edited = _history(23)
    edited[5] = {"role": "assistant", "content": edited[5]["content"][:-1] + "y"}  # same length
    turns = [_history(9), _history(11), edited[:21], edited, _history(4), _history(6)]
    for done, messages in enumerate(turns, start=1):
        status, reply = await r.chat(MODEL, "", messages=messages, max_tokens=4)
        assert status == 200, reply
        await r.until_done(done)
        (view,) = r.views(MODEL)
        expected = python_chain(json.dumps({"messages": messages}).encode())
        generations = {view.target_id: view.generation}
        matches = r.pharos.prefix.lookup(expected, generations.get)
        assert view.target_id in matches, done
        assert matches[view.target_id].matched_bytes == expected.cum_bytes[-1], done
