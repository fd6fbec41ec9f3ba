"""Recording the coding-agent routes (/v1/messages, /v1/messages/count_tokens, /v1/responses)
of a real engine, streamed and not, cold and warm, into `<root>/routes/<engine>/<version>/`.

Layout: `streams/<route>.<n>.sse` (n=1 cold, n=2 the same prompt again: cached tokens show),
`streams/<route>.json` for non-streamed replies, `streams/replies.tsv` (name TAB status), and
`meta.yaml` saying how they were made. Every prompt is synthetic (PROMPT_MARKER).
"""

from __future__ import annotations

import platform
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from pharos.engine.record import meta_yaml
from tests.live.capture import PROMPT_MARKER, long_prefix_prompt

MAX_TOKENS = 8
SHORT = f"{PROMPT_MARKER} greeting. Say hello in one word."


@dataclass(frozen=True)
class RouteReply:
    name: str
    status: int
    body: bytes


def _messages(prompt: str, stream: bool) -> dict[str, object]:
    body: dict[str, object] = {
        "model": "",
        "max_tokens": MAX_TOKENS,
        "system": f"{PROMPT_MARKER} system: answer briefly.",
        "messages": [{"role": "user", "content": prompt}],
    }
    if stream:
        body["stream"] = True
    return body


def _responses(prompt: str, stream: bool) -> dict[str, object]:
    body: dict[str, object] = {
        "model": "",
        "max_output_tokens": MAX_TOKENS,
        "instructions": f"{PROMPT_MARKER} system: answer briefly.",
        "input": prompt,
    }
    if stream:
        body["stream"] = True
    return body


def _completion(prompt: str, stream: bool) -> dict[str, object]:
    return {"model": "", "prompt": prompt, "max_tokens": 4, "stream": stream}


def _completion_usage(prompt: str, stream: bool) -> dict[str, object]:
    return {**_completion(prompt, stream), "stream_options": {"include_usage": True}}


PLAN: tuple[tuple[str, str, object, bool], ...] = (
    # (file name, path, body maker, streamed); the .1/.2 pairs send the same long prompt.
    ("messages.json", "/v1/messages", _messages, False),
    ("messages.1.sse", "/v1/messages", _messages, True),
    ("messages.2.sse", "/v1/messages", _messages, True),
    ("count-tokens.json", "/v1/messages/count_tokens", _messages, False),
    ("responses.json", "/v1/responses", _responses, False),
    ("responses.1.sse", "/v1/responses", _responses, True),
    ("responses.2.sse", "/v1/responses", _responses, True),
    # The fakes' streamed /v1/completions is cloned from this one.
    ("openai-completion.sse", "/v1/completions", _completion, True),
    # What Pharos asks for on a streamed completion when the client did not.
    ("openai-completion.usage.sse", "/v1/completions", _completion_usage, True),
)


async def record_routes(
    session: aiohttp.ClientSession,
    base_url: str,
    model: str,
    *,
    headers: Mapping[str, str] | None = None,
) -> list[RouteReply]:
    replies: list[RouteReply] = []
    for name, path, make, stream in PLAN:
        prompt = SHORT if name.endswith(".json") else long_prefix_prompt()
        if path == "/v1/completions":
            prompt = f"{PROMPT_MARKER} completion. Once upon"
        body = make(prompt, stream)  # type: ignore[operator]
        body["model"] = model
        async with session.post(
            base_url.rstrip("/") + path, json=body, headers=dict(headers or {})
        ) as reply:
            replies.append(RouteReply(name, reply.status, await reply.read()))
    return replies


def write_routes(
    root: Path, engine: str, version: str, replies: list[RouteReply], start: str
) -> Path:
    out = root / "routes" / engine / version
    streams = out / "streams"
    streams.mkdir(parents=True, exist_ok=True)
    for reply in replies:
        (streams / reply.name).write_bytes(reply.body)
    (streams / "replies.tsv").write_text(
        "".join(f"{r.name}\t{r.status}\n" for r in replies), encoding="utf-8"
    )
    meta = {
        "engine": engine,
        "version": version,
        "captured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": "PHAROS_RECORD=1 .venv/bin/pytest -m live tests/live/test_clients_routes.py",
        "host": f"{platform.system()}/{platform.machine()}",
        "model": "SmolLM2-135M-Instruct",
        "start": start,
        "requests": ", ".join(f"{name} {path}" for name, path, _, _ in PLAN),
        "prompts": "synthetic (tests/live/routes.py); .1/.2 send the same ~600-token prompt",
    }
    (out / "meta.yaml").write_text(meta_yaml(meta), encoding="utf-8")
    return out
