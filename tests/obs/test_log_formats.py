"""The exact text of the access line and its logfmt values, pinned so a faster build of them
can't change a byte, and the request-id format a client sees."""

from __future__ import annotations

import re

import pytest
from aiohttp.test_utils import make_mocked_request

from pharos.obs.access import access_line
from pharos.obs.logfmt import field, seconds
from pharos.proxy.done import RequestDone
from pharos.proxy.request_id import request_id_of


def a_done(**changes: object) -> RequestDone:
    values: dict[str, object] = {
        "route": "chat",
        "request_id": "req-7",
        "key": "alice",
        "model": "qwen2.5-0.5b",
        "status": 200,
        "decisions": (("admission", "ok"),),
        "target_key": "http://127.0.0.1:8001 qwen2.5-0.5b",
        "backend_url": "http://127.0.0.1:8001",
        "decision": None,
        "queued_by": None,
        "overhead_s": 0.0004,
        "queue_wait_s": 0.0,
        "ttft_s": 0.00312345,
        "duration_s": 0.5,
        "prompt_tokens": 10,
        "cached_tokens": 0,
        "completion_tokens": 3,
        "metered": True,
        "prefix_source": None,
        "finished_wall_s": 1.0,
    }
    values.update(changes)
    return RequestDone(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        # (value,               its logfmt text)
        ("qwen2.5-0.5b", "qwen2.5-0.5b"),  # plain: as is
        (200, "200"),  # not a string: str() of it
        ("", '""'),  # empty: quoted, so the field is still there
        ("two words", '"two words"'),  # a space
        ('say "hi"', '"say \\"hi\\""'),  # a quote
        ("a=b", '"a=b"'),  # an equals sign
        ("back\\slash", '"back\\\\slash"'),  # a backslash
        ("line\nbreak", '"line\\nbreak"'),  # a control character: one line stays one line
        ("tab\there", '"tab\\there"'),
        ("\x7f", '"\x7f"'),  # DEL is not printable; json leaves it as is
        ("résumé", "résumé"),  # printable non-ASCII: as is
        ("日本 語", '"日本 語"'),  # non-ASCII kept unescaped when quoted
        ("\u2028", '"\u2028"'),  # a line separator: not printable, quoted
    ],
)
def test_a_logfmt_value_is_quoted_exactly_when_it_holds_a_space_quote_equals_or_control(
    value: object, text: str
) -> None:
    assert field(value) == text


def test_seconds_are_four_decimals_and_unknown_is_a_dash() -> None:
    assert (seconds(None), seconds(0.0), seconds(1.23456)) == ("-", "0.0000", "1.2346")


def test_the_access_line_of_a_served_request_is_byte_for_byte_what_it_was() -> None:
    line = access_line("POST", "/v1/chat/completions", 200, 0.5, "req-7", a_done())
    assert line == (
        "access method=POST path=/v1/chat/completions route=chat key=alice model=qwen2.5-0.5b "
        'target="http://127.0.0.1:8001 qwen2.5-0.5b" status=200 ttft=0.0031 duration=0.5000 '
        "id=req-7"
    )


def test_the_access_line_without_a_done_has_dashes_and_client_text_is_cut_and_quoted() -> None:
    # (what differs,                            the line)
    assert access_line("GET", "/v1/models", 401, 0.25, "abc", None) == (
        "access method=GET path=/v1/models route=- key=- model=- target=- status=401 "
        "ttft=- duration=0.2500 id=abc"
    )
    no_model = a_done(model=None, target_key=None, ttft_s=None)
    assert access_line("POST", "/api/chat", 499, 1.0, "i", no_model) == (
        "access method=POST path=/api/chat route=chat key=alice model=- target=- status=499 "
        "ttft=- duration=1.0000 id=i"
    )
    long = access_line("POST", "/v1/" + "p" * 300, 404, 0.0, "i", a_done(model='m "x"' * 100))
    path = long.split(" path=", 1)[1].split(" ", 1)[0]
    assert path == "/v1/" + "p" * 196  # 200 characters of the client's path
    model = long.split(" model=", 1)[1].split(" target=", 1)[0]
    assert model.startswith('"m \\"x\\"') and len(model) < 300  # 200 characters, quoted


def test_a_made_request_id_is_32_lowercase_hex_and_new_each_time() -> None:
    made = {request_id_of(make_mocked_request("GET", "/")) for _ in range(200)}
    assert len(made) == 200
    assert all(re.fullmatch(r"[0-9a-f]{32}", made_id) for made_id in made)
    kept = make_mocked_request("GET", "/", headers={"X-Request-Id": "trace-1"})
    assert request_id_of(kept) == request_id_of(kept) == "trace-1"
