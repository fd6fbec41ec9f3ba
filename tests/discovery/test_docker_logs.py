"""The docker:// log feed: demultiplexing, `since`, TTY text, and the stream's end (§4)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pharos.discovery.docker_api import DockerApi, DockerError
from pharos.discovery.docker_logs import (
    Demuxer,
    container_of_feed,
    open_docker_feed,
    started_at_since,
)
from pharos.discovery.feeds import open_log_feed
from tests.discovery.docker_rig import CAPTURES, FakeDaemon, fake_daemon, frame

OLLAMA_LOG = CAPTURES / "engines/ollama/v0.34.4/engine.log"


def num_parallel_line() -> bytes:
    """Ollama 0.34.4's server config line, from its recorded engine.log."""
    lines = [
        line for line in OLLAMA_LOG.read_bytes().splitlines() if b"OLLAMA_NUM_PARALLEL" in line
    ]
    assert lines, f"no OLLAMA_NUM_PARALLEL line in {OLLAMA_LOG}"
    return lines[0]


def test_frames_become_lines_per_stream() -> None:
    stream = (
        frame(1, b"out one\nout ")
        + frame(2, b"err one\n")
        + frame(1, b"two\n")
        + frame(2, b"err two\r\n")
    )
    assert Demuxer().feed(stream) == [b"out one", b"err one", b"out two", b"err two"]


@given(st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=30))
def test_frames_cut_anywhere_give_the_same_lines(cuts: list[int]) -> None:
    """A socket read returns whatever arrived: headers and payloads split at any byte."""
    stream = frame(1, num_parallel_line() + b"\n") + frame(2, b"") + frame(2, b"a\nb\n")
    demuxer = Demuxer()
    lines: list[bytes] = []
    at = 0
    for cut in cuts:
        lines.extend(demuxer.feed(stream[at : at + cut]))
        at += cut
    lines.extend(demuxer.feed(stream[at:]))
    assert lines == [num_parallel_line(), b"a", b"b"]


def test_raw_text_is_not_a_frame_header() -> None:
    with pytest.raises(DockerError, match="not a multiplexed frame header"):
        Demuxer().feed(b"time=2026-09-29 level=INFO msg=hello\n")


def test_an_over_long_line_is_dropped_and_the_next_one_kept() -> None:
    demuxer = Demuxer(max_line_bytes=16)
    lines = demuxer.feed(frame(1, b"x" * 40) + frame(1, b"x" * 40 + b"\nshort\n"))
    assert lines == [b"short"]


@pytest.mark.parametrize(
    ("started_at", "since"),
    [
        # State.StartedAt (RFC 3339, nanoseconds)  -> since (Unix s, nanoseconds kept)
        ("2026-09-29T10:15:40.354377298Z", "1790676940.354377298"),
        ("2026-09-29T10:15:40Z", "1790676940.000000000"),
        ("2026-09-29T10:15:40.5+02:00", "1790669740.500000000"),
    ],
)
def test_since_is_the_start_to_the_nanosecond(started_at: str, since: str) -> None:
    assert started_at_since(started_at) == since


def test_a_bad_start_time_is_an_error() -> None:
    with pytest.raises(DockerError, match="StartedAt"):
        started_at_since("yesterday")


@pytest.mark.parametrize("url", ["docker://", "docker:///", "docker://a/b", "file:///x"])
def test_a_feed_url_must_name_one_container(url: str) -> None:
    with pytest.raises(ValueError):
        container_of_feed(url)


def running(container_id: str, *, tty: bool = False) -> dict[str, object]:
    return {
        "Id": container_id,
        "State": {"Running": True, "StartedAt": "2026-09-29T10:15:40.354377298Z"},
        "Config": {"Tty": tty},
    }


async def test_the_feed_reads_the_log_since_the_start_and_ends_with_the_container(
    tmp_path: Path,
) -> None:
    socket = tmp_path / "docker.sock"
    daemon = FakeDaemon()
    daemon.inspected["ollama-1"] = running("abc123")
    daemon.logs["abc123"] = frame(2, num_parallel_line() + b"\n") + frame(1, b"GIN ok\n")
    async with fake_daemon(socket, daemon):
        api = DockerApi(str(socket))
        feed = await open_docker_feed("docker://ollama-1", api)
        lines = [line async for line in feed]
        await api.close()
    assert lines == [num_parallel_line(), b"GIN ok"]
    logs_query = daemon.queries[daemon.requests.index("/v1.41/containers/abc123/logs")]
    assert logs_query == {
        "follow": "1",
        "stdout": "1",
        "stderr": "1",
        "since": "1790676940.354377298",
    }


async def test_a_tty_container_logs_raw_text_with_crlf(tmp_path: Path) -> None:
    socket = tmp_path / "docker.sock"
    daemon = FakeDaemon()
    daemon.inspected["tty"] = running("tty", tty=True)
    daemon.logs["tty"] = num_parallel_line() + b"\r\nsecond\r\n"
    async with fake_daemon(socket, daemon):
        api = DockerApi(str(socket))
        lines = [line async for line in await open_docker_feed("docker://tty", api)]
        await api.close()
    assert lines == [num_parallel_line(), b"second"]


async def test_a_stopped_container_has_no_feed_rather_than_its_old_log(tmp_path: Path) -> None:
    """Its old run's lines would bring back values of an engine that is gone."""
    socket = tmp_path / "docker.sock"
    daemon = FakeDaemon()
    daemon.inspected["gone"] = {"Id": "gone", "State": {"Running": False}}
    daemon.logs["gone"] = frame(1, num_parallel_line() + b"\n")
    async with fake_daemon(socket, daemon):
        api = DockerApi(str(socket))
        with pytest.raises(DockerError, match="not running"):
            await open_docker_feed("docker://gone", api)
        await api.close()
    assert not any(path.endswith("/logs") for path in daemon.requests)


async def test_a_quiet_stream_stays_open_while_the_same_run_goes_on(tmp_path: Path) -> None:
    socket = tmp_path / "docker.sock"
    daemon = FakeDaemon()
    daemon.inspected["quiet"] = running("quiet")
    daemon.logs["quiet"] = frame(1, b"first\n")
    daemon.logs_end = False
    async with fake_daemon(socket, daemon):
        api = DockerApi(str(socket))
        await api.connect()
        from pharos.discovery.docker_logs import DockerLogFeed

        feed = await DockerLogFeed.open(api, "quiet", idle_check_s=0.05)
        assert await anext(feed) == b"first"
        checks_before = daemon.requests.count("/v1.41/containers/quiet/json")
        daemon.inspected["quiet"] = {"Id": "quiet", "State": {"Running": False}}
        with pytest.raises(StopAsyncIteration):
            await anext(feed)
        assert daemon.requests.count("/v1.41/containers/quiet/json") == checks_before + 1
        await api.close()


async def test_open_log_feed_opens_docker_urls(tmp_path: Path) -> None:
    socket = tmp_path / "docker.sock"
    daemon = FakeDaemon()
    daemon.inspected["c"] = running("c")
    daemon.logs["c"] = frame(1, b"one\n")
    async with fake_daemon(socket, daemon):
        api = DockerApi(str(socket))
        feed = await open_log_feed("docker://c", api)
        assert [line async for line in feed] == [b"one"]
        await api.close()


async def test_a_missing_socket_is_an_os_error_the_follower_retries(tmp_path: Path) -> None:
    api = DockerApi(str(tmp_path / "nothing.sock"))
    with pytest.raises(OSError):
        await open_docker_feed("docker://c", api)
    await api.close()
