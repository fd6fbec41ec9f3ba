"""obs/logfmt.field quotes a value exactly as json.dumps(ensure_ascii=False) did."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from pharos.obs.logfmt import field

_AWKWARD = st.text(
    alphabet=st.sampled_from(
        ['"', "\\", " ", "=", "\n", "\x00", "\x7f", "é", "请", "😀", "\ud800", "a"]
    )
)


def _before(value: object) -> str:
    text = str(value)
    quoted = text == "" or any(c in text for c in ' "=\\') or not text.isprintable()
    return json.dumps(text, ensure_ascii=False) if quoted else text


@given(st.one_of(_AWKWARD, st.text()))
def test_a_field_is_quoted_byte_for_byte_as_json_dumps_quoted_it(text: str) -> None:
    assert field(text) == _before(text)


def test_quotes_control_characters_and_non_ascii_come_out_as_json_escapes_them() -> None:
    assert field('say "hi"\n\t\x01 é 请 \ud800') == '"say \\"hi\\"\\n\\t\\u0001 é 请 \ud800"'
    assert field("") == '""'
    assert field("plain-model:7b") == "plain-model:7b"
