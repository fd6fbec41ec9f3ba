"""OpenAI-compatible replies (chat streamed and not, completions, embeddings), cloned from
each engine's recorded templates with the fake's numbers put in."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from aiohttp import web

from pharos.fakeengine.engine import FakeEngine, Generation
from pharos.fakeengine.render import (
    SSE_DONE,
    Json,
    clone,
    dumps,
    put,
    sse,
    template_json,
    template_lines,
)

IdMaker = Callable[[random.Random], str]


class OpenAIShapes:
    """One engine's recorded OpenAI reply shapes."""

    def __init__(
        self,
        engine_dir: str,
        *,
        chat_id: IdMaker,
        completion_id: IdMaker,
        fingerprint_to_finish_without_usage: bool = False,
    ) -> None:
        chunks = template_lines(engine_dir, "openai-chat.sse")
        self.first, self.content, self.finish, self.usage = (
            chunks[0],
            chunks[1],
            chunks[-2],
            chunks[-1],
        )
        self.chat: Json = template_json(engine_dir, "openai-chat.json")
        self.completion: Json = template_json(engine_dir, "openai-completion.json")
        self.chat_id = chat_id
        self.completion_id = completion_id
        self.fingerprint_moves = fingerprint_to_finish_without_usage
        delta = self.first["choices"][0].get("delta", {})
        self.first_carries_token = isinstance(delta.get("content"), str) and bool(delta["content"])


def fill_usage(obj: Json, gen: Generation) -> None:
    put(obj, "usage.prompt_tokens", gen.prompt_tokens)
    put(obj, "usage.completion_tokens", gen.completion_tokens)
    put(obj, "usage.total_tokens", gen.prompt_tokens + gen.completion_tokens)
    put(obj, "usage.prompt_tokens_details.cached_tokens", gen.cached_tokens)
    put(obj, "usage.prompt_tokens_details.created_cache_tokens", gen.created_cache_tokens)
    uncached = gen.prompt_tokens - gen.cached_tokens
    prompt_ms = gen.prefill_s * 1e3
    predicted_ms = gen.decode_s * 1e3
    put(obj, "timings.cache_n", gen.cached_tokens)
    put(obj, "timings.prompt_n", uncached)
    put(obj, "timings.prompt_ms", prompt_ms)
    put(obj, "timings.prompt_per_token_ms", prompt_ms / max(1, uncached))
    put(obj, "timings.prompt_per_second", 1e3 * uncached / prompt_ms if prompt_ms > 0 else 0.0)
    put(obj, "timings.predicted_n", gen.completion_tokens)
    put(obj, "timings.predicted_ms", predicted_ms)
    put(obj, "timings.predicted_per_token_ms", predicted_ms / max(1, gen.completion_tokens))
    per_s = 1e3 * gen.completion_tokens / predicted_ms if predicted_ms > 0 else 0.0
    put(obj, "timings.predicted_per_second", per_s)


def _stamp(obj: Json, reply_id: str, created: int, model: str) -> Json:
    put(obj, "id", reply_id)
    put(obj, "created", created)
    put(obj, "model", model)
    return obj


def _chunk(template: Json, reply_id: str, created: int, model: str, content: str | None) -> Json:
    chunk = _stamp(clone(template), reply_id, created, model)
    if content is not None:
        put(chunk["choices"][0], "delta.content", content)
    return chunk


async def stream_chat(
    engine: FakeEngine,
    request: web.Request,
    shapes: OpenAIShapes,
    gen: Generation,
    model: str,
    include_usage: bool,
    rng: random.Random,
) -> web.StreamResponse:
    reply_id = shapes.chat_id(rng)
    created = int(engine.clock.time())
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    first_pending = True
    if not shapes.first_carries_token:
        await response.write(sse(_chunk(shapes.first, reply_id, created, model, None)))
        first_pending = False
    async for token in engine.tokens(gen):
        template = shapes.first if first_pending else shapes.content
        first_pending = False
        await response.write(sse(_chunk(template, reply_id, created, model, token)))
    finish = _chunk(shapes.finish, reply_id, created, model, None)
    finish["choices"][0]["finish_reason"] = gen.finish_reason
    if shapes.fingerprint_moves and not include_usage and "system_fingerprint" in shapes.usage:
        finish["system_fingerprint"] = shapes.usage["system_fingerprint"]  # [U] key position
    await response.write(sse(finish))
    if include_usage:
        usage = _stamp(clone(shapes.usage), reply_id, created, model)
        fill_usage(usage, gen)
        await response.write(sse(usage))
    await response.write(SSE_DONE)
    await response.write_eof()
    return response


def chat_body(
    shapes: OpenAIShapes, gen: Generation, model: str, created: int, rng: random.Random
) -> Json:
    body = _stamp(clone(shapes.chat), shapes.chat_id(rng), created, model)
    choice = body["choices"][0]
    put(choice, "message.content", gen.text)
    put(choice, "finish_reason", gen.finish_reason)
    fill_usage(body, gen)
    return body


def completion_body(
    shapes: OpenAIShapes, gen: Generation, model: str, created: int, rng: random.Random
) -> Json:
    body = _stamp(clone(shapes.completion), shapes.completion_id(rng), created, model)
    choice = body["choices"][0]
    put(choice, "text", gen.text)
    put(choice, "finish_reason", gen.finish_reason)
    fill_usage(body, gen)
    return body


def embeddings_body(template: Json, vectors: list[list[float]], model: str, tokens: int) -> Json:
    body = clone(template)
    item_template = template["data"][0]
    items: list[Any] = []
    for index, vector in enumerate(vectors):
        item = clone(item_template)
        put(item, "embedding", vector)
        put(item, "index", index)
        items.append(item)
    body["data"] = items
    put(body, "model", model)
    put(body, "usage.prompt_tokens", tokens)
    put(body, "usage.total_tokens", tokens)
    return body


def json_response(body: object, status: int = 200, *, newline: bool = False) -> web.Response:
    """`newline`: Ollama's OpenAI-compatible bodies end in one (Go's json.Encoder), as recorded."""
    payload = dumps(body) + b"\n" if newline else dumps(body)
    return web.Response(body=payload, status=status, content_type="application/json")


def bad_request(message: str) -> web.Response:
    error = {"error": {"message": message, "type": "invalid_request_error", "code": 400}}
    return json_response(error, status=400)


def fake_vector(seed: bytes, dims: int) -> list[float]:
    rng = random.Random(seed)
    return [round(rng.uniform(-0.2, 0.2), 8) for _ in range(dims)]


class CompletionStreamShape:
    """One engine's recorded streamed /v1/completions: a token chunk, the chunk that carries
    finish_reason (and, on llama.cpp, the usage every time), and vLLM's separate usage chunk
    (`choices: []`, sent only when the client asked)."""

    def __init__(self, chunks: list[Json], completion_id: IdMaker) -> None:
        self.token = chunks[0]
        self.finish = next(c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"])
        self.usage = next((c for c in chunks if c.get("choices") == []), None)
        self.finish_carries_token = bool(self.finish["choices"][0].get("text"))
        self.completion_id = completion_id

    @classmethod
    def recorded(cls, engine_dir: str, completion_id: IdMaker) -> CompletionStreamShape:
        return cls(template_lines(engine_dir, "openai-completion.sse"), completion_id)


def _completion_chunk(template: Json, reply_id: str, created: int, model: str, text: str) -> Json:
    chunk = _stamp(clone(template), reply_id, created, model)
    put(chunk["choices"][0], "text", text)
    return chunk


async def stream_completion(
    engine: FakeEngine,
    request: web.Request,
    shape: CompletionStreamShape,
    gen: Generation,
    model: str,
    include_usage: bool,
    rng: random.Random,
) -> web.StreamResponse:
    reply_id = shape.completion_id(rng)
    created = int(engine.clock.time())
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    held: str | None = None  # vLLM sends the last token in the finish chunk: hold one back
    async for token in engine.tokens(gen):
        if held is not None:
            chunk = _completion_chunk(shape.token, reply_id, created, model, held)
            await response.write(sse(chunk))
        held = token
        if not shape.finish_carries_token:
            await response.write(
                sse(_completion_chunk(shape.token, reply_id, created, model, held))
            )
            held = None
    finish = _completion_chunk(shape.finish, reply_id, created, model, held or "")
    finish["choices"][0]["finish_reason"] = gen.finish_reason
    fill_usage(finish, gen)  # only where the recorded finish chunk has usage (llama.cpp)
    await response.write(sse(finish))
    if include_usage and shape.usage is not None:
        usage = _stamp(clone(shape.usage), reply_id, created, model)
        fill_usage(usage, gen)
        await response.write(sse(usage))
    await response.write(SSE_DONE)
    await response.write_eof()
    return response
