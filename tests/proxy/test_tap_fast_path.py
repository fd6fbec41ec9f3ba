"""The tap's pass-through shortcut for whole lines that name no usage field: a chunk that only
looks close (a word holding `eval`) still passes byte for byte, and a usage line that arrives
whole in one chunk is still read, on every engine's field names."""

from __future__ import annotations

import pytest

from pharos.proxy.tap import StreamTap

CONTENT = b'data: {"choices":[{"delta":{"content":"we evaluate it"}}]}\n\n'


@pytest.mark.parametrize("strip", [False, True])
def test_a_chunk_with_eval_in_its_text_passes_through_unchanged_and_carries_no_usage(
    strip: bool,
) -> None:
    tap = StreamTap(strip_usage_chunk=strip)
    assert tap.feed(CONTENT) == CONTENT
    assert tap.finish() == (b"", None)


@pytest.mark.parametrize(
    ("line", "prompt", "completion"),
    [
        # (one whole line in one chunk,                                   prompt, completion)
        (b'data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3}}\n', 7, 3),
        (b'{"done":true,"prompt_eval_count":5,"eval_count":2}\n', 5, 2),  # Ollama NDJSON
        (b'data: {"timings":{"prompt_n":4,"cache_n":1,"predicted_n":6}}\n', 5, 6),  # llama.cpp
    ],
)
def test_a_usage_line_arriving_whole_is_read(line: bytes, prompt: int, completion: int) -> None:
    tap = StreamTap()
    assert tap.feed(CONTENT) + tap.feed(line) == CONTENT + line
    _, usage = tap.finish()
    assert usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens) == (prompt, completion)
