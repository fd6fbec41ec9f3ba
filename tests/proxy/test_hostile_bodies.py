"""Malformed bodies are a 400 (ClientError), never an exception escaping the parser.

Each case below was a 500 with a traceback before (issue 11, "Input").
"""

from __future__ import annotations

import json

import pytest

from pharos.proxy.errors import ClientError
from pharos.proxy.parse import ask_for_usage, parse_request, rename_model

DEEP = 5000

# route, body: each found by the hostile battery
NESTED_LIST = b"[" * DEEP + b"]" * DEEP
NESTED_OBJECT = b'{"a":' * DEEP + b"1" + b"}" * DEEP
USER = b'"messages":[{"role":"user","content":'

MALFORMED = [
    ("chat", b'{"model":"m","messages":' + NESTED_LIST + b"}"),
    ("chat", b'{"model":"m",' + USER + NESTED_LIST + b"}]}"),
    ("chat", b'{"model":"m","x":' + NESTED_OBJECT + b"," + USER + b'"\\ud800"}]}'),
    ("completion", b'{"model":"m","prompt":"\xff\xfe broken"}'),
    ("completion", b'{"model":"m","prompt":["\xc3\x28"]}'),
    ("responses", b'{"model":"m","input":"\xed\xa0\x80"}'),
    ("embeddings", b'{"model":"m","input":["ok", "\xff"]}'),
    ("generate", b'{"model":"m","prompt":"x","system":"\xff"}'),
    ("chat", b'{"model":"m","messages":[{"role":"\xff","content":"x"}]}'),
    ("chat", b'{"model":"m",' + USER + b'[{"type":"text","text":"\xff"}]}]}'),
]


@pytest.mark.parametrize(("route", "body"), MALFORMED)
def test_a_malformed_body_is_a_400_not_an_exception(route: str, body: bytes) -> None:
    with pytest.raises(ClientError) as caught:
        parse_request(body, route=route)
    assert caught.value.status == 400


def test_a_utf16_body_is_refused_rather_than_forwarded() -> None:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    with pytest.raises(ClientError) as caught:
        parse_request(body.encode("utf-16"), route="chat")
    assert caught.value.status == 400
    assert "UTF-8" in caught.value.message


SURROGATE_CHAT = (
    b'{"model":"m","stream":true,"stream_options":{"x":1},' + USER + b'"a \\ud800 b"}]}'
)


def test_asking_for_usage_on_a_body_with_a_lone_surrogate_keeps_it_valid_json() -> None:
    parsed = parse_request(SURROGATE_CHAT, route="chat")
    out = ask_for_usage(SURROGATE_CHAT, has_stream_options=parsed.has_stream_options)
    whole = json.loads(out)
    assert whole["stream_options"] == {"x": 1, "include_usage": True}
    assert whole["messages"][0]["content"] == "a \ud800 b"


def test_renaming_the_model_of_a_body_with_a_lone_surrogate_keeps_it_valid_json() -> None:
    parse_request(SURROGATE_CHAT, route="chat")
    whole = json.loads(rename_model(SURROGATE_CHAT, "served"))
    assert whole["model"] == "served"
    assert whole["messages"][0]["content"] == "a \ud800 b"


def test_deep_nesting_is_a_400_in_the_rewrites_too() -> None:
    body = b'{"model":"m","x":' + b"[" * DEEP + b"]" * DEEP + b',"stream":true,"stream_options":{}}'
    for rewrite in (
        lambda: ask_for_usage(body, has_stream_options=True),
        lambda: rename_model(body, "served"),
    ):
        with pytest.raises(ClientError) as caught:
            rewrite()
        assert caught.value.status == 400
