"""The warning for an engine's refusal carries status and the error's type/code only: an
engine that quotes the input would put prompt text in the log (issue 11, "Security")."""

from __future__ import annotations

import json

import pytest

from pharos.proxy.upstream import refusal_message

SECRET = "my secret prompt text"

# body the engine refused with,                                          expected summary
CASES = [
    (
        {"error": {"message": f"bad input: {SECRET}", "type": "BadRequest", "code": 400}},
        "type=BadRequest code=400",
    ),
    ({"error": f"failed on {SECRET}"}, "type=- code=-"),
    ({"detail": SECRET}, "type=- code=-"),
    ({"error": {"type": 'a "quoted"\ntype ' + "x" * 100, "code": None}}, None),
]


@pytest.mark.parametrize(("body", "expected"), CASES)
def test_a_refusal_is_summarized_without_free_text(body: object, expected: str | None) -> None:
    line = refusal_message(json.dumps(body).encode())
    assert SECRET not in line
    assert "\n" not in line and len(line) < 120
    if expected is not None:
        assert line == expected


def test_a_refusal_that_is_not_json_is_summarized_by_its_size() -> None:
    line = refusal_message(f"<html>{SECRET}</html>".encode())
    assert SECRET not in line
    assert line == f"not JSON, {len(SECRET) + 13} bytes"
