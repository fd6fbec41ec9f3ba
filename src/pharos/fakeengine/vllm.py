"""FakeVLLM: vLLM v0.30.0, bodies cloned from its capture (templates/vllm-v0.30.0).

One model, always loaded, `slots` requests run at once behind an engine-side queue,
one shared prefix cache in blocks. /metrics is the recorded busy body's vllm: gauge
and counter families (idle and loaded bodies were not copied) with the fake's
numbers put in. /version: status 200 recorded for v0.10.2 (paths.tsv), no body
recorded for any version; the body served here is [U] (vLLM's `{"version": ...}`).
"""

from __future__ import annotations

import random

from aiohttp import web

from pharos.clock import Clock
from pharos.fakeengine.agents import AgentShapes, serve_agent_route
from pharos.fakeengine.engine import (
    FakeEngine,
    FakeModel,
    Sleep,
    chat_prompt,
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
    json_response,
    stream_chat,
    stream_completion,
)
from pharos.fakeengine.render import Json, clone, put, set_metric, template_bytes, template_json
from pharos.fakeengine.replies import wants_json

DIR = "vllm-v0.30.0"
STREAMS_DIR = "vllm-v0.32.0"
"""v0.30.0's recording has no streamed completion: 0.32.0's (recorded here) is the shape."""
VERSION = "0.30.0"
RECORDED_MODEL = "qwen2.5-0.5b"


class FakeVLLM(FakeEngine):
    shared_cache = True

    def __init__(
        self,
        model: str = RECORDED_MODEL,
        *,
        ledger: Ledger = DEFAULT_LEDGER,
        clock: Clock | None = None,
        sleep: Sleep | None = None,
        seed: int = 0,
        serve_version: bool = True,
    ) -> None:
        super().__init__([FakeModel(model)], ledger=ledger, clock=clock, sleep=sleep)
        self.model = self.models[model]
        self._rng = random.Random(seed)
        self.serve_version = serve_version
        self.shapes = OpenAIShapes(
            DIR,
            chat_id=lambda rng: f"chatcmpl-{rng.getrandbits(64):016x}",
            completion_id=lambda rng: f"cmpl-{rng.getrandbits(64):016x}",
            fingerprint_to_finish_without_usage=True,
        )
        self.agent_shapes = AgentShapes(STREAMS_DIR)
        self._completion_stream = CompletionStreamShape.recorded(
            STREAMS_DIR, lambda rng: f"cmpl-{rng.getrandbits(64):016x}"
        )
        self._metrics = template_bytes(DIR, "metrics").decode().replace(RECORDED_MODEL, model)
        self._v1_models: Json = template_json(DIR, "v1_models")

    def routes(self) -> list[web.RouteDef]:
        routes = [
            web.get("/health", self._health),
            web.get("/metrics", self._metrics_route),
            web.get("/v1/models", self._models),
            web.post("/v1/chat/completions", self._chat),
            web.post("/v1/completions", self._completion),
            web.post("/v1/messages", self._agent),
            web.post("/v1/messages/count_tokens", self._agent),
            web.post("/v1/responses", self._agent),
        ]
        if self.serve_version:
            routes.append(web.get("/version", self._version))
        return routes

    async def _health(self, _request: web.Request) -> web.Response:
        """v0.10.2 paths.tsv: /health 200 with no content type, an empty body."""
        return web.Response(status=200)

    async def _version(self, _request: web.Request) -> web.Response:
        return json_response({"version": VERSION})

    async def _metrics_route(self, _request: web.Request) -> web.Response:
        c = self.counters
        cache = self.block_cache
        text = self._metrics
        text = set_metric(text, "vllm:num_requests_running", float(self.running()))
        text = set_metric(text, "vllm:num_requests_waiting", float(self.waiting()))
        text = set_metric(
            text,
            "vllm:num_requests_waiting_by_reason",
            float(self.waiting()),
            labels='reason="capacity"',
        )
        text = set_metric(
            text, "vllm:kv_cache_usage_perc", cache.used_blocks / cache.capacity_blocks
        )
        text = set_metric(text, "vllm:prefix_cache_queries_total", float(c.prompt_tokens))
        text = set_metric(text, "vllm:prefix_cache_hits_total", float(c.cached_tokens))
        text = set_metric(text, "vllm:prompt_tokens_total", float(c.prompt_tokens))
        text = set_metric(text, "vllm:prompt_tokens_cached_total", float(c.cached_tokens))
        text = set_metric(text, "vllm:generation_tokens_total", float(c.completion_tokens))
        return web.Response(
            text=text, headers={"Content-Type": "text/plain; version=1.0.0; charset=utf-8"}
        )

    async def _models(self, _request: web.Request) -> web.Response:
        body = clone(self._v1_models)
        for entry in body["data"]:
            put(entry, "id", self.model.name)
            put(entry, "created", int(self.clock.time()))
        return json_response(body)

    def _unknown(self, name: str) -> web.Response:
        """[U] vLLM's 404 for an unknown model was never recorded."""
        error = {
            "message": f"The model `{name}` does not exist.",
            "type": "NotFoundError",
            "param": "model",
            "code": 404,
        }
        return json_response({"error": error}, status=404)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await read_json(request)
        if body is None:
            return bad_request("invalid JSON body")
        if body.get("model") != self.model.name:
            return self._unknown(str(body.get("model")))
        max_tokens = max_tokens_of(body, "max_completion_tokens", "max_tokens")
        name = self.model.name
        async with self.generation(
            self.model, chat_prompt(body), max_tokens, json_asked=wants_json(body)
        ) as gen:
            if body.get("stream") is True:
                return await stream_chat(
                    self, request, self.shapes, gen, name, wants_usage(body), self._rng
                )
            await self.run(gen)
            created = int(self.clock.time())
            return json_response(chat_body(self.shapes, gen, name, created, self._rng))

    async def _completion(self, request: web.Request) -> web.StreamResponse:
        body = await read_json(request)
        if body is None:
            return bad_request("invalid JSON body")
        if body.get("model") != self.model.name:
            return self._unknown(str(body.get("model")))
        prompt = text_prompt(body.get("prompt"))
        name = self.model.name
        async with self.generation(self.model, prompt, max_tokens_of(body, "max_tokens")) as gen:
            if body.get("stream") is True:
                return await stream_completion(
                    self, request, self._completion_stream, gen, name, wants_usage(body), self._rng
                )
            await self.run(gen)
            created = int(self.clock.time())
            return json_response(completion_body(self.shapes, gen, name, created, self._rng))

    async def _agent(self, request: web.Request) -> web.StreamResponse:
        """/v1/messages (+ count_tokens) and /v1/responses, as 0.32.0 recorded them."""
        body = await read_json(request)
        if body is None:
            return bad_request("invalid JSON body")
        if body.get("model") != self.model.name:
            return self._unknown(str(body.get("model")))
        return await serve_agent_route(self, request, self.agent_shapes, body, self.model.name)
