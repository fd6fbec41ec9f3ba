"""The coding-agent routes llama.cpp b11312 and vLLM 0.32.0 serve (recorded here, see
tests/captures/routes): Anthropic's /v1/messages (streamed and not), its count_tokens,
and OpenAI's /v1/responses, cloned from each engine's recording with the fake's numbers.

A recorded stream is replayed event by event: the text deltas become one event per
generated token, every other event keeps its recorded shape with the recorded reply text
replaced by the generated one, and usage goes where the engine put it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from pharos.fakeengine.cache import prompt_tokens
from pharos.fakeengine.engine import FakeEngine, Generation, chat_prompt, text_prompt
from pharos.fakeengine.render import Json, clone, dumps, template_bytes, template_json

_DELTAS = {"content_block_delta", "response.output_text.delta"}


@dataclass(frozen=True)
class Event:
    name: str
    data: Json


def _events(raw: bytes) -> list[Event]:
    events: list[Event] = []
    name = ""
    for line in raw.split(b"\n"):
        if line.startswith(b"event: "):
            name = line[len(b"event: ") :].decode()
        elif line.startswith(b"data: "):
            events.append(Event(name, json.loads(line[len(b"data: ") :])))
    return events


def _delta_text(data: Json) -> str:
    delta = data.get("delta")
    if isinstance(delta, dict):
        return str(delta.get("text", ""))
    return delta if isinstance(delta, str) else ""


def _set_delta_text(data: Json, text: str) -> None:
    if isinstance(data.get("delta"), dict):
        data["delta"]["text"] = text
    else:
        data["delta"] = text


def _replace(value: Any, recorded: str, text: str, model: str) -> Any:
    """The recorded reply text -> the generated text, and every `model` -> the fake's."""
    if isinstance(value, dict):
        return {
            k: model if k == "model" and isinstance(v, str) else _replace(v, recorded, text, model)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_replace(v, recorded, text, model) for v in value]
    if isinstance(value, str) and value == recorded and recorded:
        return text
    return value


def _fill_anthropic(usage: Json, gen: Generation) -> None:
    """llama.cpp: input_tokens = uncached, cache_read = cached. vLLM's message_delta also
    splits off cache_creation; its message_start (no cache fields) has the whole prompt."""
    has_read = "cache_read_input_tokens" in usage
    has_created = "cache_creation_input_tokens" in usage
    created = gen.created_cache_tokens if has_created else 0
    uncached = gen.prompt_tokens - gen.cached_tokens - created
    if "input_tokens" in usage:
        usage["input_tokens"] = uncached if has_read or has_created else gen.prompt_tokens
    if has_read:
        usage["cache_read_input_tokens"] = gen.cached_tokens
    if has_created:
        usage["cache_creation_input_tokens"] = created
    if "output_tokens" in usage and usage["output_tokens"] != 0:
        usage["output_tokens"] = gen.completion_tokens


def _fill_responses(usage: Json, gen: Generation) -> None:
    usage["input_tokens"] = gen.prompt_tokens
    usage["output_tokens"] = gen.completion_tokens
    if "total_tokens" in usage:
        usage["total_tokens"] = gen.prompt_tokens + gen.completion_tokens
    details = usage.get("input_tokens_details")
    if isinstance(details, dict) and "cached_tokens" in details:
        details["cached_tokens"] = gen.cached_tokens


def _fill_usage(value: Any, gen: Generation, anthropic: bool) -> None:
    if isinstance(value, list):
        for item in value:
            _fill_usage(item, gen, anthropic)
    if not isinstance(value, dict):
        return
    for key, item in value.items():
        if key == "usage" and isinstance(item, dict):
            (_fill_anthropic if anthropic else _fill_responses)(item, gen)
        else:
            _fill_usage(item, gen, anthropic)


class AgentShapes:
    """One engine's recorded /v1/messages and /v1/responses replies."""

    def __init__(self, engine_dir: str) -> None:
        self.messages: Json = template_json(engine_dir, "messages.json")
        self.messages_stream = _events(template_bytes(engine_dir, "messages.sse"))
        self.responses: Json = template_json(engine_dir, "responses.json")
        self.responses_stream = _events(template_bytes(engine_dir, "responses.sse"))
        self.count_tokens: Json = template_json(engine_dir, "count-tokens.json")
        self.messages_text = self.messages["content"][0]["text"]
        self.responses_text = _responses_text(self.responses)

    def body(self, anthropic: bool, gen: Generation, model: str) -> Json:
        template, recorded = (
            (self.messages, self.messages_text)
            if anthropic
            else (self.responses, self.responses_text)
        )
        body: Json = _replace(clone(template), recorded, gen.text, model)
        if anthropic:
            body["stop_reason"] = "max_tokens" if gen.finish_reason == "length" else "end_turn"
        _fill_usage(body, gen, anthropic)
        return body


def _responses_text(body: Json) -> str:
    for item in body.get("output", []):
        for part in item.get("content", []) if isinstance(item, dict) else []:
            if isinstance(part, dict) and part.get("type") == "output_text":
                return str(part.get("text", ""))
    return ""


def _max_tokens(body: Json, *names: str) -> int | None:
    for name in names:
        value = body.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def messages_prompt(body: Json) -> bytes:
    system = body.get("system")
    head = text_prompt(system) if isinstance(system, str) else b""
    return head + chat_prompt(body)


def responses_prompt(body: Json) -> bytes:
    return text_prompt(body.get("instructions")) + text_prompt(body.get("input"))


async def stream_events(
    engine: FakeEngine,
    request: web.Request,
    events: list[Event],
    gen: Generation,
    model: str,
    *,
    anthropic: bool,
) -> web.StreamResponse:
    recorded = "".join(_delta_text(e.data) for e in events if e.name in _DELTAS)
    first_delta = next(i for i, e in enumerate(events) if e.name in _DELTAS)
    last_delta = max(i for i, e in enumerate(events) if e.name in _DELTAS)
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    sequence = 0

    async def send(event: Event, data: Json) -> None:
        nonlocal sequence
        if "sequence_number" in data:
            data["sequence_number"] = sequence
        sequence += 1
        await response.write(f"event: {event.name}\ndata: ".encode() + dumps(data) + b"\n\n")

    for event in events[:first_delta]:
        data = _replace(clone(event.data), recorded, "", model)
        _fill_usage(data, gen, anthropic)
        await send(event, data)
    delta = events[first_delta]
    async for token in engine.tokens(gen):
        data = _replace(clone(delta.data), recorded, token, model)
        _set_delta_text(data, token)
        await send(delta, data)
    for event in events[last_delta + 1 :]:
        data = _replace(clone(event.data), recorded, gen.text, model)
        if anthropic and isinstance(data.get("delta"), dict) and "stop_reason" in data["delta"]:
            data["delta"]["stop_reason"] = (
                "max_tokens" if gen.finish_reason == "length" else "end_turn"
            )
        _fill_usage(data, gen, anthropic)
        await send(event, data)
    await response.write_eof()
    return response


async def serve_agent_route(
    engine: FakeEngine,
    request: web.Request,
    shapes: AgentShapes,
    body: Json,
    model_name: str,
) -> web.StreamResponse:
    """/v1/messages, /v1/messages/count_tokens or /v1/responses for the engine's one model."""
    model = engine.models[model_name]
    if request.path == "/v1/messages/count_tokens":  # tokenizing only: no slot, no cache
        tokens = prompt_tokens(messages_prompt(body), engine.ledger.bytes_per_token)
        count = clone(shapes.count_tokens)
        count["input_tokens"] = tokens
        if isinstance(count.get("context_management"), dict):
            count["context_management"]["original_input_tokens"] = tokens
        return web.Response(body=dumps(count), content_type="application/json")
    anthropic = request.path == "/v1/messages"
    prompt = messages_prompt(body) if anthropic else responses_prompt(body)
    limit = _max_tokens(body, "max_tokens") if anthropic else _max_tokens(body, "max_output_tokens")
    async with engine.generation(model, prompt, limit) as gen:
        if body.get("stream") is True:
            events = shapes.messages_stream if anthropic else shapes.responses_stream
            return await stream_events(
                engine, request, events, gen, model_name, anthropic=anthropic
            )
        await engine.run(gen)
        reply = shapes.body(anthropic, gen, model_name)
        return web.Response(body=dumps(reply), content_type="application/json")
