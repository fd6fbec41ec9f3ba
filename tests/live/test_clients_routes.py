"""Layer 4 for the coding-agent routes: llama-server b11312 and vLLM 0.32.0 serve
/v1/messages (+ count_tokens) and /v1/responses, and the tap meters every reply.

PHAROS_RECORD=1 writes the replies to tests/captures/routes/<engine>/<version>/ (what
tests/proxy/test_route_usage_replay.py and the fakes' templates replay)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

import aiohttp
import pytest

from pharos.proxy.tap import StreamTap
from tests.live.conftest import selected
from tests.live.engines import (
    LLAMACPP_BUILD,
    REPO_ROOT,
    SERVED_MODEL,
    VLLM_VERSION,
    RunningEngine,
    start_llamacpp,
    start_vllm,
)
from tests.live.routes import RouteReply, record_routes, write_routes

ENGINES: list[tuple[str, str, Callable[[Path], RunningEngine]]] = [
    ("llamacpp", f"b{LLAMACPP_BUILD}", lambda logs: start_llamacpp(logs)),
    ("vllm", f"v{VLLM_VERSION}", start_vllm),
]


@pytest.mark.parametrize(("name", "version", "start"), ENGINES, ids=[e[0] for e in ENGINES])
def test_agent_routes_answer_and_every_reply_is_metered(
    tmp_path: Path, name: str, version: str, start: Callable[[Path], RunningEngine]
) -> None:
    if not selected(name):
        pytest.skip(f"PHAROS_LIVE_ENGINES leaves {name} out")
    engine = start(tmp_path)
    try:

        async def run() -> list[tuple[str, int, bytes]]:
            connector = aiohttp.TCPConnector(force_close=True)  # llama-server closes idle ones
            async with aiohttp.ClientSession(connector=connector) as session:
                replies = await record_routes(session, engine.base_url, SERVED_MODEL)
            return [(r.name, r.status, r.body) for r in replies]

        replies = asyncio.run(run())
    finally:
        engine.stop()
    for reply_name, status, body in replies:
        assert status == 200, (reply_name, body[:200])
        tap = StreamTap()
        tap.feed(body)
        usage = tap.finish()[1]
        if reply_name == "count-tokens.json" or (
            name == "vllm" and reply_name == "openai-completion.sse"  # usage only when asked
        ):
            assert usage is None
            continue
        assert usage is not None and usage.prompt_tokens and usage.completion_tokens, reply_name
    warm = {n: b for n, _, b in replies}
    for stream in ("messages.2.sse", "responses.2.sse"):
        tap = StreamTap()
        tap.feed(warm[stream])
        usage = tap.finish()[1]
        assert usage is not None and usage.cached_tokens, f"{stream}: the repeat reads cached"
    if os.environ.get("PHAROS_RECORD") == "1":
        start_line = " ".join(engine.argv).replace(str(Path.home()), "~")
        write_routes(
            REPO_ROOT / "tests" / "captures",
            name,
            version,
            [RouteReply(n, s, b) for n, s, b in replies],
            start_line,
        )
