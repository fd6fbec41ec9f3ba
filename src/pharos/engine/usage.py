"""Reply usage parsing (spec §9 "Tap"): token counts and engine timings from one reply line.

One parser serves every engine: the field lists below are data, ordered newest
first, and a field name enters a list only after a recorded stream showed it
(tests/engine/test_usage.py replays every recorded stream with expected values
per engine version). The first field of a list that is present wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

Path = tuple[str, ...]
Source = tuple[Path, ...]
"""Paths whose values are summed; the source counts only when every path is present."""


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int | None
    cached_tokens: int | None
    completion_tokens: int | None
    engine_load_s: float | None
    engine_prefill_s: float | None


PROMPT_TOKENS: tuple[Source, ...] = (
    (("usage", "prompt_tokens"),),
    # Anthropic /v1/messages: input_tokens leaves the cached ones out. vLLM 0.32.0 splits the
    # rest into cache_creation and cache_read; llama.cpp b11312 reports cache_read only.
    (
        ("usage", "input_tokens"),
        ("usage", "cache_creation_input_tokens"),
        ("usage", "cache_read_input_tokens"),
    ),
    (("usage", "input_tokens"), ("usage", "cache_read_input_tokens")),
    # Its stream's message_start: llama.cpp as above; vLLM 0.32.0 the whole prompt alone.
    (("message", "usage", "input_tokens"), ("message", "usage", "cache_read_input_tokens")),
    (("message", "usage", "input_tokens"),),
    # OpenAI /v1/responses (llama.cpp b11312, vLLM 0.32.0): input_tokens counts the cached too.
    (("usage", "input_tokens"),),
    (("response", "usage", "input_tokens"),),
    # llama.cpp: prompt_n counts only the uncached tokens, cache_n the cached ones.
    (("timings", "prompt_n"), ("timings", "cache_n")),
    # Ollama native; v0.30.0 counts only the uncached tokens here (ENGINE-FACTS).
    (("prompt_eval_count",),),
)
CACHED_TOKENS: tuple[Source, ...] = (
    (("usage", "prompt_tokens_details", "cached_tokens"),),  # OpenAI; llama.cpp from b8772
    (("usage", "cache_read_input_tokens"),),  # /v1/messages
    (("message", "usage", "cache_read_input_tokens"),),  # /v1/messages stream: message_start
    (("usage", "input_tokens_details", "cached_tokens"),),  # /v1/responses
    (("response", "usage", "input_tokens_details", "cached_tokens"),),  # its stream
    (("timings", "cache_n"),),  # llama.cpp, every build b6602 to v0.5.0
    (("prompt_eval_cached_count",),),  # Ollama native, from v0.33.3
)
COMPLETION_TOKENS: tuple[Source, ...] = (
    (("usage", "completion_tokens"),),
    (("usage", "output_tokens"),),  # /v1/messages, /v1/responses; message_delta in a stream
    (("message", "usage", "output_tokens"),),  # /v1/messages stream: message_start (0 so far)
    (("response", "usage", "output_tokens"),),  # /v1/responses stream: response.completed
    (("timings", "predicted_n"),),
    (("eval_count",),),
)
LOAD_SECONDS: tuple[tuple[Path, float], ...] = ((("load_duration",), 1e-9),)
"""(path, unit in seconds): Ollama reports nanoseconds."""
PREFILL_SECONDS: tuple[tuple[Path, float], ...] = (
    (("prompt_eval_duration",), 1e-9),  # Ollama, ns
    (("timings", "prompt_ms"), 1e-3),  # llama.cpp
)

MAX_REPLY_TOKENS = 2**40
"""No engine's context comes near this; a larger count is garbage, read as unknown (it would
also overflow the 64-bit integers of state-file and peer snapshots once summed)."""

USAGE_MARKERS = (b"usage", b"prompt_eval", b"timings", b"eval_count")
"""A line holding none of these names carries no usage (may_carry_usage; the stream tap scans
for the first of them with proxy.stream_scan.first_of)."""
_DATA = b"data:"
_DONE = b"[DONE]"
_decoder = msgspec.json.Decoder()


def may_carry_usage(line: bytes) -> bool:
    """Cheap byte check: a line without any of these names cannot carry usage (four `in`
    scans spelled out: any() over a generator cost the stream tap ~1 µs a line)."""
    return b"usage" in line or b"prompt_eval" in line or b"timings" in line or b"eval_count" in line


def decode_line(line: bytes) -> dict[str, Any] | None:
    """The JSON object of one SSE `data:` line, NDJSON line or JSON body; None if it is none."""
    body = line.strip()
    if body.startswith(_DATA):
        body = body[len(_DATA) :].strip()
    if not body or body == _DONE or body[:1] != b"{":
        return None
    try:
        value = _decoder.decode(body)
    except msgspec.DecodeError:
        return None
    return value if isinstance(value, dict) else None


def parse_usage(line: bytes) -> Usage | None:
    """Usage from one JSON body or one SSE `data:` / NDJSON line; None = it carries no usage."""
    if not may_carry_usage(line):
        return None
    reply = decode_line(line)
    return None if reply is None else usage_of(reply)


def usage_of(reply: Mapping[str, Any]) -> Usage | None:
    prompt = _first_count(reply, PROMPT_TOKENS)
    cached = _first_count(reply, CACHED_TOKENS)
    completion = _first_count(reply, COMPLETION_TOKENS)
    if completion is None and _is_embedding(reply) and prompt is not None:
        completion = 0  # embeddings generate nothing: a known 0, not unknown
    load_s = _first_seconds(reply, LOAD_SECONDS)
    prefill_s = _first_seconds(reply, PREFILL_SECONDS)
    if prompt is None and cached is None and completion is None:
        return None
    return Usage(prompt, cached, completion, load_s, prefill_s)


def merge_usage(earlier: Usage | None, later: Usage) -> Usage:
    """A stream's usage so far: a later line's known counts win, its unknowns keep the earlier.

    Anthropic streams split usage over two events (recorded): llama.cpp b11312's
    message_start carries input and cached tokens and its message_delta only output_tokens;
    vLLM 0.32.0's message_start the prompt alone, its message_delta every count."""
    if earlier is None:
        return later
    return Usage(
        later.prompt_tokens if later.prompt_tokens is not None else earlier.prompt_tokens,
        later.cached_tokens if later.cached_tokens is not None else earlier.cached_tokens,
        later.completion_tokens
        if later.completion_tokens is not None
        else earlier.completion_tokens,
        later.engine_load_s if later.engine_load_s is not None else earlier.engine_load_s,
        later.engine_prefill_s if later.engine_prefill_s is not None else earlier.engine_prefill_s,
    )


def _lookup(reply: Mapping[str, Any], path: Path) -> object:
    value: object = reply
    for key in path:
        if type(value) is not dict and not isinstance(
            value, Mapping
        ):  # a decoded dict: no ABC check
            return None
        value = value.get(key)
    return value


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_REPLY_TOKENS:
        return None
    return value


def _first_count(reply: Mapping[str, Any], sources: tuple[Source, ...]) -> int | None:
    for source in sources:
        total = 0
        for path in source:
            count = _count(_lookup(reply, path))
            if count is None:
                break
            total += count
        else:
            return total
    return None


def _first_seconds(
    reply: Mapping[str, Any], fields: tuple[tuple[Path, float], ...]
) -> float | None:
    for path, unit_s in fields:
        value = _lookup(reply, path)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            continue
        return float(value) * unit_s
    return None


def _is_embedding(reply: Mapping[str, Any]) -> bool:
    """OpenAI `object: "list"` with embedding data, or Ollama /api/embed `embeddings`."""
    if isinstance(reply.get("embeddings"), list):
        return True
    data = reply.get("data")
    return (
        reply.get("object") == "list"
        and isinstance(data, list)
        and bool(data)
        and isinstance(data[0], Mapping)
        and "embedding" in data[0]
    )
