"""TestTapStripReplaysRecordedStreams and the tap's line scanning (spec §9, §14 layers 1-2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tools.captures import stream_files

from pharos.engine.usage import Usage, parse_usage
from pharos.proxy.tap import MAX_LINE_BYTES, StreamTap

SSE = [p for p in stream_files() if p.suffix == ".sse"]
NDJSON = [p for p in stream_files() if p.suffix == ".ndjson"]
JSON_BODIES = [p for p in stream_files() if p.suffix == ".json"]


def _id(path: Path) -> str:
    return f"{path.parent.parent.parent.name}/{path.parent.parent.name}/{path.name}"


def _without_usage_chunk(recorded: bytes) -> bytes:
    """The recorded stream minus the one data: line whose choices is empty, and its blank line."""
    lines = recorded.split(b"\n")
    usage_at = [
        i
        for i, line in enumerate(lines)
        if line.startswith(b"data: {") and json.loads(line[len(b"data: ") :])["choices"] == []
    ]
    assert len(usage_at) == 1, "every recorded stream has exactly one usage-only chunk"
    i = usage_at[0]
    assert lines[i + 1] == b""
    return b"\n".join(lines[:i] + lines[i + 2 :])


def _run(tap: StreamTap, recorded: bytes, cuts: list[int]) -> tuple[bytes, Usage | None]:
    out = bytearray()
    previous = 0
    for cut in [*sorted(set(cuts)), len(recorded)]:
        out += tap.feed(recorded[previous:cut])
        previous = cut
    rest, usage = tap.finish()
    return bytes(out + rest), usage


def _final_usage(recorded: bytes) -> Usage | None:
    last = None
    for line in recorded.split(b"\n"):
        usage = parse_usage(line)
        if usage is not None:
            last = usage
    return last


def test_every_recorded_engine_has_sse_streams() -> None:
    engines = {p.parent.parent.parent.name for p in SSE}
    assert {"ollama", "llamacpp", "vllm", "sglang", "llama-swap", "mlx-lm"} <= engines


@pytest.mark.parametrize("path", SSE, ids=_id)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_strip_replays_recorded_stream(path: Path, data: st.DataObject) -> None:
    recorded = path.read_bytes()
    cuts = data.draw(st.lists(st.integers(0, len(recorded)), max_size=12))
    out, usage = _run(StreamTap(strip_usage_chunk=True), recorded, cuts)
    assert out == _without_usage_chunk(recorded)
    assert usage is not None
    assert usage == _final_usage(recorded)


@pytest.mark.parametrize("path", SSE + NDJSON + JSON_BODIES, ids=_id)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_pass_through_is_byte_identical(path: Path, data: st.DataObject) -> None:
    recorded = path.read_bytes()
    cuts = data.draw(st.lists(st.integers(0, len(recorded)), max_size=12))
    out, usage = _run(StreamTap(), recorded, cuts)
    assert out == recorded
    assert usage == _final_usage(recorded)


@pytest.mark.parametrize("path", NDJSON, ids=_id)
def test_ndjson_untouched_even_when_stripping(path: Path) -> None:
    recorded = path.read_bytes()
    out, usage = _run(StreamTap(strip_usage_chunk=True), recorded, [7, 100, 101])
    assert out == recorded
    assert usage is not None
    assert usage.completion_tokens is not None  # read from the final done:true line


def test_overlong_line_passes_through_unparsed() -> None:
    usage_line = b'data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":1}}\n\n'
    pad = b" " * (MAX_LINE_BYTES + 10)
    long_line = (
        b'data: {"choices":[],"usage":{"prompt_tokens":99,"completion_tokens":9}' + pad + b"}\n"
    )
    stream = usage_line + long_line + b"\ndata: [DONE]\n\n"
    for strip in (False, True):
        tap = StreamTap(strip_usage_chunk=strip)
        out = b"".join(tap.feed(stream[i : i + 1000]) for i in range(0, len(stream), 1000))
        rest, usage = tap.finish()
        expected = stream[len(usage_line) :] if strip else stream
        assert out + rest == expected
        assert usage == Usage(7, None, 1, None, None)  # the long line was never parsed


def test_a_huge_one_line_reply_gives_no_usage() -> None:
    body = b'{"usage":{"prompt_tokens":3,"completion_tokens":1},"pad":"' + b"x" * MAX_LINE_BYTES
    body += b'"}'
    tap = StreamTap()
    assert tap.feed(body[:40_000]) + tap.feed(body[40_000:]) == body
    assert tap.finish() == (b"", None)


def test_non_streamed_body_without_newline_is_read_at_finish() -> None:
    body = b'{"object":"chat.completion","choices":[],'
    body += b'"usage":{"prompt_tokens":3,"completion_tokens":2}}'
    for strip in (False, True):
        tap = StreamTap(strip_usage_chunk=strip)
        first = tap.feed(body)
        rest, usage = tap.finish()
        assert first + rest == body
        assert usage == Usage(3, None, 2, None, None)


def test_stripping_holds_a_partial_line_until_its_newline() -> None:
    tap = StreamTap(strip_usage_chunk=True)
    assert tap.feed(b'data: {"choices":[{"delta":{}}]}\n\ndata: {"cho') == (
        b'data: {"choices":[{"delta":{}}]}\n\n'
    )
    assert tap.feed(b'ices":[],"usage":{"prompt_tokens":4,"completion_tokens":1}}\n') == b""
    assert tap.feed(b"\ndata: [DONE]\n\n") == b"data: [DONE]\n\n"


def test_usage_null_chunks_do_not_hide_the_usage() -> None:
    stream = (
        b'data: {"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":1}}\n\n'
        b'data: {"choices":[{"delta":{}}],"usage":null}\n\n'
    )
    tap = StreamTap()
    tap.feed(stream)
    assert tap.finish()[1] == Usage(4, None, 1, None, None)


def test_crlf_events_strip_their_blank_line() -> None:
    stream = (
        b'data: {"choices":[{"delta":{"content":"a"}}]}\r\n\r\n'
        b'data: {"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":1}}\r\n\r\n'
        b"data: [DONE]\r\n\r\n"
    )
    tap = StreamTap(strip_usage_chunk=True)
    out = tap.feed(stream) + tap.finish()[0]
    assert out == b'data: {"choices":[{"delta":{"content":"a"}}]}\r\n\r\ndata: [DONE]\r\n\r\n'


_TOKEN = b'data: {"choices":[{"delta":{"content":"a"}}]}\n\n'
_USAGE = b'data: {"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":1}}\n\n'
_DONE = b"data: [DONE]\n\n"

# one engine read                        | stripped, what the client gets     | usage seen
MANY_EVENTS_IN_ONE_READ = [
    (_TOKEN * 12 + _USAGE + _DONE, _TOKEN * 12 + _DONE, True),  # vLLM's last read at c=32
    (_USAGE + _TOKEN * 3, _TOKEN * 3, True),  # the usage line first
    (_TOKEN * 3 + _USAGE, _TOKEN * 3, True),  # ... and last
    (_TOKEN * 5, _TOKEN * 5, False),
    (b'data: {"usage":null}\n\n' + _TOKEN, b'data: {"usage":null}\n\n' + _TOKEN, False),
]


@pytest.mark.parametrize(("read", "stripped", "has_usage"), MANY_EVENTS_IN_ONE_READ)
def test_a_read_of_many_events_loses_only_the_usage_event(
    read: bytes, stripped: bytes, has_usage: bool
) -> None:
    usage = Usage(4, None, 1, None, None) if has_usage else None
    tap = StreamTap(strip_usage_chunk=True)
    assert tap.feed(read) + tap.finish()[0] == stripped
    assert tap.usage == usage
    passing = StreamTap()
    assert passing.feed(read) == read
    assert passing.finish() == (b"", usage)
