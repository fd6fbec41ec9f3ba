"""The log follower: values fill what no scrape knows, go unknown when the feed drops."""

from __future__ import annotations

import asyncio
from typing import Any

from pharos.engine.types import Load, Residency
from tests.state.fakes import LOG_PROBE, URL, LineFeed, make_state, snap, spec

FEED = "file:///var/log/engine.log"


async def _settle(feed: LineFeed) -> None:
    """Let the follower task take every queued line (event-loop turns, no wall time)."""
    for _ in range(20):
        if feed.queue.empty():
            break
        await asyncio.sleep(0)
    await asyncio.sleep(0)


async def _setup(loads: dict[str, Load] | None = None):
    feeds: list[LineFeed] = []

    async def opener(url: str) -> LineFeed:
        assert url == FEED
        feed = LineFeed()
        feeds.append(feed)
        return feed

    h = make_state(open_log_feed=opener)
    h.engine.snapshots[URL] = snap(models={"m": Residency.LOADED}, loads=loads or {})
    h.engine.log_probes[URL] = (LOG_PROBE,)
    h.state.set_backends([spec(log_feed=FEED)])
    await h.state.run_round(URL)
    return h, feeds


async def test_log_values_fill_unknown_signals_and_drop_with_the_feed() -> None:
    h, feeds = await _setup(loads={"m": Load(running=2)})
    session = asyncio.create_task(h.state.run_log_session(URL))
    await asyncio.sleep(0)
    (feed,) = feeds
    for line in (b"noise", b"parallel=4", b"running=7", b"bad"):
        feed.queue.put_nowait(line)
    await _settle(feed)
    (view,) = h.state.targets_for_model("m", h.clock.now())
    assert view.capacity == 4  # no scrape knows capacity: the log value counts
    assert view.running == 2  # the scrape knows running: the log value does not replace it
    (status,) = h.state.backends()
    assert status.log_feed_up is True
    assert (URL, "log_feed", "connected") in h.decisions

    h.clock.advance(100.0)  # log values do not go stale with the scrape interval
    (view,) = h.state.targets_for_model("m", h.clock.now())
    assert view.capacity == 4
    assert view.running == 7  # the scrape is stale now; the log fills in

    feed.queue.put_nowait(None)  # the stream drops
    assert await session is True
    (view,) = h.state.targets_for_model("m", h.clock.now())
    assert view.capacity is None
    assert view.running is None
    assert feed.closed
    assert h.decisions[-1] == (URL, "log_feed", "ended")
    (status,) = h.state.backends()
    assert status.log_feed_up is False


async def test_log_line_turning_model_cold_bumps_generation() -> None:
    h, feeds = await _setup()
    session = asyncio.create_task(h.state.run_log_session(URL))
    await asyncio.sleep(0)
    (feed,) = feeds
    feed.queue.put_nowait(b"unloaded m")
    feed.queue.put_nowait(b"unloaded m")
    await _settle(feed)
    target_id = h.state.target_id_of(f"{URL} m")
    assert h.state.generation_of(target_id) == 1
    (view,) = h.state.targets_for_model("m", h.clock.now())
    assert view.residency is Residency.LOADED  # scraped residency wins until the next full round
    feed.queue.put_nowait(None)
    await session


async def test_open_failure_is_reported() -> None:
    async def opener(url: str) -> Any:
        raise FileNotFoundError(url)

    h = make_state(open_log_feed=opener)
    h.engine.snapshots[URL] = snap(models={"m": Residency.LOADED})
    h.engine.log_probes[URL] = (LOG_PROBE,)
    h.state.set_backends([spec(log_feed=FEED)])
    await h.state.run_round(URL)
    assert await h.state.run_log_session(URL) is False
    assert h.decisions[-1] == (URL, "log_feed", "open_failed")


async def test_no_feed_means_no_log_probes_in_the_plan() -> None:
    h = make_state()  # no opener: the feed cannot be read
    h.engine.snapshots[URL] = snap(models={"m": Residency.LOADED})
    h.engine.log_probes[URL] = (LOG_PROBE,)
    h.state.set_backends([spec(log_feed=FEED)])
    await h.state.run_round(URL)
    (status,) = h.state.backends()
    assert status.active_probes == ()
    assert await h.state.run_log_session(URL) is False


async def test_follower_reconnects_with_doubling_backoff() -> None:
    opened: list[str] = []
    backoffs: list[float] = []
    done = asyncio.Event()

    async def opener(url: str) -> Any:
        opened.append(url)
        if len(backoffs) < 7:
            raise ConnectionError("no feed")
        feed = LineFeed()
        feed.queue.put_nowait(b"parallel=2")
        feed.queue.put_nowait(None)
        return feed

    async def sleep(delay_s: float) -> None:
        task = asyncio.current_task()
        if task is not None and task.get_name().startswith("pharos-logs"):
            backoffs.append(delay_s)
            if len(backoffs) >= 8:
                done.set()
                await asyncio.Event().wait()
        else:
            await asyncio.Event().wait()  # park the scrape loop
        await asyncio.sleep(0)

    h = make_state(open_log_feed=opener, sleep=sleep)
    h.engine.snapshots[URL] = snap(models={"m": Residency.LOADED})
    h.engine.log_probes[URL] = (LOG_PROBE,)
    h.state.set_backends([spec(log_feed=FEED)])
    await h.state.start()
    for _ in range(200):
        await asyncio.sleep(0)
        if done.is_set():
            break
    await h.state.stop()
    assert backoffs == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 1.0]
    assert len(opened) == 8
    assert (URL, "log_feed", "connected") in h.decisions
