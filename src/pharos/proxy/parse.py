"""Partial decode of request bodies: only the fields routing needs.

msgspec skips every field a Struct does not name, and message contents stay
raw JSON until we hash them, so a 32 KiB chat costs tens of microseconds.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from pharos.prefix import Chain, chain_for_chat, chain_for_prompt
from pharos.prefix.chain import MESSAGE_LINKS, chain_for_messages
from pharos.prefix.memo import ChainMemo, Cut
from pharos.proxy.errors import bad_request

__all__ = [
    "BYTES_PER_TOKEN",
    "TOO_DEEP",
    "ChainMemo",
    "ParsedRequest",
    "ask_for_usage",
    "parse_request",
    "rename_model",
]

BYTES_PER_TOKEN = 4
"""Decoded text bytes per token (assumptions ledger: measured 2.8–6.2)."""


class _Message(msgspec.Struct, gc=False):
    """Untracked by the collector: a decoded JSON role and a Raw can't hold a cycle. A 194-message
    chat allocates 194 of these: 585k -> 516k instructions a decode, collections included."""

    role: Any = ""
    content: msgspec.Raw = msgspec.Raw(b"null")


_NULL = msgspec.Raw(b"null")


class _Body(msgspec.Struct):
    """msgspec.Raw cannot sit in a union (`Raw | None` refuses every non-null value), so an
    absent raw field defaults to the JSON null it would have been."""

    model: Any = None
    messages: list[_Message] | None = None
    tools: msgspec.Raw = _NULL
    stream: Any = None
    stream_options: Any = msgspec.UNSET
    prompt: msgspec.Raw = _NULL
    input: msgspec.Raw = _NULL
    system: msgspec.Raw = _NULL
    instructions: msgspec.Raw = _NULL


class _DecodedMessage(msgspec.Struct):
    role: Any = ""
    content: Any = None


class _DecodedBody(_Body):
    """The fast shape: message contents decoded by msgspec in one pass (strings to str)."""

    messages: list[_DecodedMessage] | None = None  # type: ignore[assignment]
    system: Any = None


class _RawChatBody(_DecodedBody, gc=False):
    """The chat shape read by the C chain (prefix/_chainc.c message_links): contents left raw.
    32 KiB, 194 messages: decoded 87 µs, raw 34 µs (msgspec, one process, side by side).
    Untracked like _Message: every field is a decoded JSON value."""

    messages: list[_Message] | None = None  # type: ignore[assignment]


_DECODED_BODY_DECODER = msgspec.json.Decoder(_DecodedBody)
_RAW_CHAT_DECODER = msgspec.json.Decoder(_RawChatBody)
_CHAT_ROUTES = ("chat", "messages")
_STR_DECODER = msgspec.json.Decoder(str)


class ParsedRequest(msgspec.Struct, frozen=True, gc=False):
    """A msgspec Struct, built once per request: a frozen dataclass sets each field through
    object.__setattr__. Untracked by the collector: strings, numbers and a Chain of tuples."""

    model: str
    stream: bool
    prompt_tokens: int
    chain: Chain | None
    control: bool  # an Ollama chat/generate with no messages or prompt: loads or unloads only
    asked_for_usage: bool  # stream_options.include_usage was already true
    has_stream_options: bool


def _text(raw: msgspec.Raw | None) -> str | bytes | None:
    """A JSON string as its decoded text; anything else as the raw bytes sent."""
    if raw is None:
        return None
    data = bytes(raw)
    if data[:1] == b'"':
        return _STR_DECODER.decode(data)
    if data == b"null":
        return None
    return data


def _as_text(value: object) -> str | bytes | None:
    """`system` as text whichever decoder read it (raw JSON, or decoded by msgspec)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, msgspec.Raw):
        return _text(value)
    return msgspec.json.encode(value)


def _size(content: str | bytes | None) -> int:
    if content is None:
        return 0
    if isinstance(content, str):
        return len(content.encode("utf-8", "surrogatepass"))
    return len(content)


def _decode(body: bytes) -> _Body:
    """Decode contents in one pass. msgspec refuses a lone surrogate escape (`\\ud800`),
    which Python engines accept; such a rare body is re-encoded through the stdlib with
    the lone surrogate replaced, so it still routes and hashes the same way every time."""
    try:
        return _DECODED_BODY_DECODER.decode(body)
    except msgspec.DecodeError as strict_error:
        try:
            lenient = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise strict_error from None
        cleaned = json.dumps(lenient, ensure_ascii=False).encode("utf-8", "replace")
        return _DECODED_BODY_DECODER.decode(cleaned)


def parse_request(
    body: bytes, *, route: str, stream_default: bool = False, memo: ChainMemo | None = None
) -> ParsedRequest:
    """Decode what routing needs from `body`; raises ClientError (400) on malformed input.
    `memo`: the proxy's recent chats, whose links a chat's repeated messages reuse."""
    if not body.strip():
        raise bad_request("The request body is empty; expected a JSON object.")
    chat_memo = memo if MESSAGE_LINKS and route in _CHAT_ROUTES else None
    if chat_memo is not None:
        cut = chat_memo.cut(body)
        if cut is not None:
            parsed = _parse_cut(body, cut, route, stream_default, chat_memo)
            if parsed is not None:
                return parsed
    try:
        # JSON is UTF-8 (RFC 8259 §8.1). Raw fields (`prompt`, `input`, unknown ones) are never
        # decoded by msgspec, so without this a UTF-16 body or a stray \xff reached the engine.
        # An ASCII body is UTF-8 already: isascii() reads it without building a str (32 KiB
        # chat under callgrind: 185k instructions for the decode, ~28k for isascii).
        if not body.isascii():
            body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise bad_request(
            f"The request body is not UTF-8 text (invalid byte at offset {exc.start})."
        ) from None
    try:
        return _parse(body, route, stream_default, chat_memo or memo)
    except RecursionError:
        raise bad_request(TOO_DEEP) from None


def _parse_cut(
    body: bytes, cut: Cut, route: str, stream_default: bool, memo: ChainMemo
) -> ParsedRequest | None:
    """parse_request's result from the cut body and the kept Structs of the messages it repeats,
    or None for the whole decode to say what is wrong (or right). The cut bytes equal a kept
    body's, which was UTF-8 and decoded: only the cut body needs reading."""
    try:
        if not cut.body.isascii():
            cut.body.decode("utf-8")
        raw_chat = _RAW_CHAT_DECODER.decode(cut.body)
        tail = raw_chat.messages
        if tail is None:
            return None
        for message in tail:  # a copy, not a slice keeping the whole cut body alive
            message.content = message.content.copy()
        messages = [*cut.messages, *tail]
        raw_chat.messages = messages  # type: ignore[assignment]
        parsed = _parsed(
            raw_chat, route, stream_default, raw_contents=True, memo=memo, body_bytes=len(body)
        )
    except (UnicodeDecodeError, msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    if parsed is not None:
        memo.remember(body, cut.first, cut.ends, tuple(messages), cut.source)
    return parsed


TOO_DEEP = "The request body nests JSON arrays or objects too deeply."


def _parse(
    body: bytes, route: str, stream_default: bool, memo: ChainMemo | None = None
) -> ParsedRequest:
    if MESSAGE_LINKS and route in _CHAT_ROUTES:
        try:
            raw_chat = _RAW_CHAT_DECODER.decode(body)
        except (msgspec.DecodeError, msgspec.ValidationError):
            pass  # the strict decode below says what is wrong, as it always did
        else:
            parsed = _parsed(
                raw_chat, route, stream_default, raw_contents=True, memo=memo, body_bytes=len(body)
            )
            if parsed is not None:
                if memo is not None and raw_chat.messages is not None:
                    _remember(memo, body, raw_chat.messages)
                return parsed
    try:
        decoded = _decode(body)
    except msgspec.ValidationError as exc:
        raise bad_request(f"Invalid request body: {exc}") from None
    except msgspec.DecodeError as exc:
        raise bad_request(f"The request body is not valid JSON: {exc}") from None
    parsed = _parsed(decoded, route, stream_default, raw_contents=False)
    assert parsed is not None
    return parsed


def _remember(memo: ChainMemo, body: bytes, messages: list[_Message]) -> None:
    """Keep a chat decoded whole, for its next turn's cut (~6 us of C scan on 32 KiB)."""
    if memo.takes(len(body), len(messages)):
        scanned = memo.scan(body)
        if scanned is not None:
            memo.remember(body, scanned[0], scanned[1], tuple(messages))


def _parsed(
    decoded: _Body,
    route: str,
    stream_default: bool,
    *,
    raw_contents: bool,
    memo: ChainMemo | None = None,
    body_bytes: int = 0,
) -> ParsedRequest | None:
    """`raw_contents`: a _RawChatBody, chained by the C build from its raw contents. None when
    that can't be (a content msgspec won't decode alone) or the body is refused: the strict
    decode then says what it always said, in the order it always did."""
    model = decoded.model
    if raw_contents and (not isinstance(model, str) or model == ""):
        return None
    if model is None or model == "":
        raise bad_request("You must provide a model parameter.", code="missing_model")
    if not isinstance(model, str):
        raise bad_request("`model` must be a string.")

    stream = decoded.stream if isinstance(decoded.stream, bool) else stream_default
    options = decoded.stream_options
    has_options = options is not msgspec.UNSET
    asked = isinstance(options, dict) and options.get("include_usage") is True

    raw_tools = bytes(decoded.tools)
    tools = raw_tools if raw_tools != b"null" else None
    control = False
    chain: Chain | None
    if route in _CHAT_ROUTES:
        system = decoded.system
        has_system = system is not None and not (
            isinstance(system, msgspec.Raw) and bytes(system) == b"null"
        )
        if raw_contents:
            messages: list[Any] = decoded.messages or []
            if has_system:
                messages = [("system", system), *messages]
            control = not messages
            chain = (
                chain_for_messages(model, tools, messages, memo, body_bytes) if messages else None
            )
            if messages and chain is None:
                return None
        else:
            # Contents go to the chain as decoded by msgspec (str, a list of parts, or raw JSON
            # on the fallback path); the chain counts their text bytes for the token estimate.
            pairs: list[tuple[str, object]] = []
            if has_system:
                pairs.append(("system", system))
            for message in decoded.messages or ():
                role = message.role if isinstance(message.role, str) else ""
                pairs.append((role, message.content))
            control = not pairs
            chain = chain_for_chat(model, tools, pairs) if pairs else None
        text_bytes = chain.cum_bytes[-1] if chain is not None and chain.cum_bytes else 0
    elif route in ("completion", "generate"):
        prompt = _text(decoded.prompt)
        system_text = _as_text(decoded.system)
        control = prompt is None or prompt == ""
        if isinstance(prompt, str):
            chain = chain_for_prompt(model, prompt) if prompt else None
        elif prompt is not None:
            chain = chain_for_prompt(model, prompt.decode("utf-8", "replace"))
        else:
            chain = None
        text_bytes = _size(prompt) + _size(system_text)
    else:  # embeddings, responses: estimate only
        text_bytes = _size(_text(decoded.input)) + _size(_text(decoded.instructions))
        chain = None
    if tools is not None and chain is None:  # a chat's chain counts its tools already
        text_bytes += len(tools)
    return ParsedRequest(
        model=model,
        stream=stream,
        prompt_tokens=max(1, text_bytes // BYTES_PER_TOKEN),
        chain=chain,
        control=control and route in ("chat", "generate") and stream_default,
        asked_for_usage=asked,
        has_stream_options=has_options,
    )


_USAGE_OPTION = b'"stream_options":{"include_usage":true},'


def ask_for_usage(body: bytes, *, has_stream_options: bool) -> bytes:
    """Set stream_options.include_usage, keeping the client's other stream options.

    With no stream_options key at all (not even `null`) the key is inserted after
    the opening brace, so the rest of the body goes to the engine byte for byte.
    """
    if not has_stream_options:
        after = body.index(b"{") + 1
        view = memoryview(body)  # one copy of the body, not three (1.7 -> 1.2 µs on 32 KiB)
        return b"".join((view[:after], _USAGE_OPTION, view[after:]))
    whole = _decode_whole(body)
    options = whole.get("stream_options")
    kept = options if isinstance(options, dict) else {}
    whole["stream_options"] = {**kept, "include_usage": True}
    return _encode_whole(whole)


def rename_model(body: bytes, served_model: str) -> bytes:
    """The engine's own name for an aliased model (spec §4 aliases)."""
    whole = _decode_whole(body)
    whole["model"] = served_model
    return _encode_whole(whole)


class _Lenient(dict[str, Any]):
    """A body only the stdlib could decode (a lone surrogate escape): encoded back the same
    way, the escape kept as `\\ud800`, so the engine gets exactly what the client sent."""


def _decode_whole(body: bytes) -> dict[str, Any]:
    """The body as a dict, for the rare rewrites; parse_request already accepted it."""
    try:
        try:
            whole = msgspec.json.decode(body)
        except msgspec.DecodeError:
            lenient = json.loads(body)
            whole = _Lenient(lenient) if isinstance(lenient, dict) else lenient
    except RecursionError:
        raise bad_request(TOO_DEEP) from None
    if not isinstance(whole, dict):
        raise bad_request("The request body must be a JSON object.")
    return whole


def _encode_whole(whole: dict[str, Any]) -> bytes:
    if isinstance(whole, _Lenient):
        return json.dumps(whole, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    return msgspec.json.encode(whole)
