"""FakeLlamaCpp: llama.cpp llama-server v0.5.0 (build b11146), every body cloned from its
capture (templates/llamacpp-v0.5.0). One model, always loaded, `slots` slots with
per-slot prompt caches; running/waiting show in /metrics and /slots as recorded.
"""

from __future__ import annotations

import random
from typing import Any

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
from pharos.fakeengine.render import (
    Json,
    clone,
    put,
    random_id,
    set_metric,
    template_bytes,
    template_json,
)
from pharos.fakeengine.replies import wants_json

DIR = "llamacpp-v0.5.0"
STREAMS_DIR = "llamacpp-b11312"
"""v0.5.0's recording has no streamed completion: b11312's (recorded here) is the shape."""


def _llama_id(rng: random.Random) -> str:
    return "chatcmpl-" + random_id(rng, 32)


def _recorded_404_paths() -> list[str]:
    rows = template_bytes(DIR, "paths.tsv").decode().splitlines()
    return [row.split("\t")[0] for row in rows if row.split("\t")[1:2] == ["404"]]


class FakeLlamaCpp(FakeEngine):
    def __init__(
        self,
        model: str = "qwen2.5-0.5b",
        *,
        ledger: Ledger = DEFAULT_LEDGER,
        clock: Clock | None = None,
        sleep: Sleep | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__([FakeModel(model)], ledger=ledger, clock=clock, sleep=sleep)
        self.model = self.models[model]
        self._rng = random.Random(seed)
        self.shapes = OpenAIShapes(DIR, chat_id=_llama_id, completion_id=_llama_id)
        self._props: Json = template_json(DIR, "props")
        self._slot_unused: Json = template_json(DIR, "slots-loaded")[0]
        self._slot_used: Json = template_json(DIR, "slots-busy")[0]
        self._metrics = template_bytes(DIR, "metrics").decode()
        self._v1_models: Json = template_json(DIR, "v1_models")
        self._refusal = template_bytes(DIR, "openai-embeddings.json")
        self.agent_shapes = AgentShapes(STREAMS_DIR)
        self._completion_stream = CompletionStreamShape.recorded(STREAMS_DIR, _llama_id)

    def routes(self) -> list[web.RouteDef]:
        not_found = [web.get(path, self._not_found) for path in _recorded_404_paths()]
        return [
            web.get("/health", self._health),
            web.get("/props", self._props_route),
            web.get("/slots", self._slots),
            web.get("/metrics", self._metrics_route),
            web.get("/models", self._models),
            web.get("/v1/models", self._models),
            web.post("/v1/chat/completions", self._chat),
            web.post("/v1/completions", self._completion),
            web.post("/v1/messages", self._agent),
            web.post("/v1/messages/count_tokens", self._agent),
            web.post("/v1/responses", self._agent),
            web.post("/v1/embeddings", self._embeddings),
            *not_found,
        ]

    async def _health(self, _request: web.Request) -> web.Response:
        """Status 200 recorded (paths.tsv); the body was not: [U] llama.cpp's `{"status":"ok"}`."""
        return json_response({"status": "ok"})

    async def _not_found(self, _request: web.Request) -> web.Response:
        """Status 404 recorded (paths.tsv, application/json); the body was not [U]."""
        error = {"code": 404, "message": "File Not Found", "type": "not_found_error"}
        return json_response({"error": error}, status=404)

    async def _props_route(self, _request: web.Request) -> web.Response:
        props = clone(self._props)
        put(props, "total_slots", self.ledger.slots)
        put(props, "model_alias", self.model.name)
        return json_response(props)

    async def _slots(self, _request: web.Request) -> web.Response:
        runner = self.runners[self.model.name]
        slots: list[Any] = []
        for slot in range(self.ledger.slots):
            if not runner.caches.used(slot):
                entry = clone(self._slot_unused)
            else:
                entry = clone(self._slot_used)
                task, total, cached = runner.slot_tasks.get(slot, (0, 0, 0))
                put(entry, "id_task", task)
                put(entry, "n_prompt_tokens", total)
                put(entry, "n_prompt_tokens_processed", total - cached)
                put(entry, "n_prompt_tokens_cache", cached)
            put(entry, "id", slot)
            put(entry, "is_processing", runner.caches.busy(slot))
            slots.append(entry)
        return json_response(slots)

    async def _metrics_route(self, _request: web.Request) -> web.Response:
        c = self.counters
        text = self._metrics
        text = set_metric(text, "llamacpp:prompt_tokens_total", c.prompt_tokens_prefilled)
        text = set_metric(text, "llamacpp:prompt_tokens_cached_total", c.cached_tokens)
        prompt_s = round(c.prompt_tokens_prefilled * self.ledger.prefill_s_per_token, 6)
        text = set_metric(text, "llamacpp:prompt_seconds_total", prompt_s)
        text = set_metric(text, "llamacpp:tokens_predicted_total", c.completion_tokens)
        text = set_metric(text, "llamacpp:requests_processing", self.running())
        text = set_metric(text, "llamacpp:requests_deferred", self.waiting())
        return web.Response(
            text=text, headers={"Content-Type": "text/plain; version=0.0.4"}
        )  # content type as recorded in paths.tsv

    async def _models(self, _request: web.Request) -> web.Response:
        body = clone(self._v1_models)
        for entry in body.get("models", []):
            put(entry, "name", self.model.name)
            put(entry, "model", self.model.name)
        for entry in body.get("data", []):
            put(entry, "id", self.model.name)
            put(entry, "aliases", [self.model.name])
        return json_response(body)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        """Any model name is served by the loaded model (b8772's unknown-model.txt: 200)."""
        body = await read_json(request)
        if body is None:
            return bad_request("invalid JSON body")
        max_tokens = max_tokens_of(body, "max_completion_tokens", "max_tokens", "n_predict")
        name = self.model.name
        async with self.generation(
            self.model,
            chat_prompt(body, with_tools=self.ledger.tools_in_prompt),
            max_tokens,
            json_asked=wants_json(body),
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
        prompt = text_prompt(body.get("prompt"))
        name = self.model.name
        async with self.generation(self.model, prompt, max_tokens_of(body, "max_tokens")) as gen:
            if body.get("stream") is True:
                return await stream_completion(
                    self, request, self._completion_stream, gen, name, True, self._rng
                )
            await self.run(gen)
            created = int(self.clock.time())
            return json_response(completion_body(self.shapes, gen, name, created, self._rng))

    async def _embeddings(self, _request: web.Request) -> web.Response:
        """The recorded refusal: a chat server started without --embeddings answers 501."""
        return web.Response(body=self._refusal, status=501, content_type="application/json")

    async def _agent(self, request: web.Request) -> web.StreamResponse:
        """/v1/messages (+ count_tokens) and /v1/responses, as b11312 recorded them."""
        body = await read_json(request)
        if body is None:
            return bad_request("invalid JSON body")
        return await serve_agent_route(self, request, self.agent_shapes, body, self.model.name)
