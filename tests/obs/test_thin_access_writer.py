"""The access line written without a LogRecord: the same bytes `logging` would write, once
per loop turn, bounded, flushed at shutdown; anything but `pharos serve`'s plain handler
(caplog, a second handler, a filter) still gets records through `logging`."""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import re
import signal
from collections.abc import Iterator

import aiohttp
import pytest

from pharos.cmd.serve import LOG_FORMAT
from pharos.obs.access import AccessLog
from pharos.obs.logfmt import LineFormatter
from tests.cmd.serve_procs import CHAT_BODY, pharos_before_fake_vllm

WALL_S = 1764654321.5678  # 2025-12-02, a fractional second: msecs are printed
LINE = "access method=POST path=/v1/chat/completions route=chat status=200 id=abc"


@contextlib.contextmanager
def plain_root() -> Iterator[io.StringIO]:
    """The root logger as `pharos serve` sets it up: one StreamHandler, a LineFormatter. Used
    inside a test's body: pytest adds its capture handlers to the root logger when the test's
    call starts, after fixtures ran."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(LineFormatter(LOG_FORMAT))
    root.handlers = [handler]
    root.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        root.handlers, root.level = saved


def as_logging_writes_it(message: str, created_s: float) -> str:
    record = logging.makeLogRecord(
        {
            "name": "pharos.access",
            "levelname": "INFO",
            "levelno": logging.INFO,
            "msg": message,
            "created": created_s,
            "msecs": int((created_s - int(created_s)) * 1000) + 0.0,
        }
    )
    return LineFormatter(LOG_FORMAT).format(record) + "\n"


async def test_a_line_is_written_once_the_loop_turn_ends_as_logging_would_write_it() -> None:
    with plain_root() as stream:
        access = AccessLog(wall_s=lambda: WALL_S)
        access.write(LINE)
        access.write(LINE + "2")
        assert stream.getvalue() == ""  # held until the turn ends
        await asyncio.sleep(0)
    expected = as_logging_writes_it(LINE, WALL_S) + as_logging_writes_it(LINE + "2", WALL_S)
    assert stream.getvalue() == expected
    assert re.search(r",567 level=INFO logger=pharos.access access method=POST", expected)


async def test_held_lines_are_bounded_and_flushed_on_shutdown() -> None:
    with plain_root() as stream:
        access = AccessLog(wall_s=lambda: WALL_S, max_held_lines=3)
        for n in range(3):
            access.write(f"{LINE}{n}")
        assert stream.getvalue().count("\n") == 3  # the third filled the bound: written now
        access.write("last")
        access.flush()  # as Pharos.stop does
        assert stream.getvalue().splitlines()[-1].endswith("logger=pharos.access last")
        await asyncio.sleep(0)  # the turn's scheduled flush then finds nothing
    assert stream.getvalue().count("\n") == 4


async def test_a_second_handler_gets_a_record_through_logging(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="pharos.access")
    with plain_root() as stream:
        logging.getLogger().addHandler(caplog.handler)  # two handlers now: caplog's too
        AccessLog(wall_s=lambda: WALL_S).write("first")
    assert [r.getMessage() for r in caplog.records if r.name == "pharos.access"] == ["first"]
    assert stream.getvalue().endswith("logger=pharos.access first\n")  # written by logging


async def test_a_filter_or_another_format_takes_the_logging_path() -> None:
    seen: list[str] = []

    def keep(record: logging.LogRecord) -> bool:
        seen.append(record.getMessage())
        return True

    with plain_root() as stream:
        handler = logging.getLogger().handlers[0]
        handler.addFilter(keep)
        access = AccessLog(wall_s=lambda: WALL_S)
        access.write("filtered")
        assert seen == ["filtered"]  # the filter saw a real record
        handler.removeFilter(keep)
        handler.setFormatter(LineFormatter("%(asctime)s %(levelno)d %(message)s"))
        access.write("with a level number")
    assert stream.getvalue().endswith(" 20 with a level number\n")


async def test_lines_held_for_one_handler_go_there_before_a_new_setup_takes_over() -> None:
    with plain_root() as stream:
        access = AccessLog(wall_s=lambda: WALL_S)
        access.write("held")
        other = io.StringIO()
        replacement = logging.StreamHandler(other)
        replacement.setFormatter(LineFormatter(LOG_FORMAT))
        logging.getLogger().handlers = [replacement]
        access.write("after")
        assert stream.getvalue().endswith("logger=pharos.access held\n")
        await asyncio.sleep(0)
    assert other.getvalue().endswith("logger=pharos.access after\n")
    assert "after" not in stream.getvalue()


async def test_a_real_serve_under_concurrency_writes_one_whole_line_per_request() -> None:
    requests = 96
    async with pharos_before_fake_vllm() as (process, base, _engine):
        async with aiohttp.ClientSession() as client:

            async def one() -> str:
                async with client.post(f"{base}/v1/chat/completions", json=CHAT_BODY) as reply:
                    assert reply.status == 200
                    await reply.read()
                    return reply.headers["X-Request-Id"]

            ids = await asyncio.gather(*(one() for _ in range(requests)))
        process.signal(signal.SIGTERM)
        assert await process.wait() == 0
    access = [line for line in process.lines if "logger=pharos.access" in line]
    assert len(access) == requests, process.output
    pattern = re.compile(
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} level=INFO logger=pharos.access access "
        r"method=POST path=/v1/chat/completions route=chat key=anonymous "
        r'model=qwen2.5-0.5b target="\S+ qwen2.5-0.5b" '
        r"status=200 ttft=[\d.]+ duration=[\d.]+ id=([0-9a-f]{32})"
    )
    logged = []
    for line in access:
        found = pattern.fullmatch(line)
        assert found is not None, line
        logged.append(found.group(1))
    assert sorted(logged) == sorted(ids) and len(set(ids)) == requests


class BrokenStream(io.StringIO):
    """stderr gone (a closed pipe): every write fails."""

    def write(self, _text: str) -> int:
        raise BrokenPipeError("stderr is gone")


async def test_a_broken_stream_loses_its_lines_and_never_raises_into_the_request(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with plain_root() as stream:
        handler = logging.getLogger().handlers[0]
        assert isinstance(handler, logging.StreamHandler)
        handler.setStream(BrokenStream())
        access = AccessLog(wall_s=lambda: WALL_S, max_held_lines=2)
        for n in range(5):
            access.write(f"lost {n}")  # the second fills the bound: a flush inside write()
        await asyncio.sleep(0)  # and the turn's flush
        handler.setStream(stream)  # stderr back: lines flow again
        access.write("back")
        await asyncio.sleep(0)
    assert stream.getvalue().endswith("logger=pharos.access back\n")
    assert "lost" not in stream.getvalue()
    report = capsys.readouterr().err  # logging's error report, as StreamHandler.emit's
    assert not any(f"lost {n}" in report for n in range(5))  # names no line's text
