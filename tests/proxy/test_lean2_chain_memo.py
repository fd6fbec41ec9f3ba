"""A chat's repeated messages take the links of an earlier chat in the proxy's ChainMemo
(issue 13): every parse through a memo gives the ParsedRequest a parse without one gives, and a
follow-up turn hashes only what is new (the C build; without it the memo is never read)."""

from __future__ import annotations

import json
import random

import msgspec
import pytest

from pharos.prefix import chain as chain_module
from pharos.prefix.chain import chain_for_chat, chain_for_messages
from pharos.prefix.memo import ChainMemo
from pharos.proxy.parse import parse_request

MEMO_BUILT = chain_module._native_memo_messages is not None

_TEXTS = [
    "Be brief.",
    "Résumé — 请翻译 «this»",
    'quotes " and \\ back\\slashes',
    "tab\tnew\nline",
    "😀 astral",
    "",
    "x" * 300,
]


def _content(rng: random.Random) -> object:
    pick = rng.random()
    if pick < 0.75:
        return rng.choice(_TEXTS) + f" {rng.randrange(4)}"
    if pick < 0.85:
        return [{"type": "text", "text": rng.choice(_TEXTS)}, {"type": "image_url"}]
    if pick < 0.92:
        return None
    return {"odd": rng.randrange(3)}


def _message(rng: random.Random) -> dict[str, object]:
    role = rng.choice(["system", "user", "assistant", "tool", "odd-role", 7])
    return {"role": role, "content": _content(rng)}


def _edited(rng: random.Random, messages: list[dict[str, object]]) -> list[dict[str, object]]:
    """The next request of a conversation: usually the same messages and a new one; sometimes
    one message changed (content, role, or one byte of the same length), cut short or spread."""
    out = [dict(m) for m in messages]
    pick = rng.random()
    if pick < 0.5 or not out:
        out += [_message(rng) for _ in range(rng.randrange(1, 3))]
    elif pick < 0.7:
        at = rng.randrange(len(out))
        out[at]["content"] = _content(rng)
    elif pick < 0.8:
        at = rng.randrange(len(out))
        out[at]["role"] = rng.choice(["user", "assistant"])
    elif pick < 0.9:
        at = rng.randrange(len(out))
        text = out[at]["content"]
        if isinstance(text, str) and text:
            out[at]["content"] = text[:-1] + ("a" if text[-1] != "a" else "b")
    else:
        out = out[: rng.randrange(len(out) + 1)]
    return out


def _body(rng: random.Random, model: str, messages: list[dict[str, object]]) -> bytes:
    body: dict[str, object] = {"model": model, "stream": True, "messages": messages}
    if rng.random() < 0.2:
        body["tools"] = [{"type": "function", "function": {"name": "f"}}]
    if rng.random() < 0.1:
        body["system"] = "from the body"
    return json.dumps(body, ensure_ascii=rng.random() < 0.5).encode()


# seed | conversations | requests | memo entries
CASES = [
    (1, 1, 300, 8),  # one conversation turn after turn: every request repeats the last
    (2, 4, 600, 8),  # four interleaved
    (3, 12, 600, 8),  # more conversations than entries: misses and evictions
    (4, 3, 400, 1),  # a memo of one
]


@pytest.mark.parametrize(("seed", "conversations", "requests", "entries"), CASES)
def test_a_parse_through_the_memo_gives_what_a_parse_without_it_gives(
    seed: int, conversations: int, requests: int, entries: int
) -> None:
    rng = random.Random(seed)
    memo = ChainMemo(entries=entries)
    chats: list[list[dict[str, object]]] = [[] for _ in range(conversations)]
    models = ["m1", "m2"]
    for _ in range(requests):
        which = rng.randrange(conversations)
        chats[which] = _edited(rng, chats[which])
        body = _body(rng, models[which % 2], chats[which])
        through_memo = parse_request(body, route="chat", memo=memo)
        assert through_memo == parse_request(body, route="chat")
        assert len(memo) <= entries


def _raw_messages(body: bytes) -> list[object]:
    from pharos.proxy.parse import _RAW_CHAT_DECODER

    messages = _RAW_CHAT_DECODER.decode(body).messages
    assert messages is not None
    return list(messages)


def _chat(texts: list[str]) -> bytes:
    roles = ["user", "assistant"]
    messages = [{"role": roles[i % 2], "content": text} for i, text in enumerate(texts)]
    return json.dumps({"model": "m", "messages": messages}).encode()


@pytest.mark.skipif(not MEMO_BUILT, reason="the C build's message_links is not loaded")
def test_a_follow_up_turn_hashes_only_its_new_messages() -> None:
    memo = ChainMemo()
    turn = [f"message {i} é" for i in range(10)]
    first = _raw_messages(_chat(turn))
    chain_for_messages("m", None, first, memo, 1000)
    follow_up = _raw_messages(_chat([*turn, "the reply", "a new question"]))
    native = chain_module._native_memo_messages
    assert native is not None
    root = chain_module._root(b"chat", "m", None)
    found = native(root, tuple(follow_up), chain_module._KNOWN_TEXT_PREFIXES, 0, None, memo.entries)
    assert found is not None
    assert found[3] is memo.entries[0]
    assert found[4] == 10  # links reused: every message the first turn sent
    pairs = [(m.role, msgspec.json.decode(bytes(m.content))) for m in follow_up]  # type: ignore[attr-defined]
    assert (found[0], found[1]) == chain_module.python_links(root, pairs, 0)


# what changes between two chats           | links the second may reuse
EDITS = [
    ("the same bytes", 3),
    ("a byte of the last message", 2),
    ("a byte of the first message", 0),
    ("the model", 0),
    ("the tools", 0),
]


@pytest.mark.skipif(not MEMO_BUILT, reason="the C build's message_links is not loaded")
@pytest.mark.parametrize(("edit", "reusable"), EDITS)
def test_the_memo_reuses_only_links_whose_messages_and_root_are_the_same(
    edit: str, reusable: int
) -> None:
    texts = ["alpha", "beta", "gamma"]
    model, tools = "m", b'[{"type":"function"}]'
    memo = ChainMemo()
    chain_for_messages(model, tools, _raw_messages(_chat(texts)), memo, 100)
    if edit == "a byte of the last message":
        texts = ["alpha", "beta", "gammb"]
    elif edit == "a byte of the first message":
        texts = ["alphb", "beta", "gamma"]
    elif edit == "the model":
        model = "m2"
    elif edit == "the tools":
        tools = b'[{"type":"other"}]'
    messages = _raw_messages(_chat(texts))
    native = chain_module._native_memo_messages
    assert native is not None
    root = chain_module._root(b"chat", model, tools)
    covered = chain_module._tools_text_bytes(tools)
    found = native(
        root, tuple(messages), chain_module._KNOWN_TEXT_PREFIXES, covered, None, memo.entries
    )
    assert found is not None
    assert found[4] == reusable
    expected = chain_for_chat(
        model, tools, [(r, t) for r, t in zip(["user", "assistant", "user"], texts, strict=True)]
    )
    assert (found[0], found[1]) == (expected.hashes, expected.cum_bytes)


# body bytes | messages | kept in a memo of 1000-byte entries (160 counted per message)
BOUNDS = [
    (100, 2, True),
    (680, 2, True),  # 680 + 320 = 1000: just fits
    (681, 2, False),
    (50, 7, False),  # a small body of many messages: 50 + 1120
]


@pytest.mark.skipif(not MEMO_BUILT, reason="the C build's message_links is not loaded")
@pytest.mark.parametrize(("body_bytes", "messages", "kept"), BOUNDS)
def test_the_memo_keeps_no_chat_whose_body_and_messages_exceed_its_entry_bound(
    body_bytes: int, messages: int, kept: bool
) -> None:
    memo = ChainMemo(max_entry_bytes=1000)
    raw = _raw_messages(_chat([f"m{i}" for i in range(messages)]))
    chain = chain_for_messages("m", None, raw, memo, body_bytes)
    assert chain is not None and len(chain.hashes) == messages
    assert len(memo) == (1 if kept else 0)


def test_the_memo_keeps_at_most_its_entries() -> None:
    memo = ChainMemo(entries=2)
    for i in range(5):
        body = _chat([f"conversation {i}", "x"])
        chain = chain_for_messages("m", None, _raw_messages(body), memo, len(body))
        assert chain is None or chain.hashes
    assert len(memo) == (2 if MEMO_BUILT else 0)


@pytest.mark.skipif(not MEMO_BUILT, reason="the C build's message_links is not loaded")
def test_a_chat_that_repeats_an_entry_whole_replaces_it() -> None:
    memo = ChainMemo(entries=4)
    turn = ["a", "b"]
    chain_for_messages("m", None, _raw_messages(_chat(turn)), memo, 100)
    chain_for_messages("m", None, _raw_messages(_chat([*turn, "c", "d"])), memo, 100)
    assert len(memo) == 1  # the first turn is held by the second's entry
    assert len(memo.entries[0][4]) == 4


def test_a_memo_needs_an_entry() -> None:
    with pytest.raises(ValueError, match="at least 1 entry"):
        ChainMemo(entries=0)
