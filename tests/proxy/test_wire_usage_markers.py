"""The stream tap's byte check spells out engine/usage.py's marker names for speed: it must
still say yes to a line holding any one of them, and no to a line holding none."""

from __future__ import annotations

import pytest

from pharos.engine.usage import USAGE_MARKERS, may_carry_usage
from pharos.proxy.stream_scan import first_of, python_first_of


@pytest.mark.parametrize("marker", USAGE_MARKERS)
def test_a_line_with_any_one_marker_may_carry_usage(marker: bytes) -> None:
    line = b'data: {"a":1,"' + marker + b'":2}\n'
    assert may_carry_usage(line)
    assert (
        first_of(line, USAGE_MARKERS) == python_first_of(line, USAGE_MARKERS) == line.index(marker)
    )


def test_a_line_with_none_of_them_carries_none() -> None:
    line = b'data: {"choices":[{"delta":{"content":"use age, time, evaluation"}}]}\n'
    assert not may_carry_usage(line)
    assert first_of(line, USAGE_MARKERS) == python_first_of(line, USAGE_MARKERS) == -1
