"""Chained prefix hashes (spec §6): what makes two requests share a prefix, and what doesn't."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import msgspec
import pytest

from pharos.prefix import EMPTY_CHAIN, PROMPT_BLOCK_BYTES, Chain, chain_for_chat, chain_for_prompt
from pharos.prefix import chain as chain_module
from pharos.prefix.memo import ChainMemo

MODEL = "qwen2.5:0.5b"
CONVERSATION = [
    ("system", "Отвечай кратко. 答えは短く."),
    ("user", "Привет, мир! Как дела? ✓"),
    ("assistant", "Хорошо, спасибо."),
]


class _Message(msgspec.Struct):
    role: str
    content: msgspec.Raw = msgspec.Raw(b"null")


class _ChatBody(msgspec.Struct):
    """What the proxy's partial decode naturally yields."""

    model: str
    messages: list[_Message]
    tools: msgspec.Raw | None = None


def _chain_of_body(body: bytes) -> Chain:
    decoded = msgspec.json.decode(body, type=_ChatBody)
    return chain_for_chat(
        decoded.model,
        decoded.tools,
        [(message.role, message.content) for message in decoded.messages],
    )


def _body(messages: list[dict[str, object]], *, ensure_ascii: bool, **extra: object) -> bytes:
    return json.dumps(
        {"model": MODEL, "messages": messages, **extra}, ensure_ascii=ensure_ascii
    ).encode()


def _messages(pairs: list[tuple[str, str]]) -> list[dict[str, object]]:
    return [{"role": role, "content": content} for role, content in pairs]


def test_escaped_and_raw_utf8_bodies_give_the_same_chain() -> None:
    escaped = _body(_messages(CONVERSATION), ensure_ascii=True)
    raw = _body(_messages(CONVERSATION), ensure_ascii=False)
    assert b"\\u041f" in escaped and "П".encode() in raw

    assert _chain_of_body(escaped) == _chain_of_body(raw)
    assert _chain_of_body(raw) == chain_for_chat(MODEL, None, CONVERSATION)


def test_cum_bytes_count_decoded_content_text_only() -> None:
    chain = chain_for_chat(MODEL, None, CONVERSATION)
    sizes = [len(content.encode()) for _, content in CONVERSATION]
    assert chain.cum_bytes == (sizes[0], sizes[0] + sizes[1], sum(sizes))
    escaped = _body(_messages(CONVERSATION), ensure_ascii=True)
    assert _chain_of_body(escaped).cum_bytes == chain.cum_bytes


def test_list_of_parts_is_hashed_as_sent_and_counts_its_text_parts() -> None:
    text = "Привет"
    parts = [
        {"type": "text", "text": text},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 4000}},
    ]
    as_parts = _chain_of_body(_body([{"role": "user", "content": parts}], ensure_ascii=False))
    as_string = _chain_of_body(_body([{"role": "user", "content": text}], ensure_ascii=False))
    parts_escaped = _chain_of_body(_body([{"role": "user", "content": parts}], ensure_ascii=True))

    assert as_parts.hashes != as_string.hashes
    assert parts_escaped.hashes != as_parts.hashes  # raw JSON: escaping is part of what was sent
    assert as_parts.cum_bytes == (len(text.encode()),)  # the image's base64 is not cached text
    raw = json.dumps(parts, ensure_ascii=False).encode()
    assert chain_for_chat(MODEL, None, [("user", raw)]) == as_parts
    assert chain_for_chat(MODEL, None, [("user", msgspec.Raw(raw))]) == as_parts


def test_unparseable_parts_count_zero_bytes_but_still_hash() -> None:
    chain = chain_for_chat(MODEL, None, [("user", b"[1, 2, 3]")])
    assert chain.cum_bytes == (0,)
    assert chain.hashes != chain_for_chat(MODEL, None, [("user", b"[1, 2]")]).hashes


@pytest.mark.parametrize("no_content", [None, "", b"null", msgspec.Raw(b"null"), b'""'])
def test_missing_null_and_empty_content_are_the_same_text(no_content: object) -> None:
    expected = chain_for_chat(MODEL, None, [("assistant", "")])
    assert chain_for_chat(MODEL, None, [("assistant", no_content)]) == expected


def test_a_lone_surrogate_escape_hashes_instead_of_failing() -> None:
    via_raw = chain_for_chat(MODEL, None, [("user", b'"a\\ud800b"')])
    assert via_raw == chain_for_chat(MODEL, None, [("user", "a\ud800b")])
    assert via_raw.cum_bytes == (5,)


def test_tools_change_the_first_link_and_everything_after() -> None:
    tools = b'[{"type":"function","function":{"name":"get_weather"}}]'
    other_tools = b'[{"type":"function","function":{"name":"get_time"}}]'
    plain = chain_for_chat(MODEL, None, CONVERSATION)
    with_tools = chain_for_chat(MODEL, tools, CONVERSATION)
    with_other = chain_for_chat(MODEL, other_tools, CONVERSATION)

    assert len(with_tools.hashes) == len(CONVERSATION)
    assert not set(plain.hashes) & set(with_tools.hashes)
    assert not set(with_tools.hashes) & set(with_other.hashes)
    # Tools sit in h0: every matched link matched past them, so each link counts them once.
    assert with_tools.cum_bytes == tuple(b + len(tools) for b in plain.cum_bytes)
    assert chain_for_chat(MODEL, msgspec.Raw(tools), CONVERSATION) == with_tools


@pytest.mark.parametrize("no_tools", [b"null", b"[]", b" null\n", b""])
def test_absent_null_and_empty_tools_are_the_same(no_tools: bytes) -> None:
    assert chain_for_chat(MODEL, no_tools, CONVERSATION) == chain_for_chat(
        MODEL, None, CONVERSATION
    )


def test_a_longer_conversation_extends_the_chain() -> None:
    short = chain_for_chat(MODEL, None, CONVERSATION[:2])
    longer = chain_for_chat(MODEL, None, [*CONVERSATION, ("user", "И ещё вопрос")])
    assert longer.hashes[:2] == short.hashes
    assert longer.cum_bytes[:2] == short.cum_bytes


@pytest.mark.parametrize(
    ("changed", "why"),
    [
        (chain_for_chat("llama3.2:1b", None, CONVERSATION[:1]), "model"),
        (chain_for_chat(MODEL, None, [("user", CONVERSATION[0][1])]), "role"),
        (chain_for_chat(MODEL, None, [("system", CONVERSATION[0][1] + " ")]), "content"),
        (chain_for_prompt(MODEL, CONVERSATION[0][1]), "chat vs raw prompt"),
    ],
)
def test_what_breaks_a_shared_prefix(changed: Chain, why: str) -> None:
    assert changed.hashes[0] != chain_for_chat(MODEL, None, CONVERSATION[:1]).hashes[0], why


def test_fields_are_length_prefixed() -> None:
    assert (
        chain_for_chat(MODEL, None, [("usera", "b")]).hashes
        != chain_for_chat(MODEL, None, [("user", "ab")]).hashes
    )
    assert (
        chain_for_chat(MODEL, None, [("user", "a"), ("user", "b")]).hashes[1]
        != chain_for_chat(MODEL, None, [("user", "ab"), ("user", "")]).hashes[1]
    )


def test_hashes_are_64_bit() -> None:
    chain = chain_for_chat(MODEL, b"[1]", CONVERSATION)
    assert all(0 <= h < 2**64 for h in chain.hashes)
    assert any(h >= 2**63 for h in chain.hashes + chain_for_prompt(MODEL, "x" * 50_000).hashes)


def test_no_messages_no_links() -> None:
    assert chain_for_chat(MODEL, b"[1]", []) == EMPTY_CHAIN
    assert chain_for_prompt(MODEL, "") == EMPTY_CHAIN


@pytest.mark.parametrize(
    ("prompt_bytes", "expected_cum"),
    [
        (1, (1,)),
        (1024, (1024,)),
        (1025, (1024, 1025)),
        (2500, (1024, 2048, 2500)),
    ],
)
def test_prompt_is_chained_in_1_kib_blocks(
    prompt_bytes: int, expected_cum: tuple[int, ...]
) -> None:
    assert PROMPT_BLOCK_BYTES == 1024
    chain = chain_for_prompt(MODEL, "x" * prompt_bytes)
    assert chain.cum_bytes == expected_cum
    assert len(chain.hashes) == len(expected_cum)


def test_prompt_blocks_are_utf8_bytes_and_shared_by_an_extended_prompt() -> None:
    prompt = "ж" * 1500  # 3000 bytes: the block boundary falls inside a character
    chain = chain_for_prompt(MODEL, prompt)
    assert chain.cum_bytes == (1024, 2048, 3000)
    extended = chain_for_prompt(MODEL, prompt + " и ещё")
    assert extended.hashes[:2] == chain.hashes[:2]
    assert extended.hashes[2] != chain.hashes[2]  # the last, partial block changed
    assert chain_for_prompt("other", prompt).hashes[0] != chain.hashes[0]


# Regression pin of cross-process, cross-version stability: these values were computed once
# from this implementation. Peers and state files written by an older build carry such
# hashes, so a change here silently empties every restored index: change the chain only
# deliberately (and bump the seed's version), never by accident.
PINNED_CHAT = (0xDB547639FD2D21B8, 0x645B5C6BEF51A353, 0x968A5948915C7FFD)
PINNED_PROMPT = (0x34E7D74D6FF215EC, 0xA084D23F003271E7)
PIN_SCRIPT = """
from pharos.prefix import chain_for_chat, chain_for_prompt
tools = b'[{"type":"function","function":{"name":"f"}}]'
chat = chain_for_chat('qwen2.5:0.5b', tools, [
    ('system', 'Be brief.'),
    ('user', '\\u041f\\u0440\\u0438\\u0432\\u0435\\u0442, \\u043c\\u0438\\u0440'),
    ('assistant', b'[{"type":"text","text":"hi"}]'),
])
print(list(chat.hashes), list(chat.cum_bytes))
print(list(chain_for_prompt('qwen2.5:0.5b', 'x' * 1500).hashes))
"""


def test_hashes_are_stable_across_processes_and_builds() -> None:
    outputs = set()
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run(
            [sys.executable, "-c", PIN_SCRIPT], env=env, capture_output=True, check=True, text=True
        )
        outputs.add(done.stdout)
    assert len(outputs) == 1
    chat_line, prompt_line = outputs.pop().splitlines()
    assert chat_line == f"{list(PINNED_CHAT)} [54, 74, 76]"  # 45 bytes of tools, then text
    assert prompt_line == str(list(PINNED_PROMPT))


def test_distinct_huge_roles_leave_no_memory_behind() -> None:
    """40 chats with distinct 8 MiB roles took RSS from 50 to 723 MB through a cache bounded
    by count, not size (issue 11): a client's role string is never kept."""
    import gc
    import tracemalloc

    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for index in range(8):
            chain_for_chat("m", None, [(f"{index}" + "r" * (1 << 20), "hi")])
        gc.collect()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert after - before < 1 << 20  # 8 MiB of roles seen, under 1 MiB kept


def test_well_known_and_odd_roles_hash_the_same_as_before() -> None:
    a = chain_for_chat("m", None, [("user", "hi"), ("assistant", "yo"), ("weird", "x")])
    b = chain_for_chat("m", None, [("user", "hi"), ("assistant", "yo"), ("weird", "x")])
    c = chain_for_chat("m", None, [("user", "hi"), ("assistant", "yo"), ("weirder", "x")])
    assert a == b and a.hashes[:2] == c.hashes[:2] and a.hashes[2] != c.hashes[2]


# Every content shape chain_for_chat takes, each role path (cached, odd), as the chain's fast
# loop and its slow path see them; values computed from the implementation before the loop
# was tightened (issue 13): a speed-up must not move one of them.
PINNED_MIXED_MESSAGES: list[tuple[str, object]] = [
    ("system", "Be brief."),
    ("user", "caf\u00e9 \u8bf7 \U0001f600"),  # non-ASCII text
    ("assistant", None),  # no content
    ("tool", ""),
    ("developer", msgspec.Raw(b'"raw \\n escaped"')),  # a raw JSON string with an escape
    ("user", msgspec.Raw(b'"plain raw"')),  # ... and without one
    ("odd-role", [{"type": "text", "text": "part"}]),  # decoded parts, a role not cached
    ("function", "\ud800 lone"),  # a lone surrogate
]
PINNED_MIXED = (
    (0x46ABA96EF6FDDA18, 0x90F9FA49FF517568, 0xBE1DDCFA5E2A80BA, 0x5AA6C4C1CB8243D0),
    (0xC082AA650629E2F3, 0x36FF77613B530EDA, 0xE9D223E64BA23B09, 0x959232A3A611544D),
)
PINNED_MIXED_CUM_BYTES = (9, 23, 23, 23, 36, 45, 49, 57)


def test_every_content_shape_keeps_its_pinned_hash() -> None:
    chain = chain_for_chat("m", None, PINNED_MIXED_MESSAGES)
    assert chain.hashes == PINNED_MIXED[0] + PINNED_MIXED[1]
    assert chain.cum_bytes == PINNED_MIXED_CUM_BYTES


def test_the_memo_s_chat_root_is_the_root_whatever_came_before() -> None:
    """ChainMemo keeps the last chat's h0; a changed model or tools gets its own."""
    memo = ChainMemo()
    for model, tools in [
        ("m", None),
        ("m", None),
        ("m", b'[{"type":"function"}]'),
        ("m", b'[{"type":"function"}]'),
        ("m", b"[]"),
        ("n", b"[]"),
        ("m", None),
    ]:
        assert memo.chat_root(model, tools) == chain_module._root(
            chain_module._KIND_CHAT, model, tools
        )
