"""parse_request: the fields routing needs, from every body shape the routes accept."""

from __future__ import annotations

import json

import pytest

from pharos.proxy.errors import ClientError
from pharos.proxy.parse import ask_for_usage, parse_request

TEXT = "Привет, 你好! Say hello in three languages.\nOne line each."


def test_escaped_and_raw_utf8_bodies_give_the_same_chain_and_estimate() -> None:
    message = {"model": "m", "messages": [{"role": "user", "content": TEXT}]}
    escaped = json.dumps(message, ensure_ascii=True).encode()
    raw = json.dumps(message, ensure_ascii=False).encode()
    assert escaped != raw
    a = parse_request(escaped, route="chat")
    b = parse_request(raw, route="chat")
    assert a.chain == b.chain
    assert a.prompt_tokens == b.prompt_tokens == len(TEXT.encode()) // 4


def test_a_lone_surrogate_escape_falls_back_and_still_parses() -> None:
    body = b'{"model":"m","messages":[{"role":"user","content":"broken \\ud800 pair"}]}'
    parsed = parse_request(body, route="chat")
    assert parsed.chain is not None and len(parsed.chain.hashes) == 1


def test_generate_with_a_system_prompt_counts_both() -> None:
    body = json.dumps({"model": "m", "prompt": "x" * 400, "system": "y" * 400}).encode()
    parsed = parse_request(body, route="generate", stream_default=True)
    assert parsed.prompt_tokens == 200
    assert parsed.stream is True
    assert parsed.control is False


def test_messages_system_blocks_join_the_chain() -> None:
    with_system = {
        "model": "m",
        "system": [{"type": "text", "text": "be brief"}],
        "messages": [{"role": "user", "content": "hi"}],
    }
    without = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    a = parse_request(json.dumps(with_system).encode(), route="messages")
    b = parse_request(json.dumps(without).encode(), route="messages")
    assert a.chain is not None and b.chain is not None
    assert len(a.chain.hashes) == 2 and len(b.chain.hashes) == 1


def test_an_ollama_chat_without_messages_is_a_control_request() -> None:
    parsed = parse_request(b'{"model":"m","keep_alive":0}', route="chat", stream_default=True)
    assert parsed.control is True
    assert parsed.chain is None


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"", "invalid_request_error"),
        (b"{not json", "invalid_request_error"),
        (b"[1, 2]", "invalid_request_error"),
        (b'{"messages": []}', "missing_model"),
        (b'{"model": 7}', "invalid_request_error"),
        (b'{"model": "m", "messages": "hi"}', "invalid_request_error"),
    ],
)
def test_bad_bodies_are_400_with_a_reason(body: bytes, code: str) -> None:
    with pytest.raises(ClientError) as refused:
        parse_request(body, route="chat")
    assert refused.value.status == 400
    assert refused.value.code == code


def test_stream_options_null_is_replaced_not_duplicated() -> None:
    body = b'{"model":"m","stream":true,"stream_options":null,"messages":[]}'
    parsed = parse_request(body, route="chat")
    asked = ask_for_usage(body, has_stream_options=parsed.has_stream_options)
    assert asked.count(b"stream_options") == 1
    assert json.loads(asked)["stream_options"] == {"include_usage": True}


def test_other_stream_options_are_kept() -> None:
    body = b'{"model":"m","stream":true,"stream_options":{"continuous_usage_stats":true}}'
    parsed = parse_request(body, route="chat")
    asked = json.loads(ask_for_usage(body, has_stream_options=parsed.has_stream_options))
    assert asked["stream_options"] == {"continuous_usage_stats": True, "include_usage": True}


# The chain of a parsed body: escapes decoded, parts raw, a missing content; computed before
# the chain loop was tightened (issue 13). Peers and state files carry these hashes.
def test_a_parsed_body_keeps_its_pinned_chain() -> None:
    body = (
        b'{"model":"m","messages":[{"role":"system","content":"S\\u00e9"},'
        b'{"role":"user","content":"q\\nx"},'
        b'{"role":"assistant","content":[{"type":"text","text":"t"}]},{"role":"user"}],'
        b'"stream":true}'
    )
    chain = parse_request(body, route="chat").chain
    assert chain is not None
    assert chain.hashes == (
        0xEC5DF4990B73DFD0,
        0x20A3EC2C2986835E,
        0xE180F0F111920646,
        0x2FA1CB95AFFC321A,
    )
    assert chain.cum_bytes == (3, 6, 7, 7)
