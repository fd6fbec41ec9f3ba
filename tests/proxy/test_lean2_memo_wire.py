"""From the outside in: a conversation sent turn after turn to a real Pharos, whose Proxy chains
each chat through its ChainMemo, is recorded under the Python loop's chain of every body, also
when a turn edits one byte deep inside the history or cuts it short (issue 13)."""

from __future__ import annotations

import json

import msgspec

from pharos.fakeengine import FakeLlamaCpp, FakeVLLM, no_sleep
from pharos.prefix import Chain
from pharos.prefix.chain import _KIND_CHAT, _root, python_links
from tests.proxy.rig import Backend, RigFactory
from tests.proxy.test_chain_on_the_wire import MODEL, python_chain


def python_chain_of(model: str, body: bytes) -> Chain:
    """test_chain_on_the_wire's python_chain for another model than the llama.cpp fake's."""
    pairs = [(m["role"], m["content"]) for m in msgspec.json.decode(body)["messages"]]
    hashes, cum_bytes = python_links(_root(_KIND_CHAT, model, None), pairs, 0)
    return Chain(hashes, cum_bytes)


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


async def test_more_conversations_than_the_memo_holds_are_each_recorded_under_their_own_chain(
    rig: RigFactory,
) -> None:
    """12 conversations sharing a system prompt, interleaved turn by turn (the memo keeps 8):
    entries are evicted and every chat repeats another's first message, and each turn is still
    recorded under its own body's Python chain. vLLM's prefix cache keeps every prompt, so no
    prediction is judged wrong and none is forgotten."""
    engine = FakeVLLM(sleep=no_sleep)
    r = await rig(Backend(engine))
    model = engine.model.name
    system = {"role": "system", "content": "You are helpful. " * 20}
    chats: list[list[dict[str, str]]] = [[system] for _ in range(12)]
    done = 0
    for turn in range(3):
        for which, chat in enumerate(chats):
            chat.append({"role": "user", "content": f"conversation {which}, question {turn} é"})
            status, reply = await r.chat(model, "", messages=chat, max_tokens=4)
            assert status == 200, reply
            chat.append({"role": "assistant", "content": f"answer {turn} to {which}"})
            done += 1
            await r.until_done(done)
            (view,) = r.views(model)
            sent = json.dumps({"messages": chat[:-1]}).encode()
            expected = python_chain_of(model, sent)
            matches = r.pharos.prefix.lookup(expected, {view.target_id: view.generation}.get)
            assert matches[view.target_id].matched_bytes == expected.cum_bytes[-1], (turn, which)
