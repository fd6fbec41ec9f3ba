"""FakeOllama: Ollama v0.34.4, every body cloned from its capture (templates/ollama-v0.34.4).

Multi-model: a model loads on first use (ledger load_s), LRU idle models unload above
the memory cap, and an idle model goes cold after keep-alive. Each loaded model has
its own slots and per-slot prompt caches. Ollama reports no running/waiting anywhere.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from aiohttp import web

from pharos.clock import Clock
from pharos.fakeengine.engine import (
    FakeEngine,
    FakeModel,
    Generation,
    Sleep,
    chat_prompt,
    iter_inputs,
    max_tokens_of,
    read_json,
    text_prompt,
    wants_usage,
)
from pharos.fakeengine.ledger import DEFAULT_LEDGER, Ledger
from pharos.fakeengine.openai import (
    CompletionStreamShape,
    OpenAIShapes,
    bad_request,
    chat_body,
    completion_body,
    embeddings_body,
    fake_vector,
    json_response,
    stream_chat,
    stream_completion,
)
from pharos.fakeengine.render import (
    Json,
    clone,
    dumps,
    put,
    rfc3339_ns,
    template_bytes,
    template_json,
    template_lines,
)
from pharos.fakeengine.replies import wants_json

DIR = "ollama-v0.34.4"
VERSION = "0.34.4"
DIGEST = "a8b0c51577010a279d933d14c2a8ab4b268079d44c5c8830c0a93900f1827c67"


def _chatcmpl(rng: random.Random) -> str:
    return f"chatcmpl-{rng.randrange(1000)}"


def _cmpl(rng: random.Random) -> str:
    return f"cmpl-{rng.randrange(1000)}"


class FakeOllama(FakeEngine):
    loads_models = True

    def __init__(
        self,
        models: list[FakeModel] | None = None,
        *,
        ledger: Ledger = DEFAULT_LEDGER,
        clock: Clock | None = None,
        sleep: Sleep | None = None,
        seed: int = 0,
    ) -> None:
        if models is None:
            models = [
                FakeModel("qwen2.5:0.5b"),
                FakeModel("all-minilm:22m", 45_960_996, 50_000_000, embedding=True),
            ]
        super().__init__(models, ledger=ledger, clock=clock, sleep=sleep)
        self._rng = random.Random(seed)
        self.shapes = OpenAIShapes(DIR, chat_id=_chatcmpl, completion_id=_cmpl)
        self._tags_entry: Json = template_json(DIR, "api_tags")["models"][0]
        self._ps_entry: Json = template_json(DIR, "api_ps")["models"][0]
        self._v1_models: Json = template_json(DIR, "v1_models")
        self._native_chat = template_lines(DIR, "ollama-chat.ndjson")
        self._native_chat_json: Json = template_json(DIR, "ollama-chat.json")
        self._generate = template_lines(DIR, "ollama-generate.ndjson")
        self._embed: Json = template_json(DIR, "ollama-embed.json")
        self._openai_embed: Json = template_json(DIR, "openai-embeddings.json")
        self._unknown = template_bytes(DIR, "unknown-model.txt").split(b"\n")[0]
        self._completion_stream = completion_stream_shape(self.shapes.completion)

    # ---- status bodies ------------------------------------------------------------------

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/", self._root),  # GET also answers HEAD /, which the ollama CLI sends
            web.get("/api/version", self._version),
            web.get("/api/tags", self._tags),
            web.get("/api/ps", self._ps),
            web.post("/api/show", self._show),
            web.get("/v1/models", self._models),
            web.post("/v1/chat/completions", self._openai_chat),
            web.post("/v1/completions", self._openai_completion),
            web.post("/v1/embeddings", self._openai_embeddings),
            web.post("/api/chat", self._native_chat_route),
            web.post("/api/generate", self._native_generate),
            web.post("/api/embed", self._native_embed),
            web.post("/api/embeddings", self._native_embeddings),
        ]

    async def _root(self, _request: web.Request) -> web.Response:
        return web.Response(text="Ollama is running")

    async def _version(self, _request: web.Request) -> web.Response:
        return json_response(template_json(DIR, "api_version") | {"version": VERSION})

    def _tag(self, model: FakeModel) -> Json:
        entry = clone(self._tags_entry)
        put(entry, "name", model.name)
        put(entry, "model", model.name)
        put(entry, "size", model.size_bytes)
        put(entry, "digest", DIGEST)
        return entry

    async def _tags(self, _request: web.Request) -> web.Response:
        return json_response({"models": [self._tag(m) for m in self.models.values()]})

    async def _ps(self, _request: web.Request) -> web.Response:
        entries: list[Any] = []
        for runner in self.loaded().values():
            entry = clone(self._ps_entry)
            put(entry, "name", runner.model.name)
            put(entry, "model", runner.model.name)
            put(entry, "size", runner.model.memory_bytes)
            idle_s = self.clock.now() - runner.last_used_s
            expires = self.clock.time() - idle_s + self.ledger.keep_alive_s
            put(entry, "expires_at", rfc3339_ns(expires))
            put(entry, "size_vram", 0)  # CPU, as recorded: a real 0
            entries.append(entry)
        return json_response({"models": entries})

    async def _show(self, request: web.Request) -> web.Response:
        """[U] /api/show was never recorded: a minimal body built from the tags entry."""
        body = await read_json(request) or {}
        model = self.models.get(str(body.get("model") or body.get("name") or ""))
        if model is None:
            return self._native_unknown(str(body.get("model")))
        tag = self._tag(model)
        details = tag["details"]
        # model_info: the ollama SDK requires the field; its keys here are the tags
        # entry's own details under the "general." prefix the real reply uses [U].
        model_info = {
            "general.architecture": details.get("family", ""),
            "general.parameter_count": details.get("parameter_size", ""),
        }
        show = {
            "details": details,
            "capabilities": tag.get("capabilities", []),
            "model_info": model_info,
        }
        return json_response(show | {"modified_at": tag.get("modified_at", "")})

    async def _models(self, _request: web.Request) -> web.Response:
        body = clone(self._v1_models)
        template = self._v1_models["data"][0]
        items: list[Any] = []
        for model in self.models.values():
            item = clone(template)
            put(item, "id", model.name)
            items.append(item)
        body["data"] = items
        return json_response(body, newline=True)

    # ---- replies ------------------------------------------------------------------------

    def _openai_unknown(self, name: str) -> web.Response:
        body = self._unknown.replace(b"no-such-model", name.encode())
        return web.Response(body=body + b"\n", status=404, content_type="application/json")

    def _native_unknown(self, name: str) -> web.Response:
        """[U] the native 404 body was never recorded."""
        return json_response({"error": f"model '{name}' not found"}, status=404)

    async def _openai_chat(self, request: web.Request) -> web.StreamResponse:
        body = await read_json(request)
        if body is None:
            return bad_request("invalid JSON body")
        model = self.models.get(str(body.get("model")))
        if model is None:
            return self._openai_unknown(str(body.get("model")))
        max_tokens = max_tokens_of(body, "max_completion_tokens", "max_tokens")
        async with self.generation(
            model,
            chat_prompt(body, with_tools=self.ledger.tools_in_prompt),
            max_tokens,
            json_asked=wants_json(body),
        ) as gen:
            if body.get("stream") is True:
                return await stream_chat(
                    self, request, self.shapes, gen, model.name, wants_usage(body), self._rng
                )
            await self.run(gen)
            created = int(self.clock.time())
            return json_response(
                chat_body(self.shapes, gen, model.name, created, self._rng), newline=True
            )

    async def _openai_completion(self, request: web.Request) -> web.StreamResponse:
        body = await read_json(request)
        if body is None:
            return bad_request("invalid JSON body")
        model = self.models.get(str(body.get("model")))
        if model is None:
            return self._openai_unknown(str(body.get("model")))
        prompt = text_prompt(body.get("prompt"))
        async with self.generation(model, prompt, max_tokens_of(body, "max_tokens")) as gen:
            if body.get("stream") is True:
                return await stream_completion(
                    self,
                    request,
                    self._completion_stream,
                    gen,
                    model.name,
                    wants_usage(body),
                    self._rng,
                )
            await self.run(gen)
            created = int(self.clock.time())
            return json_response(
                completion_body(self.shapes, gen, model.name, created, self._rng), newline=True
            )

    async def _embed_vectors(
        self, model: FakeModel, inputs: list[bytes]
    ) -> tuple[list[list[float]], Generation]:
        async with self.generation(model, b"\n".join(inputs), 0) as gen:
            vectors = [fake_vector(text, self.ledger.embedding_dims) for text in inputs]
            return vectors, gen

    async def _openai_embeddings(self, request: web.Request) -> web.Response:
        body = await read_json(request)
        if body is None:
            return bad_request("invalid JSON body")
        model = self.models.get(str(body.get("model")))
        if model is None:
            return self._openai_unknown(str(body.get("model")))
        vectors, gen = await self._embed_vectors(model, list(iter_inputs(body.get("input"))))
        reply = embeddings_body(self._openai_embed, vectors, model.name, gen.prompt_tokens)
        return json_response(reply, newline=True)

    def _native_final(self, template: Json, gen: Generation, model: str) -> Json:
        final = clone(template)
        put(final, "model", model)
        put(final, "created_at", rfc3339_ns(self.clock.time()))
        put(final, "done_reason", gen.finish_reason)
        ns = 1_000_000_000
        total_s = gen.load_s + gen.prefill_s + gen.decode_s
        put(final, "total_duration", int(total_s * ns))
        put(final, "load_duration", int(gen.load_s * ns))
        put(final, "prompt_eval_count", gen.prompt_tokens)
        put(final, "prompt_eval_cached_count", gen.cached_tokens)
        put(final, "prompt_eval_duration", int(gen.prefill_s * ns))
        put(final, "eval_count", gen.completion_tokens)
        put(final, "eval_duration", int(gen.decode_s * ns))
        put(final, "context", list(range(gen.prompt_tokens + gen.completion_tokens)))
        return final

    async def _native_stream(
        self,
        request: web.Request,
        gen: Generation,
        model: str,
        lines: list[Json],
        text_key: str,
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await response.prepare(request)
        async for token in self.tokens(gen):
            line = clone(lines[0])
            put(line, "model", model)
            put(line, "created_at", rfc3339_ns(self.clock.time()))
            put(line, text_key, token)
            await response.write(dumps(line) + b"\n")
        final = self._native_final(lines[-1], gen, model)
        await response.write(dumps(final) + b"\n")
        await response.write_eof()
        return response

    async def _native_chat_route(self, request: web.Request) -> web.StreamResponse:
        return await self._native_generation(
            request, chat_prompt, self._native_chat, self._native_chat_json, "message.content"
        )

    async def _native_generate(self, request: web.Request) -> web.StreamResponse:
        return await self._native_generation(
            request, _generate_prompt, self._generate, self._generate[-1], "response"
        )

    async def _native_generation(
        self,
        request: web.Request,
        prompt_of: Callable[[Json], bytes],
        stream_lines: list[Json],
        final_template: Json,
        text_key: str,
    ) -> web.StreamResponse:
        """/api/chat and /api/generate: the same flow over their own recorded shapes."""
        body = await read_json(request)
        if body is None:
            return json_response({"error": "invalid JSON body"}, status=400)
        model = self.models.get(str(body.get("model")))
        if model is None:
            return self._native_unknown(str(body.get("model")))
        async with self.generation(
            model, prompt_of(body), max_tokens_of(body), json_asked=wants_json(body)
        ) as gen:
            if body.get("stream") is not False:
                return await self._native_stream(request, gen, model.name, stream_lines, text_key)
            await self.run(gen)
            final = self._native_final(final_template, gen, model.name)
            put(final, text_key, gen.text)
            return json_response(final)

    async def _native_embeddings(self, request: web.Request) -> web.Response:
        """Ollama's older /api/embeddings: one `prompt`, one `embedding` and no counts. [U] never
        recorded; the shape is the one the ollama SDK's EmbeddingsResponse reads."""
        body = await read_json(request)
        if body is None:
            return json_response({"error": "invalid JSON body"}, status=400)
        model = self.models.get(str(body.get("model")))
        if model is None:
            return self._native_unknown(str(body.get("model")))
        vectors, _gen = await self._embed_vectors(model, [text_prompt(body.get("prompt"))])
        return json_response({"embedding": vectors[0]})

    async def _native_embed(self, request: web.Request) -> web.Response:
        body = await read_json(request)
        if body is None:
            return json_response({"error": "invalid JSON body"}, status=400)
        model = self.models.get(str(body.get("model")))
        if model is None:
            return self._native_unknown(str(body.get("model")))
        vectors, gen = await self._embed_vectors(model, list(iter_inputs(body.get("input"))))
        reply = clone(self._embed)
        put(reply, "model", model.name)
        put(reply, "embeddings", vectors)
        ns = 1_000_000_000
        put(reply, "total_duration", int((gen.load_s + gen.prefill_s) * ns))
        put(reply, "load_duration", int(gen.load_s * ns))
        put(reply, "prompt_eval_count", gen.prompt_tokens)
        return json_response(reply)


def _generate_prompt(body: Json) -> bytes:
    return text_prompt(body.get("system")) + text_prompt(body.get("prompt"))


def completion_stream_shape(completion: Json) -> CompletionStreamShape:
    """[U] Ollama's streamed /v1/completions was never recorded: its chunks are the recorded
    non-streamed completion's shape with one token each, as Ollama's OpenAI layer builds them."""
    token = clone(completion)
    token.pop("usage", None)
    token["choices"][0]["text"] = ""
    token["choices"][0]["finish_reason"] = None
    finish = clone(token)
    finish["choices"][0]["finish_reason"] = "stop"
    usage = clone(completion)
    usage["choices"] = []
    return CompletionStreamShape([token, finish, usage], _cmpl)
