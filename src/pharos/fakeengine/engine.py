"""What every fake engine shares: models, loading, slots with an engine-side queue, the
synthetic cache and latency model, hold, kill and counters. The HTTP shapes live in
the per-engine modules, cloned from captures.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field

from aiohttp import ClientConnectionResetError, web

from pharos.clock import Clock, SystemClock
from pharos.fakeengine.cache import BlockCache, SlotCaches, prompt_tokens
from pharos.fakeengine.ledger import DEFAULT_LEDGER, Ledger
from pharos.fakeengine.replies import WORDS, reply_words

Sleep = Callable[[float], Awaitable[None]]


def scaled_sleep(speed: float = 1.0) -> Sleep:
    """Real asyncio.sleep, `speed` times faster (a simulator runs fakes sped up)."""

    async def sleep(seconds_s: float) -> None:
        await asyncio.sleep(seconds_s / speed)

    return sleep


async def no_sleep(_seconds_s: float) -> None:
    """For tests: every synthetic delay passes at once (still yields to the loop)."""
    await asyncio.sleep(0)


@dataclass(frozen=True, slots=True)
class FakeModel:
    name: str
    size_bytes: int = 397_821_319  # ollama v0.34.4 api_tags: qwen2.5:0.5b file size
    memory_bytes: int = 721_231_542  # ollama v0.34.4 api_ps: qwen2.5:0.5b size when loaded
    embedding: bool = False


@dataclass
class Counters:
    """For tests: what the fake has seen and done."""

    requests: int = 0
    by_path: collections.Counter[str] = field(default_factory=collections.Counter)
    loads: int = 0
    unloads: int = 0
    prompt_tokens: int = 0
    prompt_tokens_prefilled: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    slept_s: float = 0.0


class Killed(ConnectionResetError):
    pass


class Runner:
    """One loaded model: its slots and the engine-side queue in front of them."""

    def __init__(
        self,
        model: FakeModel,
        slots: int,
        ledger: Ledger,
        now_s: float,
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        self.model = model
        self._on_change = on_change
        self.caches = SlotCaches(slots, ledger.bytes_per_token)
        self.running = 0
        self.queue: collections.deque[tuple[bytes, asyncio.Future[tuple[int, int]]]] = (
            collections.deque()
        )
        self.last_used_s = now_s
        self.last_used_wall = 0.0
        self.slot_tasks: dict[int, tuple[int, int, int]] = {}  # slot -> (task, prompt, cached)
        self.task_seq = 0

    @property
    def waiting(self) -> int:
        return len(self.queue)

    @property
    def inflight(self) -> int:
        return self.running + self.waiting

    async def acquire(self, prompt: bytes) -> tuple[int, int]:
        if self.caches.free > 0 and not self.queue:
            self.running += 1
            self._on_change()
            return self.caches.take(prompt)
        future: asyncio.Future[tuple[int, int]] = asyncio.get_running_loop().create_future()
        entry = (prompt, future)
        self.queue.append(entry)
        self._on_change()
        try:
            return await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release(future.result()[0])
            else:
                self.queue.remove(entry)
            raise

    def release(self, slot: int) -> None:
        self.caches.give_back(slot)
        self.running -= 1
        while self.queue and self.caches.free > 0:
            prompt, future = self.queue.popleft()
            if future.cancelled():
                continue
            self.running += 1
            future.set_result(self.caches.take(prompt))
        self._on_change()


@dataclass
class Generation:
    """One admitted request: the numbers its reply reports."""

    model: FakeModel
    prompt_tokens: int
    cached_tokens: int
    max_tokens: int | None
    load_s: float
    prefill_s: float
    created_cache_tokens: int = 0
    completion_tokens: int = 0
    decode_s: float = 0.0
    text: str = ""
    words: tuple[str, ...] = WORDS
    natural_stop: bool = True

    @property
    def stopped_by_limit(self) -> bool:
        if self.max_tokens is None:
            return False
        return not self.natural_stop or self.max_tokens <= len(self.words)

    @property
    def finish_reason(self) -> str:
        return "length" if self.stopped_by_limit else "stop"

    @property
    def planned_tokens(self) -> int:
        if self.max_tokens is None:
            return len(self.words)
        return self.max_tokens if self.stopped_by_limit else len(self.words)


class FakeEngine:
    """Base of FakeOllama, FakeLlamaCpp and FakeVLLM."""

    shared_cache = False  # vLLM: one block cache instead of per-slot caches
    loads_models = False  # Ollama: models load on demand and unload under memory pressure

    def __init__(
        self,
        models: list[FakeModel],
        *,
        ledger: Ledger = DEFAULT_LEDGER,
        clock: Clock | None = None,
        sleep: Sleep | None = None,
    ) -> None:
        if not models:
            raise ValueError("a fake engine serves at least one model")
        self.models = {m.name: m for m in models}
        self.ledger = ledger
        self.clock = clock if clock is not None else SystemClock()
        self._sleep = sleep if sleep is not None else scaled_sleep()
        self.counters = Counters()
        self.runners: dict[str, Runner] = {}
        self._loading: dict[str, asyncio.Future[Runner]] = {}
        self.block_cache = BlockCache(
            ledger.cache_block_tokens, ledger.shared_cache_tokens, ledger.bytes_per_token
        )
        self._open = asyncio.Event()
        self._open.set()
        self._changed = asyncio.Event()  # set whenever a request takes a slot, queues or ends
        self._hold_after_tokens = 0
        self._killed = False
        self._inflight: set[asyncio.BaseTransport] = set()
        self._site: web.TCPSite | None = None
        if not self.loads_models:
            for model in models:
                self.runners[model.name] = Runner(
                    model, ledger.slots, ledger, self.clock.now(), self._changed.set
                )

    # ---- controls for tests -------------------------------------------------------------

    def hold(self, *, after_tokens: int = 0) -> None:
        """Requests stop after `after_tokens` tokens and keep their slot until release()."""
        self._hold_after_tokens = after_tokens
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    async def until(self, condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
        """For tests: wait (bounded) until `condition()` holds, e.g. `lambda: fake.running()
        == 2`; re-checked whenever a request takes a slot, queues or gives its slot back."""
        async with asyncio.timeout(timeout_s):
            while not condition():
                self._changed.clear()
                await self._changed.wait()

    async def kill(self) -> None:
        """Close the listener and cut every in-flight reply mid-stream (no clean end)."""
        self._killed = True
        self._open.set()
        for transport in list(self._inflight):
            if isinstance(transport, asyncio.WriteTransport):
                transport.abort()
        if self._site is not None:
            server = self._site._runner.server
            await self._site.stop()
            # Idle keep-alive connections too: a dead engine refuses pooled connections.
            for handler in list(server.connections) if server is not None else ():
                handler.force_close()

    @property
    def killed(self) -> bool:
        return self._killed

    def running(self, model: str | None = None) -> int:
        return sum(r.running for n, r in self.runners.items() if model in (None, n))

    def waiting(self, model: str | None = None) -> int:
        return sum(r.waiting for n, r in self.runners.items() if model in (None, n))

    # ---- the synthetic model ------------------------------------------------------------

    async def sleep(self, seconds_s: float) -> None:
        if seconds_s <= 0:
            return
        self.counters.slept_s += seconds_s
        await self._sleep(seconds_s)

    def loaded(self) -> dict[str, Runner]:
        """Runners still loaded: an idle one past keep-alive has gone cold."""
        if self.loads_models:
            now_s = self.clock.now()
            for name, runner in list(self.runners.items()):
                if runner.inflight == 0 and now_s - runner.last_used_s >= self.ledger.keep_alive_s:
                    del self.runners[name]
                    self.counters.unloads += 1
        return self.runners

    async def _runner_for(self, model: FakeModel) -> tuple[Runner, float]:
        """(runner, load seconds spent) — loads a cold model, unloading LRU idle ones."""
        runner = self.loaded().get(model.name)
        if runner is not None:
            return runner, 0.0
        pending = self._loading.get(model.name)
        if pending is not None:
            return await asyncio.shield(pending), 0.0
        future: asyncio.Future[Runner] = asyncio.get_running_loop().create_future()
        self._loading[model.name] = future
        try:
            self._make_room(model.memory_bytes)
            await self.sleep(self.ledger.load_s)
            runner = Runner(
                model, self.ledger.slots, self.ledger, self.clock.now(), self._changed.set
            )
            self.runners[model.name] = runner
            self.counters.loads += 1
            future.set_result(runner)
            return runner, self.ledger.load_s
        except BaseException as error:
            future.set_exception(error)
            future.exception()  # retrieved: waiters re-raise it, nobody else must
            raise
        finally:
            del self._loading[model.name]

    def _make_room(self, needed_bytes: int) -> None:
        used = sum(r.model.memory_bytes for r in self.runners.values())
        for name, runner in sorted(self.runners.items(), key=lambda kv: kv[1].last_used_s):
            if used + needed_bytes <= self.ledger.memory_bytes:
                return
            if runner.inflight == 0:
                del self.runners[name]
                self.counters.unloads += 1
                used -= runner.model.memory_bytes

    @contextlib.asynccontextmanager
    async def generation(
        self, model: FakeModel, prompt: bytes, max_tokens: int | None, *, json_asked: bool = False
    ) -> AsyncIterator[Generation]:
        """Admit one request: load if cold, queue for a slot, prefill the uncached tokens."""
        if self._killed:
            raise Killed("the fake engine was killed")
        runner, load_s = await self._runner_for(model)
        runner.last_used_s = self.clock.now()
        slot, slot_cached = await runner.acquire(prompt)
        try:
            total = prompt_tokens(prompt, self.ledger.bytes_per_token)
            cached = self.block_cache.lookup(prompt) if self.shared_cache else slot_cached
            uncached = total - cached
            runner.task_seq += 1
            runner.slot_tasks[slot] = (runner.task_seq, total, cached)
            created = self.block_cache.store(prompt) if self.shared_cache else 0
            self.counters.prompt_tokens += total
            self.counters.cached_tokens += cached
            self.counters.prompt_tokens_prefilled += uncached
            prefill_s = uncached * self.ledger.prefill_s_per_token
            await self.sleep(prefill_s)
            words = reply_words(prompt, json_asked=json_asked)
            yield Generation(
                model,
                total,
                cached,
                max_tokens,
                load_s,
                prefill_s,
                created,
                words=words,
                natural_stop=self.ledger.natural_stop,
            )
        finally:
            runner.release(slot)
            runner.last_used_s = self.clock.now()
            runner.last_used_wall = self.clock.time()

    async def tokens(self, generation: Generation) -> AsyncIterator[str]:
        """The generated tokens, paced by the decode rate and stopped by hold()."""
        for index in range(generation.planned_tokens):
            if index >= self._hold_after_tokens and not self._open.is_set():
                await self._open.wait()
            if self._killed:
                raise Killed("the fake engine was killed")
            await self.sleep(self.ledger.decode_s_per_token)
            word = generation.words[index % len(generation.words)]
            generation.text += word
            generation.decode_s += self.ledger.decode_s_per_token
            generation.completion_tokens += 1
            self.counters.completion_tokens += 1
            yield word
        if not generation.stopped_by_limit:
            generation.completion_tokens += 1  # the end-of-sequence token, as recorded (10)
            self.counters.completion_tokens += 1

    async def run(self, generation: Generation) -> str:
        async for _ in self.tokens(generation):
            pass
        return generation.text

    # ---- HTTP ---------------------------------------------------------------------------

    def routes(self) -> list[web.RouteDef]:
        raise NotImplementedError

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._track])
        app.add_routes(self.routes())
        return app

    @web.middleware
    async def _track(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        self.counters.by_path[request.path] += 1
        if request.method == "POST":
            self.counters.requests += 1
        transport = request.transport
        if transport is not None:
            self._inflight.add(transport)
        try:
            return await handler(request)
        except (ConnectionResetError, ClientConnectionResetError) as gone:
            # The client left mid-reply (or kill() cut it): an engine just stops writing.
            # Re-raised as cancellation, which aiohttp ends quietly instead of logging a
            # traceback for every dropped stream.
            raise asyncio.CancelledError from gone
        finally:
            if transport is not None:
                self._inflight.discard(transport)


async def read_json(request: web.Request) -> dict[str, object] | None:
    try:
        value = json.loads(await request.read())
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def chat_prompt(body: dict[str, object], *, with_tools: bool = True) -> bytes:
    """Decoded prompt text of a chat request: tools (prompt text ahead of the messages,
    spec ledger: measured; left out for a template that drops them), then each message's
    role and content."""
    parts: list[str] = []
    tools = body.get("tools")
    if tools and with_tools:
        parts.append(json.dumps(tools, ensure_ascii=False, separators=(",", ":")))
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False, separators=(",", ":"))
        parts.append(f"{message.get('role', '')}\n{content}\n")
    return "".join(parts).encode()


def text_prompt(value: object) -> bytes:
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, list):
        return "\n".join(v if isinstance(v, str) else json.dumps(v) for v in value).encode()
    return b""


def max_tokens_of(body: dict[str, object], *names: str) -> int | None:
    for name in names:
        value = body.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    options = body.get("options")
    if isinstance(options, dict):
        value = options.get("num_predict")
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def wants_usage(body: dict[str, object]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def iter_inputs(value: object) -> Iterator[bytes]:
    if isinstance(value, list):
        for item in value:
            yield text_prompt(item)
    else:
        yield text_prompt(value)
