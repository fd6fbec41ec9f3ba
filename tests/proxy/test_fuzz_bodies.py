"""Property: whatever body a client sends to whichever route, the parse and the rewrites
either succeed or raise a 400 ClientError; nothing else escapes (issue 11, "Input").

Bounded for CI: 300 examples, no deadline per example (a loaded runner is slow).
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pharos.proxy.app import ROUTES
from pharos.proxy.errors import ClientError
from pharos.proxy.parse import ask_for_usage, parse_request, rename_model

PARSE_SHAPES = sorted({(route.parse_as, route.ollama_native) for route in ROUTES.values()})

_text = st.text(alphabet=st.characters(codec=None), max_size=20)  # lone surrogates included
_json_value: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=20,
)
_field_names = st.sampled_from(
    [
        "model",
        "messages",
        "prompt",
        "input",
        "system",
        "instructions",
        "tools",
        "stream",
        "stream_options",
        "role",
        "content",
    ]
)
_message = st.dictionaries(st.sampled_from(["role", "content"]), _json_value, max_size=2)
_body_object = st.fixed_dictionaries(
    {},
    optional={
        "model": st.one_of(_text, _json_value),
        "messages": st.one_of(st.lists(_message, max_size=4), _json_value),
        "prompt": _json_value,
        "input": _json_value,
        "system": _json_value,
        "stream": _json_value,
        "stream_options": _json_value,
        "tools": _json_value,
    },
).flatmap(
    lambda base: st.dictionaries(_field_names, _json_value, max_size=2).map(
        lambda extra: {**extra, **base}
    )
)


def _encoded(value: object) -> bytes:
    # ensure_ascii keeps lone surrogates as \\udXXX escapes, as a client's JSON library would
    return json.dumps(value, ensure_ascii=True).encode()


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return _encoded(draw(_body_object))
    if kind == 1:
        data = bytearray(_encoded(draw(_body_object)))
        for _ in range(draw(st.integers(1, 4))):  # corrupt a few bytes
            if data:
                data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        return bytes(data)
    if kind == 2:
        depth = draw(st.integers(1, 3000))
        opener = draw(st.sampled_from([b"[", b'{"a":']))
        closer = b"]" if opener == b"[" else b"}"
        inner = opener * depth + b"1" + closer * depth
        return b'{"model":"m","messages":[{"role":"user","content":' + inner + b"}]}"
    return draw(st.binary(max_size=200))


def _routes_and_rewrites(body: bytes, parse_as: str, ollama: bool) -> None:
    parsed = parse_request(body, route=parse_as, stream_default=ollama)
    ask_for_usage(body, has_stream_options=parsed.has_stream_options)
    rename_model(body, "served-name")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=bodies(), shape=st.sampled_from(PARSE_SHAPES))
def test_any_body_on_any_route_parses_or_is_a_400(body: bytes, shape: tuple[str, bool]) -> None:
    parse_as, ollama = shape
    try:
        _routes_and_rewrites(body, parse_as, ollama)
    except ClientError as err:
        assert err.status == 400, err
