"""Simulated engines: slots, a prompt cache, model loads and a queue, on virtual time.

The numbers are the spec's assumptions ledger (§14) unless a scenario sets others:
prefill 0.5 ms/token, decode 30 ms/token, load 8 s, 10 GB per host, 2 slots. The cache
behaviour is the measured one: Ollama and llama.cpp cache per slot (a slot holds the last
prompt it served, plus its reply, and a request takes the free slot holding the longest
prefix, else the least recently used one), and a prompt counts as cached for others only
once its request ends; vLLM shares one cache across requests (assumed; bounded in tokens).
llama.cpp b11312 also keeps a host-memory prompt cache (`--cache-ram`, in its vendored
common/arg.cpp): a slot's contents are saved there when the slot is taken for a prompt that
doesn't extend them (its get_available_slot saves before loading), and a request restores
the longest match from it. Without it, the issue-15 real-engine run (3 users per
2-slot engine, sticky: 67% of prompt tokens cached) could not have happened.
Ollama 0.34.4 starts one llama-server per loaded model, each with `-np OLLAMA_NUM_PARALLEL`
slots, its own context and its own host prompt cache ("prompt cache is enabled", limited to
its `-c 8192` tokens), and picks slots as llama.cpp does (captures/engines/ollama/v0.34.4/
engine.log): so slots, queue and caches here belong to a model's runner, a load leaves the
other loaded model's cache alone, and an unload (the process ends) drops its own. Memory and
CPU (`contention`, between runners) are the host's.
A llama-server's slots share one batch loop (`sim/batchloop.py`): a prefill beside a decoding slot
runs at its own speed while the decoder waits for the batch, and a prompt sent while another
prefills waits inside the engine for that batch (tests/captures/engines/llamacpp/b11312/
beside_decode.json). Until 2026-12-07 every other busy slot slowed a new prefill 1.5x, a
decoding one too, and never the request already running.
A prompt is a sequence of message hashes (the prefix chain's) with the engine's token count
up to each, so "cached" is the longest common prefix in whole messages.
"""

from __future__ import annotations

import asyncio
import enum
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from pharos.sim.batchloop import BatchLoop

GB_BYTES = 1 << 30


class CacheMode(enum.Enum):
    PER_SLOT = "per_slot"  # llama.cpp, Ollama
    SHARED = "shared"  # vLLM, SGLang


class Flavour(enum.Enum):
    """What the engine reports, as the real ones do (ENGINE-FACTS.md)."""

    LLAMACPP = "llamacpp"  # one model; running, waiting, capacity; no residency
    OLLAMA = "ollama"  # many models; residency and sizes; no running, waiting or capacity
    VLLM = "vllm"  # one model; running and waiting; no capacity


@dataclass(frozen=True)
class HostSpec:
    name: str
    flavour: Flavour = Flavour.LLAMACPP
    models: tuple[str, ...] = ("m",)
    model_gb: tuple[float, ...] = (1.0,)  # size of each model, same order
    memory_gb: float = 10.0
    slots: int = 2  # Ollama: per loaded model (OLLAMA_NUM_PARALLEL)
    prefill_s_per_token: float = 0.0005
    decode_s_per_token: float = 0.030
    load_s: float = 8.0
    contention: float = 0.5
    """Across an Ollama host's runners (processes sharing its CPU): each other runner with work
    under way slows a batch by this share. Inside one llama-server the slots share one batch
    loop (`_BatchLoop`) instead; vLLM: each other running request slows a new one by it."""
    batch_tokens: int = 2048  # llama-server's -b (n_batch): prompt tokens one batch takes
    shared_cache_tokens: int = 32_768
    host_cache_tokens: int = 0  # --cache-ram: slot contents saved to host memory (per model)
    cache_idle_slots: bool = True
    """llama.cpp b11312's --cache-idle-slots (its --help: "save idle slots to the prompt cache
    on new task", default enabled, needs --cache-ram): after each task takes its slot, every
    idle slot is saved to the host cache (server-context.cpp, llama-cpp-python 0.3.36's
    vendored copy with the same help text); without a unified KV (-np 2 set) none is cleared.
    Ollama 0.34.4's llama-server runners too ("idle slots will be saved to prompt cache upon
    starting a new task", captures/engines/ollama/v0.34.4/engine.log)."""

    @property
    def cache_mode(self) -> CacheMode:
        return CacheMode.SHARED if self.flavour is Flavour.VLLM else CacheMode.PER_SLOT


@dataclass(frozen=True)
class Prompt:
    """What an engine sees of a request: message hashes and tokens up to each message."""

    model: str
    hashes: tuple[int, ...]
    cum_tokens: tuple[int, ...]
    completion_tokens: int
    reply_hash: int  # the assistant reply's link, so the next turn finds it cached
    reply_tokens: int

    @property
    def tokens(self) -> int:
        return self.cum_tokens[-1] if self.cum_tokens else 0


@dataclass(frozen=True)
class Served:
    """What the engine reports back, plus what the client saw (seconds from arrival here)."""

    first_token_s: float  # since arrival at the engine: queue + load + prefill
    duration_s: float
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    load_s: float | None  # None: this request loaded nothing
    prefill_s: float  # the engine's own prefill time (llama.cpp prompt_ms, Ollama's duration)
    engine_waited_s: float


@dataclass
class _Slot:
    hashes: tuple[int, ...] = ()
    cum_tokens: tuple[int, ...] = ()
    busy: bool = False
    last_used_s: float = -1.0
    restores: bool = True  # this request may restore from the host cache


SLOT_PROMPT_SIMILARITY = 0.1
"""llama.cpp's --slot-prompt-similarity default: a slot is picked for its prefix only when
it covers more than this share of the new prompt, else the least recently used one is."""
KEEP_SHARE = 0.5
"""llama.cpp saves a slot picked by similarity to the host cache (and restores the best match
from there) only when the new prompt keeps under half of it (f_keep < 0.5)."""


def common_prefix_tokens(
    held: Sequence[int], held_tokens: Sequence[int], prompt: Prompt
) -> tuple[int, int]:
    """(messages, tokens) of the prompt's longest prefix that `held` starts with."""
    matched = 0
    for mine, theirs in zip(held, prompt.hashes, strict=False):
        if mine != theirs:
            break
        matched += 1
    if matched == 0:
        return 0, 0
    return matched, min(held_tokens[matched - 1], prompt.cum_tokens[matched - 1])


@dataclass
class _Runner:
    """One model's server process: its slots, its queue, its host prompt cache."""

    slots: list[_Slot]
    waiters: deque[asyncio.Future[None]] = field(default_factory=deque)
    reserved: int = 0  # free slots handed to woken waiters that haven't run yet
    host_cache: deque[tuple[tuple[int, ...], tuple[int, ...]]] = field(default_factory=deque)
    batches: BatchLoop | None = None

    def free_count(self) -> int:
        return sum(not slot.busy for slot in self.slots) - self.reserved

    def wake_next(self) -> None:
        free_count = self.free_count()
        while free_count > 0 and self.waiters:
            waiter = self.waiters.popleft()
            if waiter.done():
                continue
            waiter.set_result(None)
            self.reserved += 1
            free_count -= 1

    def drop_cache(self) -> None:
        for slot in self.slots:
            slot.hashes, slot.cum_tokens = (), ()
        self.host_cache.clear()


@dataclass
class _Model:
    size_bytes: int
    runner: _Runner
    loaded: bool = False
    loading: asyncio.Event | None = None
    in_flight: int = 0  # requests for it on this host, queued or running: it can't be unloaded
    last_used_s: float = -1.0


@dataclass
class EngineCounts:
    running: int
    waiting: int
    loaded: dict[str, bool]
    loading: dict[str, bool]


@dataclass
class SimEngine:
    spec: HostSpec
    loop_time: asyncio.AbstractEventLoop = field(repr=False)
    loads: int = 0

    def __post_init__(self) -> None:
        self._models: dict[str, _Model] = {
            name: _Model(int(gb * GB_BYTES), _Runner([_Slot() for _ in range(self.spec.slots)]))
            for name, gb in zip(self.spec.models, self.spec.model_gb, strict=True)
        }
        if self.spec.flavour is not Flavour.OLLAMA:
            for model in self._models.values():
                model.loaded = True  # single-model engines start with their model loaded
        self._shared: OrderedDict[int, int] = OrderedDict()  # hash -> tokens up to it
        self._shared_tokens = 0
        self._memory_freed = asyncio.Event()

    # ---- what a scrape reads ----------------------------------------------------------

    def counts(self) -> EngineCounts:
        runners = [m.runner for m in self._models.values()]
        return EngineCounts(
            running=sum(slot.busy for r in runners for slot in r.slots),
            waiting=sum(len(r.waiters) for r in runners),
            loaded={name: m.loaded for name, m in self._models.items()},
            loading={name: m.loading is not None for name, m in self._models.items()},
        )

    def serves(self, model: str) -> bool:
        return model in self._models

    def _busy_slots(self) -> int:
        return sum(slot.busy for m in self._models.values() for slot in m.runner.slots)

    # ---- serving --------------------------------------------------------------------------

    async def serve(self, prompt: Prompt) -> Served:
        now = self.loop_time.time
        arrived_s = now()
        model = self._models[prompt.model]
        model.in_flight += 1
        try:
            load_s = await self._ensure_loaded(prompt.model)
            runner = model.runner
            slot_asked_s = now()
            slot = await self._take_slot(runner, prompt)
            waited_s = now() - slot_asked_s
            try:
                cached = self._cached_tokens(runner, slot, prompt)
                if self.spec.flavour is not Flavour.VLLM:
                    batches = self._batches(runner)
                    # the first token comes with the prompt's last batch
                    job = await batches.run(
                        prompt.tokens - cached,
                        prompt.completion_tokens - 1,
                        runner.slots.index(slot),
                    )
                    prefill_s = job.prefill_s
                    first_token_s = now() - arrived_s
                    await job.done
                else:
                    others = self._busy_slots() - 1
                    slowdown = 1.0 + self.spec.contention * max(0, others)
                    prefill_s = (prompt.tokens - cached) * self.spec.prefill_s_per_token * slowdown
                    await asyncio.sleep(prefill_s)
                    first_token_s = now() - arrived_s
                    if self.spec.cache_mode is CacheMode.SHARED:
                        self._remember_shared(prompt)
                    decode_s = prompt.completion_tokens * self.spec.decode_s_per_token * slowdown
                    await asyncio.sleep(decode_s)
            finally:
                self._release_slot(runner, slot, prompt)
        finally:
            model.in_flight -= 1
            model.last_used_s = now()
            if model.in_flight == 0:
                self._memory_freed.set()
        return Served(
            first_token_s=first_token_s,
            duration_s=now() - arrived_s,
            prompt_tokens=prompt.tokens,
            cached_tokens=cached,
            completion_tokens=prompt.completion_tokens,
            load_s=load_s,
            prefill_s=prefill_s,
            engine_waited_s=waited_s,
        )

    def _batches(self, runner: _Runner) -> BatchLoop:
        if runner.batches is None:
            spec = self.spec
            runner.batches = BatchLoop(
                self.loop_time,
                batch_tokens=spec.batch_tokens,
                prefill_s_per_token=spec.prefill_s_per_token,
                decode_s_per_token=spec.decode_s_per_token,
                slowdown=self.cross_runner_slowdown,
            )
        return runner.batches

    def cross_runner_slowdown(self, mine: BatchLoop) -> float:
        """An Ollama host's other runners with work under way share its CPU."""
        others = sum(
            1
            for m in self._models.values()
            if m.runner.batches is not None
            and m.runner.batches is not mine
            and m.runner.batches.active
        )
        return 1.0 + self.spec.contention * others

    async def _take_slot(self, runner: _Runner, prompt: Prompt) -> _Slot:
        """FIFO: a request arriving while others wait queues behind them (engine Waiting)."""
        if runner.waiters or runner.free_count() <= 0:
            waiter: asyncio.Future[None] = self.loop_time.create_future()
            runner.waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter in runner.waiters:
                    runner.waiters.remove(waiter)
                elif waiter.done() and not waiter.cancelled():
                    runner.reserved -= 1
                    runner.wake_next()
                raise
            runner.reserved -= 1
        free = [slot for slot in runner.slots if not slot.busy]
        if self.spec.flavour is Flavour.VLLM:
            best = free[0]
        else:
            best = self._llamacpp_slot(runner, free, prompt)
        best.busy = True
        if self.spec.flavour is not Flavour.VLLM and self.spec.cache_idle_slots:
            for slot in runner.slots:
                if not slot.busy:
                    self._save_to_host(runner, slot)
        return best

    def _llamacpp_slot(self, runner: _Runner, free: list[_Slot], prompt: Prompt) -> _Slot:
        """get_available_slot in llama.cpp's server-context.cpp: the slot whose prefix covers
        the largest share (> SLOT_PROMPT_SIMILARITY) of the prompt, else the least recently
        used; the host cache is updated (the slot saved, the best match restored) on the LRU
        path always and on the similarity path when under KEEP_SHARE of the slot is kept."""
        best, best_share = None, SLOT_PROMPT_SIMILARITY
        for slot in free:
            share = self._slot_match(slot, prompt) / prompt.tokens if prompt.tokens else 0.0
            if slot.cum_tokens and share > best_share:
                best, best_share = slot, share
        if best is None:
            best = min(free, key=lambda s: s.last_used_s)
            update = True
        else:
            update = self._slot_match(best, prompt) < KEEP_SHARE * best.cum_tokens[-1]
        if update:
            self._save_to_host(runner, best)
        best.restores = update
        return best

    def _slot_match(self, slot: _Slot, prompt: Prompt) -> int:
        return common_prefix_tokens(slot.hashes, slot.cum_tokens, prompt)[1]

    def _release_slot(self, runner: _Runner, slot: _Slot, prompt: Prompt) -> None:
        slot.busy = False
        slot.last_used_s = self.loop_time.time()
        if self.spec.cache_mode is CacheMode.PER_SLOT:
            slot.hashes = (*prompt.hashes, prompt.reply_hash)
            slot.cum_tokens = (*prompt.cum_tokens, prompt.tokens + prompt.reply_tokens)
        runner.wake_next()

    def _cached_tokens(self, runner: _Runner, slot: _Slot, prompt: Prompt) -> int:
        if self.spec.cache_mode is CacheMode.PER_SLOT:
            in_slot = common_prefix_tokens(slot.hashes, slot.cum_tokens, prompt)[1]
            in_host = max(
                (
                    common_prefix_tokens(h, t, prompt)[1]
                    for h, t in runner.host_cache
                    if slot.restores
                ),
                default=0,
            )
            return max(in_slot, in_host)
        cached = 0
        for link, tokens in zip(prompt.hashes, prompt.cum_tokens, strict=True):
            if link not in self._shared:
                break
            self._shared.move_to_end(link)
            cached = tokens
        return cached

    def _remember_shared(self, prompt: Prompt) -> None:
        previous = 0
        for link, tokens in zip(prompt.hashes, prompt.cum_tokens, strict=True):
            if link not in self._shared:
                self._shared[link] = tokens - previous
                self._shared_tokens += tokens - previous
            previous = tokens
        while self._shared_tokens > self.spec.shared_cache_tokens and self._shared:
            _, tokens = self._shared.popitem(last=False)
            self._shared_tokens -= tokens

    async def _ensure_loaded(self, name: str) -> float | None:
        """Load the model if it's cold (evicting idle ones to fit); None if it was loaded."""
        model = self._models[name]
        if model.loaded:
            return None
        started_s = self.loop_time.time()
        while not model.loaded:
            if model.loading is not None:
                await model.loading.wait()
                continue
            if not self._make_room(model.size_bytes):
                self._memory_freed.clear()
                await self._memory_freed.wait()
                continue
            model.loading = asyncio.Event()
            self.loads += 1
            await asyncio.sleep(self.spec.load_s)
            model.loaded = True
            model.loading.set()
            model.loading = None
        return self.loop_time.time() - started_s

    def _make_room(self, size_bytes: int) -> bool:
        memory = int(self.spec.memory_gb * GB_BYTES)
        used = sum(m.size_bytes for m in self._models.values() if m.loaded or m.loading)
        if used + size_bytes <= memory:
            return True
        idle = sorted(
            (m for m in self._models.values() if m.loaded and m.in_flight == 0),
            key=lambda m: m.last_used_s,
        )
        for model in idle:
            model.loaded = False
            model.runner.drop_cache()  # its server process ends
            used -= model.size_bytes
            if used + size_bytes <= memory:
                return True
        return False

    def _save_to_host(self, runner: _Runner, slot: _Slot) -> None:
        """server_prompt_cache::alloc: a prompt the cache already holds whole is skipped, and
        entries the new one contains are dropped; the oldest go first when over the limit."""
        if self.spec.host_cache_tokens <= 0 or not slot.hashes:
            return
        held = slot.hashes
        if any(hashes[: len(held)] == held for hashes, _ in runner.host_cache):
            return
        runner.host_cache = deque(
            (hashes, tokens)
            for hashes, tokens in runner.host_cache
            if held[: len(hashes)] != hashes
        )
        runner.host_cache.append((slot.hashes, slot.cum_tokens))
        while sum(t[-1] for _, t in runner.host_cache) > self.spec.host_cache_tokens:
            runner.host_cache.popleft()
