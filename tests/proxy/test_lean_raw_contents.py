"""A chat's contents chained raw by the C build give what the strict decode gave (issue 13).

parse.py decodes a chat's message contents as msgspec.Raw and prefix/_chainc.c's message_links
unescapes each JSON string into the hashed bytes itself; before, msgspec decoded every content
into a str and Python built (role, content) pairs for chat_links. The routing inputs (chain,
token estimate, control) and every refusal must not depend on which path read the body: each
test parses the same bytes with the raw path on and off (`MESSAGE_LINKS`).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pharos.prefix import chain
from pharos.prefix.chain import _KIND_CHAT, _KNOWN_TEXT_PREFIXES, _root, python_links
from pharos.proxy import parse
from pharos.proxy.errors import ClientError
from pharos.proxy.parse import ParsedRequest, parse_request
from tests.prefix.native import native_module
from tests.prefix.native import needs_c_build as needs_c_build_of

_chainc = native_module("_chainc")


def _both(
    body: bytes, route: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[ParsedRequest | str, ParsedRequest | str]:
    """(raw path, strict path) results, a refusal as its text."""
    needs_c_build_of(_chainc, "_chainc")
    if os.environ.get(chain.PURE_ENV) == "1":
        pytest.skip(f"{chain.PURE_ENV}=1: every chat takes the strict path")
    assert chain.MESSAGE_LINKS, "the C build is loaded but message_links is not used"
    results: list[ParsedRequest | str] = []
    for raw in (True, False):
        monkeypatch.setattr(parse, "MESSAGE_LINKS", raw)
        try:
            results.append(parse_request(body, route=route))
        except ClientError as err:
            results.append(str(err))
    return results[0], results[1]


_TEXTS = (
    "",
    "plain ascii, long enough to take the eight-byte steps",
    "Résumé — 请翻译 «this» Привет \U0001f600",
    'quotes " and back\\slashes / \n\t\r\b\f',
    "\x00 nul \x01 \x1f and \x7f",
    "x" * 3000,
)


def _random_body(rng: random.Random) -> bytes:
    messages: list[dict[str, object]] = []
    for _ in range(rng.randint(0, 40)):
        text = "".join(rng.choice(_TEXTS) for _ in range(rng.randint(0, 3)))
        content: object = text
        odd = rng.random()
        if odd < 0.05:
            content = [{"type": "text", "text": text}, {"type": "image_url", "url": "u"}]
        elif odd < 0.08:
            content = None
        role: object = rng.choice([*_KNOWN_TEXT_PREFIXES, "odd-role"])
        if rng.random() < 0.03:
            role = rng.choice((7, None, ["user"]))
        messages.append({"role": role, "content": content})
    body: dict[str, object] = {"model": "m", "stream": True, "messages": messages}
    if rng.random() < 0.2:
        body["system"] = rng.choice(("be brief", [{"type": "text", "text": "be brief"}]))
    if rng.random() < 0.2:
        body["tools"] = [{"type": "function", "function": {"name": "f"}}]
    separators = rng.choice(((", ", ": "), (",", ":")))
    return json.dumps(body, ensure_ascii=rng.random() < 0.5, separators=separators).encode()


# route
@pytest.mark.parametrize("route", ["chat", "messages"])
def test_random_chats_parse_the_same_raw_and_strict(
    route: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(13)
    for _ in range(400):
        body = _random_body(rng)
        raw, strict = _both(body, route, monkeypatch)
        assert raw == strict, body[:200]


def test_the_benchmark_chat_parses_the_same_raw_and_strict(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from benchmarks.bench_proxy import chat_body

    for variant in range(4):
        raw, strict = _both(chat_body(variant, 10), "chat", monkeypatch)
        assert isinstance(raw, ParsedRequest) and raw == strict


# body                                                                  | what it is
ODD_BODIES = [
    b'{"model":"m","messages":[{"role":"user","content":"broken \\ud800 pair"}]}',  # lenient
    b'{"model":"m","messages":[{"role":"user","content":"\\udc00"}]}',  # a lone low half
    b'{"model":"m","messages":[{"role":"user","content":"bad \\x escape"}]}',  # not JSON
    b'{"model":"m","messages":[{"role":"user","content":"raw \x01 control"}]}',  # not JSON
    b'{"messages":[{"role":"user","content":"no model"}]}',  # refused: the model is missing
    b'{"model":7,"messages":[{"role":"user","content":"x"}]}',  # refused: not a string
    b'{"model":"m","messages":[{"role":"user","content":1e999}]}',  # a number msgspec reads
    b'{"model":"m","messages":[{"role":"user","content":{"a":[1,2,{"b":null}]}}]}',
    b'{"model":"m","messages":[{"role":"user"}]}',  # no content
    b'{"model":"m","messages":[{"content":"no role"}]}',
    b'{"model":"m","messages":[]}',
    b'{"model":"m","messages":"not a list"}',  # refused by both decoders
    b'{"model":"m","messages":[{"role":"user","content":"x"}],"system":null}',
    b'{"model":"m","messages":[{"role":"user","content":"\\ud83d\\ude00 \\u00e9\\u20ac"}]}',
    b'{"model":"m","messages":[{"role":"user","content":"\\uD83D\\uDE00 upper hex"}]}',
]


@pytest.mark.parametrize("body", ODD_BODIES, ids=lambda body: body.decode()[:60])
def test_odd_chats_parse_or_fail_the_same_raw_and_strict(
    body: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw, strict = _both(body, "chat", monkeypatch)
    assert raw == strict


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.one_of(st.sampled_from(["user", "assistant", "tool", "x"]), _JSON), _JSON),
        max_size=6,
    ),
    st.booleans(),
)
def test_any_json_messages_parse_the_same_raw_and_strict(
    messages: list[tuple[object, object]], ascii_only: bool
) -> None:
    body = json.dumps(
        {"model": "m", "messages": [{"role": r, "content": c} for r, c in messages]},
        ensure_ascii=ascii_only,
    ).encode("utf-8", "surrogatepass")
    with pytest.MonkeyPatch.context() as monkeypatch:
        raw, strict = _both(body, "chat", monkeypatch)
    assert raw == strict


class _Message(msgspec.Struct):
    role: object = ""
    content: msgspec.Raw = msgspec.Raw(b"null")


# raw content                 | why the C build can't hash it
@pytest.mark.parametrize(
    "content",
    [
        b'"lone \\ud800"',  # a lone surrogate escape: msgspec refuses it too
        b'"trailing" x',  # more than one JSON value
        b'"unterminated',
        b'"bad \\q"',
    ],
)
def test_message_links_gives_up_on_a_content_no_decoder_reads(content: bytes) -> None:
    native = needs_c_build_of(_chainc, "_chainc")
    previous = _root(_KIND_CHAT, "m", None)
    messages = [_Message("user", msgspec.Raw(b'"fine"')), _Message("user", msgspec.Raw(content))]
    assert (
        native.message_links(previous, messages, _KNOWN_TEXT_PREFIXES, 0, chain._other_link) is None
    )


def test_message_links_reads_pairs_and_structs_alike() -> None:
    native = needs_c_build_of(_chainc, "_chainc")
    previous = _root(_KIND_CHAT, "m", None)
    raw_texts = [b'"a\\n\\u00e9"', b'"plain"', b"[1, 2]", b"null"]
    structs = [_Message("user", msgspec.Raw(raw)) for raw in raw_texts]
    pairs = [("user", msgspec.json.decode(raw)) for raw in raw_texts]
    expected = python_links(previous, pairs, 3)
    assert native.message_links(previous, structs, _KNOWN_TEXT_PREFIXES, 3, None) is None
    got = native.message_links(previous, structs, _KNOWN_TEXT_PREFIXES, 3, chain._other_link)
    assert got == expected
    assert native.message_links(previous, pairs, _KNOWN_TEXT_PREFIXES, 3, chain._other_link) == (
        expected
    )


def test_without_the_c_build_a_chat_takes_the_strict_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(chain, "_native_messages", None)
    assert chain.chain_for_messages("m", None, [_Message("user", msgspec.Raw(b'"x"'))]) is None


_PURE_SCRIPT = """
import sys
from pharos.prefix import chain
from pharos.proxy.parse import parse_request
parsed = parse_request(sys.stdin.buffer.read(), route="chat")
print(chain.MESSAGE_LINKS, parsed.prompt_tokens, list(parsed.chain.hashes))
"""


def test_a_pure_python_process_parses_a_chat_to_the_same_chain() -> None:
    needs_c_build_of(_chainc, "_chainc")
    if not chain.MESSAGE_LINKS:
        pytest.skip("this process runs the strict path too")
    body = _random_body(random.Random(5)) + b" "
    here = parse_request(body, route="chat")
    assert here.chain is not None
    env = {**os.environ, chain.PURE_ENV: "1"}
    done = subprocess.run(
        [sys.executable, "-c", _PURE_SCRIPT], input=body, env=env, capture_output=True, check=True
    )
    assert done.stdout.decode().split(" ", 2) == [
        "False",
        str(here.prompt_tokens),
        f"{list(here.chain.hashes)}\n",
    ]


# nesting depth of one content | what both paths give
@pytest.mark.parametrize("depth", [500, 5000, 100_000])  # a chain, then "nests too deeply" twice
def test_a_deeply_nested_content_parses_or_fails_the_same_raw_and_strict(
    depth: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    nested = b"[" * depth + b"]" * depth
    body = b'{"model":"m","messages":[{"role":"user","content":' + nested + b"}]}"
    raw, strict = _both(body, "chat", monkeypatch)
    assert raw == strict
