"""The file log feed: read from the start, follow appends, end on truncate or replace."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from pharos.discovery import FileFeed, file_feed_path, open_file_feed, open_log_feed


async def _feed(path: Path) -> FileFeed:
    return await FileFeed.open(str(path))


async def test_reads_from_start_and_follows_appends(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_bytes(b"startup OLLAMA_NUM_PARALLEL:4\r\nsecond\npart")
    feed = await _feed(log)
    assert await feed.poll() == [b"startup OLLAMA_NUM_PARALLEL:4", b"second"]
    assert await feed.poll() == []
    with log.open("ab") as handle:
        handle.write(b"ial line\nthird\n")
    assert await feed.poll() == [b"partial line", b"third"]
    await feed.aclose()
    assert await feed.poll() is None


async def test_truncation_ends_the_feed(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_bytes(b"one\ntwo\n")
    feed = await _feed(log)
    assert await feed.poll() == [b"one", b"two"]
    log.write_bytes(b"")
    assert await feed.poll() is None
    assert await feed.poll() is None
    await feed.aclose()


async def test_replaced_file_ends_the_feed(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_bytes(b"old\n")
    feed = await _feed(log)
    assert await feed.poll() == [b"old"]
    fresh = tmp_path / "engine.log.new"
    fresh.write_bytes(b"new process started and wrote a longer first line\n")
    os.replace(fresh, log)
    assert await feed.poll() is None
    await feed.aclose()
    again = await _feed(log)  # the follower reopens: the new file from its start
    assert await again.poll() == [b"new process started and wrote a longer first line"]
    await again.aclose()


async def test_deleted_file_ends_the_feed(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_bytes(b"x\n")
    feed = await _feed(log)
    log.unlink()
    assert await feed.poll() is None
    await feed.aclose()


async def test_overlong_line_is_dropped(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_bytes(b"a\n" + b"x" * 70_000)
    feed = await _feed(log)
    assert await feed.poll() == [b"a"]
    with log.open("ab") as handle:
        handle.write(b"yyy\nb\n")
    assert await feed.poll() == [b"b"]
    await feed.aclose()


async def test_iteration_polls_once_a_second_then_ends(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_bytes(b"first\n")
    sleeps: list[float] = []

    async def sleep(delay_s: float) -> None:
        sleeps.append(delay_s)
        if len(sleeps) == 1:
            with log.open("ab") as handle:
                handle.write(b"second\n")
        else:
            log.write_bytes(b"")  # a restart truncates it
        await asyncio.sleep(0)

    feed = await open_file_feed(log.as_uri(), sleep=sleep)
    lines = [line async for line in feed]
    assert lines == [b"first", b"second"]
    assert sleeps == [1.0, 1.0]
    await feed.aclose()


async def test_open_missing_file_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        await open_log_feed((tmp_path / "missing.log").as_uri())


async def test_unsupported_scheme_raises() -> None:
    with pytest.raises(ValueError, match="unsupported scheme"):
        await open_log_feed("syslog://ollama")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("file://host/var/log/x", "local path"),
        ("file:relative.log", "absolute"),
        ("http://x/y", "not a file:// URL"),
    ],
)
def test_bad_file_urls(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        file_feed_path(url)


def test_file_url_path() -> None:
    assert file_feed_path("file:///var/log/my%20engine.log") == "/var/log/my engine.log"
