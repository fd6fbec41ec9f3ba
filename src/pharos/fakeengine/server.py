"""Serving a fake on 127.0.0.1, on a free port."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from aiohttp import web

from pharos.fakeengine.engine import FakeEngine


@contextlib.asynccontextmanager
async def serve(fake: FakeEngine, *, port: int = 0) -> AsyncIterator[str]:
    """Yields the fake's base URL (http://127.0.0.1:PORT); `fake.kill()` may end it early."""
    runner = web.AppRunner(fake.app(), handle_signals=False, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    fake._site = site
    bound_port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{bound_port}"
    finally:
        fake._site = None
        await runner.cleanup()
