"""From the outside in: hostile but valid chats sent over HTTP are chained, on the request path,
exactly as prefix/chain.py's Python loop chains them (issue 13's C links, prefix/_chainc.c).

The index Pharos filled from the replies is read back with chains the Python loop computed
from the same JSON: every link must be there, whichever build ran the request."""

from __future__ import annotations

import json

import msgspec
import pytest

from pharos.fakeengine import FakeLlamaCpp, no_sleep
from pharos.prefix import Chain
from pharos.prefix.chain import _KIND_CHAT, _root, python_links
from tests.proxy.rig import Backend, Rig, RigFactory

MODEL = "qwen2.5-0.5b"  # what the llama.cpp fake serves


def python_chain(body: bytes) -> Chain:
    """The chain the Python loop gives a chat body's messages (and system) as msgspec decodes
    them, as the proxy does. (A lone surrogate, which the C links leave to Python, is tested in
    tests/prefix: the fake engine answers it with a 500.)"""
    decoded = msgspec.json.decode(body)
    pairs: list[tuple[str, object]] = []
    if decoded.get("system") is not None:
        pairs.append(("system", decoded["system"]))
    for message in decoded["messages"]:
        role = message.get("role", "")
        pairs.append((role if isinstance(role, str) else "", message.get("content")))
    hashes, cum_bytes = python_links(_root(_KIND_CHAT, MODEL, None), pairs, 0)
    return Chain(hashes, cum_bytes)


async def assert_recorded_whole(r: Rig, expected: Chain) -> None:
    """After one reply, the index holds every link of `expected` on the model's one target."""
    await r.until_done(1)
    (view,) = r.views(MODEL)
    matches = r.pharos.prefix.lookup(
        expected, lambda tid: view.generation if tid == view.target_id else None
    )
    assert view.target_id in matches, "not one link of the Python chain was recorded"
    assert matches[view.target_id].matched_bytes == expected.cum_bytes[-1]  # every link


# the conversation                                   | what it stresses in the C links
CHATS = {
    "escaped non-ASCII and pairs": [  # \\uXXXX escapes, an emoji as a surrogate pair
        {"role": "system", "content": 'Résumé — 请翻译 «this» \U0001f600\n\t"q" \\'},
        {"role": "user", "content": "Привет! \x00 nul \x7f"},
    ],
    "one message of 600 KiB": [  # the C buffer grows far past any earlier link
        {"role": "user", "content": "short first"},
        {"role": "assistant", "content": "x" * (600 << 10)},
        {"role": "user", "content": "and?"},
    ],
    "3000 messages": [
        {"role": ("user", "assistant")[i % 2], "content": f"turn {i} " + "é" * (i % 7)}
        for i in range(3000)
    ],
    "an odd role among usual ones": [  # a role outside the C table: Python for the chain
        {"role": "system", "content": "s"},
        {"role": "critic", "content": "c"},
        {"role": "user", "content": "u"},
    ],
}


@pytest.mark.parametrize("name", list(CHATS))
async def test_a_hostile_chat_over_http_is_recorded_under_the_python_loops_chain(
    rig: RigFactory, name: str
) -> None:
    r = await rig(Backend(FakeLlamaCpp(sleep=no_sleep)))
    messages = CHATS[name]
    status, reply = await r.chat(MODEL, "", messages=messages, max_tokens=4)
    assert status == 200, reply
    await assert_recorded_whole(r, python_chain(json.dumps({"messages": messages}).encode()))
