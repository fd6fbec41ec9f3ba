"""The repeat cut (issue 13): a chat body sharing its leading bytes with a kept one is decoded
without the messages it repeats, and parse_request's result is the whole decode's, field for
field, whatever the bodies (escapes, whitespace, a changed model, tools or system, a body that
shares bytes only up to mid-message, invalid JSON after the cut)."""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pharos.prefix import chain as chain_module
from pharos.prefix.memo import ChainMemo
from pharos.proxy.errors import ClientError
from pharos.proxy.parse import ParsedRequest, parse_request

CUT_BUILT = (
    chain_module._message_ends is not None and chain_module._native_memo_messages is not None
)
needs_cut = pytest.mark.skipif(not CUT_BUILT, reason="the C build's message_ends is not loaded")

_TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from(
            ['"', "\\", "/", "\n", "\t", "\x00", "é", "请", "😀", "{", "}", "[", "]", ","]
        ),
        st.characters(codec="utf-8"),
    ),
    max_size=40,
)
_CONTENT = st.one_of(
    _TEXT,
    st.none(),
    st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": _TEXT}), max_size=2),
)
_MESSAGE = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["system", "user", "assistant", "tool", "odd", 7]),
        "content": _CONTENT,
    }
)
_STYLE = st.sampled_from(["compact", "spaced", "indent", "ascii", "msgspec"])


def _encode(value: dict[str, object], style: str) -> bytes:
    if style == "compact":
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    if style == "spaced":
        return json.dumps(value, ensure_ascii=False).encode()
    if style == "indent":
        return json.dumps(value, ensure_ascii=False, indent=1).encode()
    if style == "ascii":  # Open WebUI's: every non-ASCII character \u-escaped
        return json.dumps(value).encode()
    return msgspec.json.encode(value)


def _body(
    model: str, messages: list[dict[str, object]], extra: dict[str, object], style: str
) -> bytes:
    return _encode({"model": model, "messages": messages, **extra}, style)


def _outcome(body: bytes, route: str, memo: ChainMemo | None) -> ParsedRequest | tuple[int, str]:
    try:
        return parse_request(body, route=route, stream_default=False, memo=memo)
    except ClientError as exc:
        return (exc.status, exc.message)


_EXTRA: st.SearchStrategy[dict[str, object]] = st.one_of(
    st.just({}),
    st.just({"stream": True}),
    st.just({"tools": [{"type": "function", "function": {"name": "f"}}]}),
    st.just({"system": "Be brief é"}),
    st.just({"stream_options": {"include_usage": True}, "tools": []}),
)


@needs_cut
@settings(max_examples=300, deadline=None)
@given(
    earlier=st.lists(_MESSAGE, min_size=1, max_size=6),
    keep=st.integers(0, 6),
    new=st.lists(_MESSAGE, max_size=3),
    styles=st.tuples(_STYLE, _STYLE),
    extras=st.tuples(_EXTRA, _EXTRA),
    models=st.sampled_from([("m", "m"), ("m", "other"), ("m", "")]),
    route=st.sampled_from(["chat", "messages"]),
)
def test_a_follow_up_parses_through_the_memo_exactly_as_a_whole_decode_does(
    earlier: list[dict[str, object]],
    keep: int,
    new: list[dict[str, object]],
    styles: tuple[str, str],
    extras: tuple[dict[str, object], dict[str, object]],
    models: tuple[str, str],
    route: str,
) -> None:
    memo = ChainMemo()
    first = _body(models[0], earlier, extras[0], styles[0])
    assert _outcome(first, route, memo) == _outcome(first, route, None)
    follow_up = _body(models[1], earlier[:keep] + new, extras[1], styles[1])
    assert _outcome(follow_up, route, memo) == _outcome(follow_up, route, None)
    assert _outcome(follow_up, route, memo) == _outcome(follow_up, route, None)  # now kept itself


@needs_cut
@settings(max_examples=200, deadline=None)
@given(
    earlier=st.lists(_MESSAGE, min_size=2, max_size=5),
    style=_STYLE,
    cut_at=st.integers(0, 10_000),
    tail=st.sampled_from(
        [b"", b"}", b"]", b",]}", b",", b'"x', b"\xff", b'},"messages":[]}', b", {}]}", b"nul"]
    ),
)
def test_a_body_cut_anywhere_after_a_kept_prefix_gets_the_whole_decodes_answer_or_400(
    earlier: list[dict[str, object]], style: str, cut_at: int, tail: bytes
) -> None:
    memo = ChainMemo()
    first = _body("m", earlier, {}, style)
    parse_request(first, route="chat", memo=memo)
    broken = first[: cut_at % len(first)] + tail
    assert _outcome(broken, "chat", memo) == _outcome(broken, "chat", None)


@needs_cut
def test_a_next_turn_is_decoded_without_the_messages_it_repeats() -> None:
    memo = ChainMemo()
    turns: list[dict[str, object]] = [
        {"role": "user", "content": f"question {n} é"} for n in range(5)
    ]
    first = _body("m", turns, {"stream": True}, "ascii")
    parse_request(first, route="chat", memo=memo)
    follow_up = _body(
        "m", [*turns, {"role": "assistant", "content": "ok"}], {"stream": True}, "ascii"
    )
    cut = memo.cut(follow_up)
    assert cut is not None
    assert len(cut.messages) == 5
    assert (
        cut.body
        == b'{"model": "m", "messages": [{"role": "assistant", "content": "ok"}], "stream": true}'
    )
    assert _outcome(follow_up, "chat", memo) == _outcome(follow_up, "chat", None)


@needs_cut
def test_a_body_sharing_bytes_only_up_to_mid_message_is_not_cut_there() -> None:
    memo = ChainMemo()
    first = _body(
        "m",
        [{"role": "user", "content": "abc"}, {"role": "user", "content": "long"}],
        {},
        "compact",
    )
    parse_request(first, route="chat", memo=memo)
    edited = first.replace(b"long", b"longer")
    cut = memo.cut(edited)
    assert cut is not None
    assert len(cut.messages) == 1  # the edited message is decoded, not taken
    assert _outcome(edited, "chat", memo) == _outcome(edited, "chat", None)


@needs_cut
def test_invalid_json_after_the_cut_point_is_the_same_400() -> None:
    memo = ChainMemo()
    first = _body("m", [{"role": "user", "content": "abc"}], {}, "compact")
    parse_request(first, route="chat", memo=memo)
    broken = first[:-2] + b",]}"
    with pytest.raises(ClientError) as through_memo:
        parse_request(broken, route="chat", memo=memo)
    with pytest.raises(ClientError) as whole:
        parse_request(broken, route="chat")
    assert (through_memo.value.status, through_memo.value.message) == (
        whole.value.status,
        whole.value.message,
    )
    assert through_memo.value.status == 400


@needs_cut
def test_the_memo_keeps_at_most_its_entries_bodies() -> None:
    memo = ChainMemo(entries=3)
    for n in range(10):
        parse_request(
            _body("m", [{"role": "user", "content": f"chat {n}"}], {}, "compact"),
            route="chat",
            memo=memo,
        )
    assert len(memo._bodies) == 3


@needs_cut
@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 3),  # which kept body a new one starts from (or a fresh one)
            st.integers(0, 40),  # how many of its bytes it shares
            st.binary(max_size=6),  # then its own bytes
            st.sampled_from(["cut", "both", "remember"]),  # remember without a cut first too
            st.booleans(),  # it replaces the kept body it started from
        ),
        max_size=14,
    )
)
def test_the_memo_knows_what_a_body_shares_with_each_kept_one(
    steps: list[tuple[int, int, bytes, str, bool]],
) -> None:
    """The shares cut() reads come from the first kept body's and the kept bodies' own, compared
    only where those are equal: always what comparing every kept body whole gives."""
    memo = ChainMemo(entries=4)
    shared_prefix = chain_module._shared_prefix
    assert shared_prefix is not None
    for source, shares, tail, how, replaces in steps:
        kept = memo._bodies
        base = kept[source][0] if source < len(kept) else b"x" * 40
        body = base[:shares] + tail
        expected = [shared_prefix(body, k[0], 0) for k in kept]
        if how != "remember":
            memo.cut(body)
            assert memo.shared_with_kept(body) == expected
        if how != "cut":
            replaced = kept[source] if replaces and source < len(kept) else None
            memo.remember(body, 0, (), (), replaced)
        assert memo.shared_with_kept(body) == [shared_prefix(body, k[0], 0) for k in memo._bodies]


@needs_cut
def test_a_body_the_memo_would_never_keep_is_not_held_after_its_cut() -> None:
    memo = ChainMemo(max_entry_bytes=100)
    memo.remember(b'{"messages":[1]}', 0, (), ())
    large = b'{"messages":[1]}' + b" " * 200
    memo.cut(large)
    assert memo._last_cut is None
