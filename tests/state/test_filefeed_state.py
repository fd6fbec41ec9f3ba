"""State following a real file feed (temp file): values while open, unknown once truncated."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pharos.discovery import open_file_feed
from pharos.engine.types import Residency
from tests.state.fakes import LOG_PROBE, URL, make_state, snap, spec


async def test_file_feed_values_and_restart(tmp_path: Path) -> None:
    log = tmp_path / "ollama.log"
    log.write_bytes(b"noise\nparallel=4\n")
    seen: list[int | None] = []
    holder: dict[str, Any] = {}

    async def sleep(_delay_s: float) -> None:
        state = holder["state"]
        (view,) = state.targets_for_model("m", 0.0)
        seen.append(view.capacity)
        if len(seen) == 1:
            with log.open("ab") as handle:
                handle.write(b"parallel=6\n")
        else:
            log.write_bytes(b"parallel=8\n")  # the engine restarted and rewrote its log
        await asyncio.sleep(0)

    async def opener(url: str) -> Any:
        return await open_file_feed(url, sleep=sleep)

    h = make_state(open_log_feed=opener)
    holder["state"] = h.state
    h.engine.snapshots[URL] = snap(models={"m": Residency.LOADED})
    h.engine.log_probes[URL] = (LOG_PROBE,)
    h.state.set_backends([spec(log_feed=log.as_uri())])
    await h.state.run_round(URL)

    assert await h.state.run_log_session(URL) is True
    assert seen == [4, 6]
    (view,) = h.state.targets_for_model("m", h.clock.now())
    assert view.capacity is None  # the feed ended: log values are unknown, never 0
    assert [d[2] for d in h.decisions if d[1] == "log_feed"] == ["connected", "ended"]

    seen.clear()
    log.write_bytes(b"parallel=8\n")
    assert await h.state.run_log_session(URL) is True
    assert seen[0] == 8
