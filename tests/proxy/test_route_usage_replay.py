"""The tap on every recorded /v1/messages, /v1/responses and streamed /v1/completions reply
(tests/captures/routes/<engine>/<version>/streams, recorded live by tests/live/routes.py).

Expected values were read by hand from each file: an Anthropic stream splits its usage
between message_start (input and cached tokens) and message_delta (output tokens), and
llama.cpp's Anthropic `input_tokens` leaves the cached tokens out, so the prompt is the sum.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tools.captures import our_captures as repo_captures_root

from pharos.engine.usage import Usage, merge_usage
from pharos.proxy.tap import StreamTap

ROUTES_ROOT = repo_captures_root() / "routes"
FILES = sorted(p for p in ROUTES_ROOT.glob("*/*/streams/*") if p.name != "replies.tsv")

# (prompt, cached, completion) the tap must read from the whole reply; None = no usage.
EXPECTED: dict[str, tuple[int, int | None, int] | None] = {
    # llama.cpp b11312: cold, then the same ~600-token prompt again (588 cached).
    "llamacpp/b11312/messages.json": (35, 0, 8),
    "llamacpp/b11312/messages.1.sse": (589, 0, 8),
    "llamacpp/b11312/messages.2.sse": (589, 588, 8),
    "llamacpp/b11312/count-tokens.json": None,  # {"input_tokens": 35}: tokenizing, no reply
    "llamacpp/b11312/responses.json": (35, 34, 7),
    "llamacpp/b11312/responses.1.sse": (589, 588, 8),  # warm: messages.* sent it first
    "llamacpp/b11312/responses.2.sse": (589, 588, 8),
    # llama.cpp puts usage on the last chunk whether asked or not.
    "llamacpp/b11312/openai-completion.sse": (8, 4, 4),
    "llamacpp/b11312/openai-completion.usage.sse": (8, 7, 4),
    # vLLM 0.32.0: message_start has the prompt alone; message_delta every count, the
    # uncached part split into input_tokens (77) and cache_creation/cache_read (512).
    "vllm/v0.32.0/messages.json": (35, 0, 6),
    "vllm/v0.32.0/messages.1.sse": (589, 0, 8),
    "vllm/v0.32.0/messages.2.sse": (589, 512, 8),
    "vllm/v0.32.0/count-tokens.json": None,
    "vllm/v0.32.0/responses.json": (35, 0, 8),
    "vllm/v0.32.0/responses.1.sse": (589, 512, 8),
    "vllm/v0.32.0/responses.2.sse": (589, 512, 8),
    # vLLM reports usage on a streamed completion only when asked, in a choices:[] chunk.
    "vllm/v0.32.0/openai-completion.sse": None,
    "vllm/v0.32.0/openai-completion.usage.sse": (8, 0, 4),
}


def _key(path: Path) -> str:
    return f"{path.parent.parent.parent.name}/{path.parent.parent.name}/{path.name}"


def test_every_recorded_route_reply_has_a_row() -> None:
    assert {_key(p) for p in FILES} == set(EXPECTED)


@pytest.mark.parametrize("path", FILES, ids=_key)
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_the_tap_reads_each_recorded_reply_whole_however_it_is_cut(
    path: Path, data: st.DataObject
) -> None:
    recorded = path.read_bytes()
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(recorded)), max_size=12))))
    tap = StreamTap()
    out = bytearray()
    previous = 0
    for cut in [*cuts, len(recorded)]:
        out += tap.feed(recorded[previous:cut])
        previous = cut
    rest, usage = tap.finish()
    assert bytes(out) + rest == recorded  # pass-through: byte for byte
    want = EXPECTED[_key(path)]
    got = (
        None
        if usage is None
        else (usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens)
    )
    assert got == want


def test_a_later_line_fills_only_what_it_knows() -> None:
    start = Usage(589, 588, 0, None, None)  # message_start
    delta = Usage(None, None, 8, None, None)  # message_delta
    assert merge_usage(start, delta) == Usage(589, 588, 8, None, None)
    assert merge_usage(None, delta) == delta
    assert merge_usage(delta, start) == Usage(589, 588, 0, None, None)  # known values win


def test_stripping_the_asked_for_usage_chunk_of_a_vllm_completion_stream() -> None:
    recorded = (ROUTES_ROOT / "vllm/v0.32.0/streams/openai-completion.usage.sse").read_bytes()
    tap = StreamTap(strip_usage_chunk=True)
    out = tap.feed(recorded[:300]) + tap.feed(recorded[300:])
    rest, usage = tap.finish()
    events = (out + rest).split(b"\n\n")
    assert all(b'"choices":[]' not in event for event in events)
    assert events[-2] == b"data: [DONE]" and len(events) == recorded.count(b"\n\n")
    assert usage == Usage(8, 0, 4, None, None)
