"""The composition root: readiness gates, the drain flag, and the two connection pools."""

from __future__ import annotations

import aiohttp
from aiohttp import web

from pharos.cmd.runtime import Pharos, RuntimeOptions
from pharos.config import Config
from pharos.fakeengine import FakeVLLM, no_sleep, serve
from pharos.state import BackendSpec, StateOptions

ONE_ROUND = StateOptions(fast_interval_s=60.0, full_interval_s=60.0, jitter_fraction=0.0)


async def _healthz(client: aiohttp.ClientSession, base: str) -> int:
    async with client.get(base + "/healthz") as response:
        return response.status


async def test_healthz_waits_for_the_first_round_and_the_restore_then_fails_in_the_drain() -> None:
    async with serve(FakeVLLM(sleep=no_sleep)) as url:
        pharos = Pharos(
            Config(), backends=[BackendSpec(url)], options=RuntimeOptions(state=ONE_ROUND)
        )
        runner = web.AppRunner(pharos.app, handle_signals=False, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        base = f"http://127.0.0.1:{runner.addresses[0][1]}"
        try:
            async with aiohttp.ClientSession() as client:
                assert await _healthz(client, base) == 503  # not started: no round yet
                await pharos.start(restored=False)
                assert await pharos.wait_ready(10.0)
                assert await _healthz(client, base) == 503  # scraped, not yet restored
                pharos.restored.set()
                assert await _healthz(client, base) == 200
                pharos.flags.drain()
                assert await _healthz(client, base) == 503
        finally:
            await runner.cleanup()
            await pharos.stop()


async def test_scrapes_and_proxied_requests_use_separate_pools() -> None:
    pharos = Pharos(Config(), backends=[])
    try:
        assert pharos.scrape_session is not pharos.session
        assert pharos.session.connector is not None and pharos.session.connector.limit == 0
        assert pharos.session.connector.limit_per_host == 0  # the scheduler bounds each target
    finally:
        await pharos.stop()
