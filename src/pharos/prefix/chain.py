"""Chained prefix hashes of a request (spec §6).

h0 = sha256(seed, kind, model, tools) has no link of its own; link i is
sha256(h(i-1), role_i, content_i) with every field length-prefixed. Links keep
the full 32-byte digest internally and expose the first 8 bytes as a
big-endian 64-bit int. The seed is a constant, so hashes agree across
processes, instances and restarts.

String content is hashed as its decoded text (UTF-8 bytes of the str), so a
client escaping non-ASCII as \\uXXXX and one sending raw UTF-8 get the same
chain. Content that is not a string (a list of parts) is hashed as JSON bytes:
msgspec's compact re-encoding of a decoded value (what proxy/parse.py passes),
or the raw bytes when given raw JSON. `chain_for_messages` gives parse's links
from raw JSON contents (msgspec.Raw), a string unescaped in C and anything else
decoded first: proxy/parse.py's fast path.

`cum_bytes` counts text the engine caches for certain: the tools (their JSON, once:
they sit in h0, so any matched link matched past them), decoded string content, and
the `text` of text parts in a list content. Roles, template tokens and images are
left out on purpose: the router judges a prediction wrong when the engine cached
less than half of it, so the estimate must err low. A base64 image counted as bytes
would predict ~250k tokens per MB and get every correct hit pruned. Tools are prompt
text cached with the messages (spec ledger: Open WebUI's 35 tools, 6,257 of 6,258
tokens cached on a repeat, llama.cpp --jinja); left out, a turn the engine served
with 6,192 of 6,210 tokens cached was predicted as 6 (issue 16).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import msgspec

if TYPE_CHECKING:
    from pharos.prefix.memo import ChainMemo

PROMPT_BLOCK_BYTES = 1024

_SEED = b"pharos prefix chain v1"
_KIND_CHAT = b"chat"
_KIND_PROMPT = b"prompt"
_TAG_TEXT = b"s"
_TAG_RAW_JSON = b"j"
_NO_TOOLS = frozenset({b"", b"null", b"[]"})
_JSON_WHITESPACE = b" \t\r\n"


@dataclass(frozen=True, slots=True)
class Chain:
    hashes: tuple[int, ...]  # h1..hn, 64-bit; h0 has no link of its own
    cum_bytes: tuple[int, ...]  # text bytes covered up to and including link i
    tools_bytes: int = 0  # of which the tools' JSON (in every link): see prefix/tools.py


EMPTY_CHAIN = Chain((), ())


class _Part(msgspec.Struct):
    text: str | None = None


_parts_decoder = msgspec.json.Decoder(list[_Part])
_str_decoder = msgspec.json.Decoder(str)


def _field(data: bytes) -> bytes:
    return len(data).to_bytes(8, "big") + data


def _utf8(text: str) -> bytes:
    # surrogatepass: a lone \ud800 escape must hash, not crash the request.
    return text.encode("utf-8", "surrogatepass")


def _tools_text_bytes(tools: bytes | None) -> int:
    """The tools' JSON length, none for `null` / `[]`: what the chat template renders."""
    if tools is None:
        return 0
    stripped = tools.strip(_JSON_WHITESPACE)
    return 0 if stripped in _NO_TOOLS else len(stripped)


def _root(kind: bytes, model: str, tools: bytes | None) -> bytes:
    if tools is not None and tools.strip(_JSON_WHITESPACE) in _NO_TOOLS:
        tools = None
    tools_field = b"\x00" if tools is None else b"\x01" + _field(tools)
    return hashlib.sha256(
        _field(_SEED) + _field(kind) + _field(_utf8(model)) + tools_field
    ).digest()


_EMPTY_ROLE = _field(b"")


_KNOWN_ROLE_FIELDS = {
    role: _field(role.encode())
    for role in ("system", "user", "assistant", "tool", "developer", "function", "")
}
"""Roles repeat on every message: the usual ones are encoded once. A client's own role string
is never cached (40 distinct 8 MiB roles once kept 673 MB through an LRU bounded by count)."""


def _role_field(role: str) -> bytes:
    known = _KNOWN_ROLE_FIELDS.get(role)
    return known if known is not None else _field(_utf8(role))


_KNOWN_TEXT_PREFIXES = {role: field + _TAG_TEXT for role, field in _KNOWN_ROLE_FIELDS.items()}
"""The role field and text tag of a string message with a usual role, joined once."""

_pack_u64 = struct.Struct(">Q").pack
_unpack_u64 = struct.Struct(">Q").unpack_from


def _link(previous: bytes, role_field: bytes, tag: bytes, content: bytes) -> bytes:
    digest = hashlib.sha256(previous)
    digest.update(role_field + tag + len(content).to_bytes(8, "big"))
    digest.update(content)
    return digest.digest()


def _to_int(digest: bytes) -> int:
    return int.from_bytes(digest[:8], "big")


def _decode_json_string(raw: bytes) -> str | None:
    try:
        return _str_decoder.decode(raw)
    except msgspec.DecodeError:
        pass
    try:  # msgspec refuses lone surrogates; the stdlib keeps them
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, str) else None


def _text_bytes_of_parts(raw: bytes) -> int:
    try:
        parts = _parts_decoder.decode(raw)
    except msgspec.DecodeError:
        return 0
    return sum(len(_utf8(part.text)) for part in parts if part.text is not None)


def _content(content: object) -> tuple[bytes, bytes, int]:
    """(tag, hashed bytes, text bytes) of one message content."""
    if isinstance(content, msgspec.Raw):
        raw = bytes(content)
        if raw[:1] == b'"' and raw[-1:] == b'"' and b"\\" not in raw:
            # A JSON string with no escapes: its bytes between the quotes are its UTF-8 text.
            text = raw[1:-1]
            return _TAG_TEXT, text, len(text)
        return _content(raw)
    if isinstance(content, str):
        text = _utf8(content)
        return _TAG_TEXT, text, len(text)
    if content is None:
        return _TAG_TEXT, b"", 0
    if isinstance(content, msgspec.Raw | bytes | bytearray | memoryview):
        raw = bytes(content)
    else:  # an already decoded list or object: re-encode deterministically
        raw = msgspec.json.encode(content)
    stripped = raw.strip(_JSON_WHITESPACE)
    if stripped[:1] == b'"':
        decoded = _decode_json_string(stripped)
        if decoded is not None:
            text = _utf8(decoded)
            return _TAG_TEXT, text, len(text)
    elif stripped == b"null":
        return _TAG_TEXT, b"", 0
    return _TAG_RAW_JSON, raw, _text_bytes_of_parts(raw)


def chain_for_chat(
    model: str, tools: bytes | msgspec.Raw | None, messages: Sequence[tuple[str, object]]
) -> Chain:
    """Chain of a chat request: one link per message.

    content: a decoded str, None, or the raw JSON of the field (msgspec.Raw or
    bytes; a raw JSON string is decoded first, so escaping never matters).
    tools: the raw JSON of the `tools` field; None, `null` and `[]` mean no tools.
    """
    if not messages:
        return EMPTY_CHAIN
    tools_bytes = None if tools is None else bytes(tools)
    previous = _root(_KIND_CHAT, model, tools_bytes)
    tools_text_bytes = _tools_text_bytes(tools_bytes)
    links = None
    if _native_links is not None:
        links = _native_links(previous, messages, _KNOWN_TEXT_PREFIXES, tools_text_bytes)
    if links is None:
        links = python_links(previous, messages, tools_text_bytes)
    return Chain(links[0], links[1], tools_text_bytes)


Links = tuple[tuple[int, ...], tuple[int, ...]]
"""(hashes, cum_bytes) of a chat's messages."""

_any_decoder = msgspec.json.Decoder()


def _other_link(role: object, content: object) -> tuple[bytes, int] | None:
    """What message_links hashes after the previous digest for a message it doesn't read itself
    (a part list, a null, an unusual role), and the text bytes it covers: python_links' bytes for
    the content as msgspec decodes it. A role that is not a string counts as no role."""
    role_text = role if isinstance(role, str) else ""
    if isinstance(content, msgspec.Raw):
        try:
            content = _any_decoder.decode(content)
        except msgspec.DecodeError:
            return None
    if type(content) is str:
        data = _utf8(content)
        return _role_field(role_text) + _TAG_TEXT + _pack_u64(len(data)) + data, len(data)
    tag, data, text_bytes = _content(content)
    return _role_field(role_text) + tag + _pack_u64(len(data)) + data, text_bytes


MemoEntry = tuple[bytes, int, tuple[object, ...], bytes, tuple[int, ...], tuple[int, ...]]
"""(h0, text bytes h0 covers, messages, every link's 32-byte digest, hashes, cum_bytes)."""


def chain_for_messages(
    model: str,
    tools: bytes | msgspec.Raw | None,
    messages: Sequence[object],
    memo: ChainMemo | None = None,
    body_bytes: int = 0,
) -> Chain | None:
    """chain_for_chat's chain, read by the C build from the decoded messages themselves: objects
    with `role` (any JSON value) and `content` (msgspec.Raw of the field, or decoded), or
    (role, content) pairs. A raw JSON string content is hashed as its decoded text, anything
    else as chain_for_chat hashes the value msgspec decodes from it. With `memo`, the messages
    an earlier chat of the memo repeats take its links (`body_bytes`: the body they came in).

    None without the C build or when a content doesn't decode: the caller then decodes the
    contents itself and calls chain_for_chat (parse.py's strict path)."""
    if not messages:
        return EMPTY_CHAIN
    if _native_messages is None:
        return None
    tools_bytes = None if tools is None else bytes(tools)
    previous = (
        _root(_KIND_CHAT, model, tools_bytes)
        if memo is None
        else memo.chat_root(model, tools_bytes)
    )
    tools_text_bytes = _tools_text_bytes(tools_bytes)
    if memo is None or _native_memo_messages is None or not memo.takes(body_bytes, len(messages)):
        links = _native_messages(
            previous, messages, _KNOWN_TEXT_PREFIXES, tools_text_bytes, _other_link
        )
        return None if links is None else Chain(links[0], links[1], tools_text_bytes)
    kept = tuple(messages)
    found = _native_memo_messages(
        previous, kept, _KNOWN_TEXT_PREFIXES, tools_text_bytes, _other_link, memo.entries
    )
    if found is None:
        return None
    hashes, cum_bytes, digests, reused, reused_links = found
    memo.keep((previous, tools_text_bytes, kept, digests, hashes, cum_bytes), reused, reused_links)
    return Chain(hashes, cum_bytes, tools_text_bytes)


def python_links(previous: bytes, messages: Sequence[tuple[str, object]], covered: int) -> Links:
    """The links after h0 = `previous`; `covered`: the text bytes h0 holds (the tools)."""
    hashes: list[int] = []
    cum_bytes: list[int] = []
    sha256 = hashlib.sha256
    text_prefixes = _KNOWN_TEXT_PREFIXES
    for role, content in messages:
        # The common case inline, one sha256 call per link over the joined fields (the same
        # bytes as _link's updates): 1.04 -> 0.87 µs a message on a 194-message chat.
        if type(content) is str and (prefix := text_prefixes.get(role)) is not None:
            data = content.encode("utf-8", "surrogatepass")
            text_bytes = len(data)
        else:
            tag, data, text_bytes = _content(content)
            prefix = _role_field(role) + tag
        previous = sha256(previous + prefix + _pack_u64(len(data)) + data).digest()
        covered += text_bytes
        hashes.append(_unpack_u64(previous)[0])
        cum_bytes.append(covered)
    return tuple(hashes), tuple(cum_bytes)


NativeLinks = Callable[[bytes, Sequence[tuple[str, object]], dict[str, bytes], int], Links | None]
OtherLink = Callable[[object, object], tuple[bytes, int] | None]
NativeMessageLinks = Callable[
    [bytes, Sequence[object], dict[str, bytes], int, OtherLink | None], Links | None
]
MemoLinks = tuple[tuple[int, ...], tuple[int, ...], bytes, MemoEntry | None, int]
"""message_links with a memo: (hashes, cum_bytes, digests, the entry used, links it gave)."""
NativeMemoLinks = Callable[
    [bytes, Sequence[object], dict[str, bytes], int, OtherLink | None, list[MemoEntry]],
    MemoLinks | None,
]

SharedPrefix = Callable[[bytes, bytes, int], int]
"""(a, b, start): how many leading bytes a and b share, given that they share `start`."""
MessageEnds = Callable[[bytes, int], tuple[int, tuple[int, ...]] | None]

PURE_ENV = "PHAROS_PURE_PYTHON"
"""As in policy/_load.py: 1 runs the Python source of everything compiled (the tests run both)."""

_SELF_CHECK: list[tuple[str, object]] = [
    ("system", "Be brief."),
    ("user", "Résumé — 请翻译 «this»\n\t"),
    ("assistant", ""),
    ("tool", "x" * 3000),
    ("developer", "ok"),
]


def _load_native() -> tuple[NativeLinks | None, str]:
    """The C build's chat_links (prefix/_chainc.c) and why it is or isn't used.

    Used only when it gives the Python loop's links on a sample, so a C build older than an
    edit to this file never routes on different hashes."""
    if os.environ.get(PURE_ENV) == "1":
        return None, f"{PURE_ENV}=1"
    try:
        native = cast(NativeLinks, importlib.import_module("pharos.prefix._chainc").chat_links)
    except ImportError as exc:
        return None, f"not built ({exc})"
    previous = _root(_KIND_CHAT, "self-check", None)
    if native(previous, _SELF_CHECK, _KNOWN_TEXT_PREFIXES, 7) != python_links(
        previous, _SELF_CHECK, 7
    ):
        return None, "the C build disagrees with chain.py (rebuild: make install)"
    return native, "compiled"


_native_links, NATIVE_REASON = _load_native()


class _SelfCheckMessage(msgspec.Struct):
    role: object = ""
    content: msgspec.Raw = msgspec.Raw(b"null")


_SELF_CHECK_RAW = [
    b'"Be brief."',
    b'"R\\u00e9sum\\u00e9 \\u2014 \\u8bf7 \\"q\\" \\\\ \\/ \\b\\f\\n\\r\\t \\ud83d\\ude00"',
    '"Résumé — 请翻译, raw UTF-8 and long enough for the 8-byte steps"'.encode(),
    b'[{"type": "text", "text": "part"}, {"type": "image_url"}]',
    b"null",
    b'"' + b"x" * 3000 + b'"',
]


def _self_check_sample() -> tuple[tuple[_SelfCheckMessage, ...], list[tuple[str, object]]]:
    """The import-time sample both native message checks chain: message Structs with raw
    contents, and the (role, decoded content) pairs python_links reads for the same messages."""
    roles: list[object] = ["system", "user", "assistant", "odd-role", 7, "tool"]
    messages = tuple(
        _SelfCheckMessage(role, msgspec.Raw(raw))
        for role, raw in zip(roles, _SELF_CHECK_RAW, strict=True)
    )
    pairs = [
        (role if isinstance(role, str) else "", _any_decoder.decode(raw))
        for role, raw in zip(roles, _SELF_CHECK_RAW, strict=True)
    ]
    return messages, pairs


def _load_native_messages() -> NativeMessageLinks | None:
    """message_links, used only when it gives python_links' links over msgspec's decode of a
    sample (escapes, raw UTF-8, parts, null, an odd role), like chat_links above."""
    if _native_links is None:
        return None
    module = importlib.import_module("pharos.prefix._chainc")
    native = cast(NativeMessageLinks | None, getattr(module, "message_links", None))
    if native is None:
        return None
    messages, pairs = _self_check_sample()
    previous = _root(_KIND_CHAT, "self-check", None)
    if native(previous, messages, _KNOWN_TEXT_PREFIXES, 7, _other_link) != python_links(
        previous, pairs, 7
    ):
        return None
    return native


def _load_native_memo(native: NativeMessageLinks | None) -> NativeMemoLinks | None:
    """message_links with a memo, used only when it gives python_links' links on the sample
    both from an empty memo and from one holding the sample with another last message."""
    if native is None:
        return None
    with_memo = cast(NativeMemoLinks, native)
    messages, pairs = _self_check_sample()
    previous = _root(_KIND_CHAT, "self-check", None)
    edited = (*messages[:-1], _SelfCheckMessage("tool", msgspec.Raw(b'"edited"')))
    entries: list[MemoEntry] = []
    reused = -1
    links: Links = ((), ())
    for chat in (edited, messages):
        try:
            found = with_memo(previous, chat, _KNOWN_TEXT_PREFIXES, 7, _other_link, entries)
        except TypeError:  # a C build older than the memo: no sixth argument
            return None
        if found is None:
            return None
        entries.insert(0, (previous, 7, chat, found[2], found[0], found[1]))
        links, reused = (found[0], found[1]), found[4]
    if links != python_links(previous, pairs, 7) or reused != len(messages) - 1:
        return None
    return with_memo


def _load_native_cut() -> tuple[SharedPrefix | None, MessageEnds | None]:
    """shared_prefix and message_ends, used only when they read a sample body right."""
    if _native_links is None:
        return None, None
    module = importlib.import_module("pharos.prefix._chainc")
    shared = cast(SharedPrefix | None, getattr(module, "shared_prefix", None))
    ends = cast(MessageEnds | None, getattr(module, "message_ends", None))
    if shared is None or ends is None:
        return None, None
    sample = b'{"model":"m", "messages" : [{"content":"a\\"}]"},{"role":"x"} ],"n":[1]}'
    try:
        starts_right = shared(sample, sample[:40] + b"!", 12) == 40
    except TypeError:  # a build from before `start`
        return None, None
    if (
        not starts_right
        or shared(sample, sample[:40] + b"!", 0) != 40
        or ends(sample, 0) != (28, (47, 60))
        or ends(sample, 47) != (48, (60,))
    ):
        return None, None
    return shared, ends


_shared_prefix, _message_ends = _load_native_cut()
_native_messages = _load_native_messages()
_native_memo_messages = _load_native_memo(_native_messages)
MESSAGE_LINKS = _native_messages is not None
"""chain_for_messages can chain a chat (the C build's message_links loaded and agreeing)."""
IMPLEMENTATION = "c" if _native_links is not None else "python"
"""Which computes a chat's links: the C build (~35 µs on a 194-message 32 KiB chat against the
Python loop's ~170-250 µs, one process, side by side) or the Python loop."""


def chain_for_prompt(model: str, prompt: str) -> Chain:
    """Chain of a raw prompt (/v1/completions, Ollama /api/generate): 1 KiB blocks of UTF-8."""
    data = _utf8(prompt)
    if not data:
        return EMPTY_CHAIN
    previous = _root(_KIND_PROMPT, model, None)
    hashes: list[int] = []
    cum_bytes: list[int] = []
    for start in range(0, len(data), PROMPT_BLOCK_BYTES):
        block = data[start : start + PROMPT_BLOCK_BYTES]
        previous = _link(previous, _EMPTY_ROLE, _TAG_TEXT, block)
        hashes.append(_to_int(previous))
        cum_bytes.append(start + len(block))
    return Chain(tuple(hashes), tuple(cum_bytes))
