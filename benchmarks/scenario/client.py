"""One user's replay: streamed chats timed at the client, each turn's engine and timings.

TTFT is to the first chunk with a delta (what a chat UI shows first). The engine's own
`timings` (cache_n = prompt tokens reused from the slot's cache, prompt_n = prompt tokens
prefilled) come on llama.cpp's last chunks; the client asks for usage itself, so Pharos
leaves the stream whole (Pharos strips the usage chunk, timings included, when it asked).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp
import msgspec
from benchmarks.scenario.conversations import Conversation

REQUEST_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Reply:
    ttft_s: float
    cached_tokens: int | None  # None: the engine's timings never came
    prefilled_tokens: int | None
    prompt_ms: float | None = None  # the engine's prefill time for prefilled_tokens
    text: str = ""  # what the engine generated (the deltas' content, joined)


@dataclass(frozen=True)
class TurnResult:
    policy: str
    user: str
    conversation: int
    turn: int
    request_id: str
    sent_to: str  # the base URL the client posted to (Pharos, or an engine)
    engine: str | None  # the engine that served it; None: not known (yet)
    reply: Reply | None  # None: the turn failed
    error: str = ""
    bypassed: bool = False  # the bypassing client's turn: loads an engine, never counted
    queue_wait_s: float | None = None  # time in Pharos's queue; None: not through Pharos
    reason: str = ""  # Pharos's decision sentence (`warm, 310 cached tok, est ...`)
    decisions: tuple[tuple[str, str], ...] = ()  # Pharos's decision stages (route, prefix, ...)


class _Chunk(msgspec.Struct):
    choices: list[dict[str, object]] = []
    timings: dict[str, float] | None = None


def body_bytes(model: str, messages: list[dict[str, str]], max_tokens: int, escaped: bool) -> bytes:
    body = {
        "model": model,
        "messages": messages,
        "stream": True,
        "max_tokens": max_tokens,
        "stream_options": {"include_usage": True},
    }
    return json.dumps(body, ensure_ascii=escaped).encode()


def user_key(user: str) -> str:
    """The API key `--key-per-user` gives a user: fixed per name, so every run and policy
    sends the same one (Pharos stores only its SHA-256)."""
    return "sk-scenario-" + hashlib.sha256(user.encode()).hexdigest()[:32]


async def chat(
    http: aiohttp.ClientSession, base: str, body: bytes, request_id: str, key: str | None = None
) -> tuple[Reply, str | None]:
    """One streamed chat; returns the reply and the X-Request-Id the server echoed. `key`:
    sent as `Authorization: Bearer`."""
    sent = time.perf_counter()
    ttft: float | None = None
    cached = prefilled = None
    prompt_ms: float | None = None
    pieces: list[str] = []
    headers = {"Content-Type": "application/json", "X-Request-Id": request_id}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    async with http.post(base + "/v1/chat/completions", data=body, headers=headers) as reply:
        if reply.status != 200:
            await reply.read()
            raise aiohttp.ClientResponseError(
                reply.request_info, (), status=reply.status, message="not 200"
            )
        async for line in reply.content:
            if not line.startswith(b"data: {"):
                continue
            chunk = msgspec.json.decode(line[6:], type=_Chunk)
            if ttft is None and any(c.get("delta") for c in chunk.choices):
                ttft = time.perf_counter() - sent
            for choice in chunk.choices:
                delta = choice.get("delta")
                content = delta.get("content") if isinstance(delta, dict) else None
                if isinstance(content, str):
                    pieces.append(content)
            if chunk.timings is not None:
                cached = int(chunk.timings["cache_n"]) if "cache_n" in chunk.timings else None
                prefilled = int(chunk.timings["prompt_n"]) if "prompt_n" in chunk.timings else None
                prompt_ms = chunk.timings.get("prompt_ms")
        echoed = reply.headers.get("X-Request-Id")
    ttft_s = time.perf_counter() - sent if ttft is None else ttft
    return Reply(ttft_s, cached, prefilled, prompt_ms, "".join(pieces)), echoed


Route = Callable[[Conversation], str]
"""Where a conversation's next turn is sent: a base URL."""


async def _sleep_until(wake_at: float, end_at: float) -> bool:
    """Sleep to wake_at, or to end_at if that comes first; False when the run is over."""
    await asyncio.sleep(max(0.0, min(wake_at, end_at) - time.monotonic()))
    return time.monotonic() < end_at


async def replay(
    policy: str,
    mine: list[Conversation],
    route: Route,
    http: aiohttp.ClientSession,
    started: float,
    end_at: float,
    out: list[TurnResult],
    echo: bool = False,
    keyed: bool = False,
) -> None:
    """Replay one user's conversations in order; a failed turn ends its conversation (its
    history would differ from every other policy's) and the user goes on to the next.
    `echo`: the history holds the reply the engine generated, as chat UIs send it back;
    else the session's own (ShareGPT's answer: the same history under every policy).
    `keyed`: each user sends their own key (user_key), the bypassing client none."""
    for conv in mine:
        key = user_key(conv.user) if keyed and not conv.bypasses_router else None
        if conv.start_s is not None and not await _sleep_until(started + conv.start_s, end_at):
            return
        messages = [{"role": "system", "content": conv.system}]
        for number, turn in enumerate(conv.turns):
            if not await _sleep_until(time.monotonic() + turn.think_s, end_at):
                return
            messages.append({"role": "user", "content": turn.user_text})
            request_id = f"{policy}-{conv.index}-{number}"
            base = route(conv)
            body = body_bytes(conv.model, messages, turn.max_tokens, conv.json_escaped)
            try:
                reply, _ = await chat(http, base, body, request_id, key)
            except (aiohttp.ClientError, TimeoutError) as err:
                print(
                    f"  {policy} {conv.user} turn {number}: {type(err).__name__}", file=sys.stderr
                )
                out.append(
                    TurnResult(
                        policy,
                        conv.user,
                        conv.index,
                        number,
                        request_id,
                        base,
                        None,
                        None,
                        type(err).__name__,
                        conv.bypasses_router,
                    )
                )
                break
            out.append(
                TurnResult(
                    policy,
                    conv.user,
                    conv.index,
                    number,
                    request_id,
                    base,
                    base,
                    reply,
                    "",
                    conv.bypasses_router,
                )
            )
            answer = reply.text if echo else turn.reply_text
            messages.append({"role": "assistant", "content": answer})
