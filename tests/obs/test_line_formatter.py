"""The log formatter that builds `%(asctime)s` once per second gives the text the stdlib's
gives, record by record, also when the second changes between records."""

from __future__ import annotations

import logging

import pytest

from pharos.cmd.serve import LOG_FORMAT
from pharos.obs.logfmt import LineFormatter


def a_record(created: float) -> logging.LogRecord:
    record = logging.LogRecord("pharos.access", logging.INFO, __file__, 1, "access x=1", None, None)
    record.created = created
    record.msecs = int((created - int(created)) * 1000) + 0.0
    return record


@pytest.mark.parametrize(
    "times",
    [
        # (record times in unix seconds, in the order formatted)
        (1_700_000_000.123, 1_700_000_000.999),  # one second twice: the cached text
        (1_700_000_000.999, 1_700_000_001.0),  # the next second: a new text
        (1_700_000_001.5, 1_700_000_000.5),  # a record from the second before (another thread)
        (0.0, 86_399.999, 86_400.0),  # across midnight UTC
    ],
)
def test_each_record_reads_as_the_stdlib_formatter_writes_it(times: tuple[float, ...]) -> None:
    cached, stdlib = LineFormatter(LOG_FORMAT), logging.Formatter(LOG_FORMAT)
    for created in times:
        assert cached.format(a_record(created)) == stdlib.format(a_record(created))


def test_a_date_format_asked_for_goes_to_the_stdlib() -> None:
    record = a_record(1_700_000_000.25)
    assert LineFormatter(LOG_FORMAT).formatTime(record, "%Y") == logging.Formatter(
        LOG_FORMAT
    ).formatTime(record, "%Y")
