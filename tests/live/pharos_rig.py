"""An in-process Pharos (real SystemClock, short scrape intervals) in front of real engines.

The test talks to it over HTTP on 127.0.0.1 like any client, and reads what Pharos decided
from each request's RequestDone (`RuntimeOptions.on_done`) and from its state.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from pharos.clock import SystemClock
from pharos.cmd.runtime import Pharos, RuntimeOptions, running
from pharos.config import Config
from pharos.proxy.done import RequestDone
from pharos.state import BackendSpec, StateOptions
from pharos.state.spec import BackendStatus
from tests.live.capture import PROMPT_MARKER, long_prefix_prompt

LIVE_STATE = StateOptions(fast_interval_s=0.5, full_interval_s=1.0, scrape_timeout_s=2.0)
"""Short rounds so the tests wait little; a scrape may take 2 s on 2 busy cores."""

READY_TIMEOUT_S = 60.0
WAIT_TIMEOUT_S = 120.0
"""Generous: a 600-token prefill on one core shared with other work takes ~12 s."""

CHAT = "/v1/chat/completions"


async def until(
    predicate: Callable[[], bool], what: str, timeout_s: float = WAIT_TIMEOUT_S
) -> None:
    """Poll a condition (never a fixed sleep) and fail naming what did not happen."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        await asyncio.sleep(0.1)


@dataclass
class LiveRouter:
    base_url: str
    pharos: Pharos
    done: list[RequestDone]
    client: aiohttp.ClientSession

    def backend(self, url: str) -> BackendStatus:
        for status in self.pharos.state.backends():
            if status.url == url:
                return status
        raise AssertionError(f"Pharos has no backend {url}")

    def up_urls(self, model: str) -> set[str]:
        now = self.pharos.clock.now()
        return {v.backend_url for v in self.pharos.state.targets_for_model(model, now) if v.up}

    async def wait_up(self, model: str, urls: Sequence[str]) -> None:
        """Until Pharos sees every one of `urls` up for `model` (fresh round, not ejected)."""
        wanted = set(urls)
        await until(lambda: wanted <= self.up_urls(model), f"{sorted(wanted)} up for {model}")

    async def wait_done(self, count: int) -> list[RequestDone]:
        await until(lambda: len(self.done) >= count, f"{count} finished requests")
        return self.done

    async def get_json(self, path: str) -> Any:
        async with self.client.get(self.base_url + path) as reply:
            assert reply.status == 200, (path, reply.status, await reply.text())
            return await reply.json()

    async def get_text(self, path: str) -> str:
        async with self.client.get(self.base_url + path) as reply:
            assert reply.status == 200, (path, reply.status)
            return await reply.text()


@contextlib.asynccontextmanager
async def open_router(
    backends: Sequence[BackendSpec], state: StateOptions = LIVE_STATE
) -> AsyncIterator[LiveRouter]:
    """No keys in config: every client is the anonymous admin key, so /usage and /status
    answer without a header."""
    done: list[RequestDone] = []
    pharos = Pharos(
        Config(),
        clock=SystemClock(),
        backends=backends,
        options=RuntimeOptions(state=state, on_done=done.append),
    )
    async with running(pharos) as base_url:
        assert await pharos.wait_ready(READY_TIMEOUT_S), "Pharos's first scrape round"
        # One connection per request: a stream cut by a killed engine must not poison the next.
        connector = aiohttp.TCPConnector(force_close=True)
        timeout = aiohttp.ClientTimeout(total=WAIT_TIMEOUT_S * 2)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as client:
            yield LiveRouter(base_url, pharos, done, client)


# ---- the conversation and the replies ---------------------------------------------------


def conversation_turn_one(tag: str) -> list[dict[str, str]]:
    """A system prompt of ~600 tokens and one user turn; `tag` keeps tests' prompts apart."""
    return [
        {"role": "system", "content": f"{PROMPT_MARKER} {tag}. {long_prefix_prompt()}"},
        {"role": "user", "content": f"{PROMPT_MARKER} turn one. Name the keeper."},
    ]


def conversation_turn_two(
    turn_one: Sequence[Mapping[str, str]], reply_text: str
) -> list[dict[str, str]]:
    """The same conversation, the assistant's reply, and one more user turn."""
    return [
        *(dict(m) for m in turn_one),
        {"role": "assistant", "content": reply_text},
        {"role": "user", "content": f"{PROMPT_MARKER} turn two. Which bearing came first?"},
    ]


def sse_events(body: bytes) -> list[Any]:
    """The JSON payload of every `data:` line; the string "[DONE]" for the terminator."""
    events: list[Any] = []
    for line in body.splitlines():
        if not line.startswith(b"data:"):
            continue
        payload = line[len(b"data:") :].strip()
        events.append("[DONE]" if payload == b"[DONE]" else json.loads(payload))
    return events


def content_of(events: Sequence[Any]) -> str:
    parts = []
    for event in events:
        if isinstance(event, dict):
            for choice in event.get("choices") or []:
                parts.append((choice.get("delta") or {}).get("content") or "")
    return "".join(parts)


def decision(done: RequestDone, stage: str) -> str | None:
    """The outcome of one decision stage (the last one, when a stage ran twice)."""
    found = None
    for name, outcome in done.decisions:
        if name == stage:
            found = outcome
    return found
