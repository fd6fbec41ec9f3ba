"""What a fake says: the recorded reply's words, stopping at their natural end; and valid
JSON when the request asks for it, so Open WebUI's title, tag and follow-up calls work.

Open WebUI 0.11.4's side requests (recorded: /work/shared/captures/clients/open-webui)
end their prompt with `JSON format: { "title": "your concise title here" }` (tags and
follow-ups likewise) and ask `max_tokens: 1000`; a fake that generated all 1,000 tokens
took 31 s per title and never gave JSON. The reply is that example object with its
strings replaced by canned words, split into token-sized pieces.
"""

from __future__ import annotations

import json
import re
from typing import Any

WORDS = ("Hello", "!", " How", " can", " I", " assist", " you", " today", "?")
"""The recorded replies' tokens (streams/openai-chat.*.sse), reused as the fakes' output."""

_JSON_EXAMPLE = re.compile(rb"JSON format:\s*(\{)")
_decoder = json.JSONDecoder()


def _canned(example: Any) -> Any:
    if isinstance(example, str):
        return "Hello there"
    if isinstance(example, list):
        return [_canned(item) for item in example] if example else ["Hello there"]
    if isinstance(example, dict):
        return {key: _canned(value) for key, value in example.items()}
    return example


def _example_object(prompt: bytes) -> dict[str, Any] | None:
    """The JSON object a prompt shows after `JSON format:`, if it parses."""
    # The last one: the chat history quoted above it may hold others.
    matches = list(_JSON_EXAMPLE.finditer(prompt))
    if not matches:
        return None
    found = matches[-1]
    text = prompt[found.start(1) :].decode("utf-8", "replace")
    try:
        value, _ = _decoder.raw_decode(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def wants_json(body: dict[str, object]) -> bool:
    """OpenAI `response_format` json_object / json_schema, or Ollama's `format`."""
    response_format = body.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type") in (
        "json_object",
        "json_schema",
    ):
        return True
    fmt = body.get("format")
    return fmt == "json" or isinstance(fmt, dict)


PIECE_CHARS = 4
"""About a token of English or JSON per piece (the ledger's 4 bytes per token)."""


def pieces(text: str) -> tuple[str, ...]:
    """Token-sized pieces whose concatenation is `text`."""
    return tuple(text[i : i + PIECE_CHARS] for i in range(0, len(text), PIECE_CHARS))


def reply_words(prompt: bytes, *, json_asked: bool = False) -> tuple[str, ...]:
    example = _example_object(prompt)
    if example is None and not json_asked:
        return WORDS
    reply = _canned(example) if example is not None else {"response": "".join(WORDS)}
    return pieces(json.dumps(reply, ensure_ascii=False))
