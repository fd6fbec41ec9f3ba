"""parse.py's raw chat shape is untracked by the collector (issue 13): a 194-message chat
allocated 194 tracked message Structs per request, ~69k instructions a decode with the
collections they caused. Nothing a JSON decode builds can hold a cycle, so none is missed."""

from __future__ import annotations

import gc
import json

from pharos.proxy.parse import _RAW_CHAT_DECODER, parse_request

# what a message holds                      | a JSON body
BODIES = [
    ("a string content", {"role": "user", "content": "hi"}),
    ("a list of parts", {"role": "user", "content": [{"type": "text", "text": "a"}]}),
    ("an object as its role", {"role": {"nested": [1, 2]}, "content": "x"}),
]


def test_the_raw_chat_body_and_its_messages_are_untracked_whatever_they_hold() -> None:
    for _, message in BODIES:
        body = json.dumps({"model": "m", "messages": [message], "tools": []}).encode()
        decoded = _RAW_CHAT_DECODER.decode(body)
        assert decoded.messages is not None
        assert not gc.is_tracked(decoded)
        assert not any(gc.is_tracked(m) for m in decoded.messages)


def test_a_chat_parsed_while_the_collector_runs_still_chains_every_message() -> None:
    body = json.dumps(
        {"model": "m", "messages": [{"role": "user", "content": f"turn {i}"} for i in range(300)]}
    ).encode()
    before = parse_request(body, route="chat")
    gc.collect()
    after = parse_request(body, route="chat")
    gc.collect()
    assert before == after
    assert before.chain is not None and len(before.chain.hashes) == 300
