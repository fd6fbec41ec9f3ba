"""llama-server's batch loop on virtual time (its update_slots): the slots of one server share
it, so a prefill beside a decoding slot runs at its own speed while the decoder waits for the
batch, and a prompt sent while another prefills waits inside the engine for that batch
(tests/captures/engines/llamacpp/b11312/beside_decode.json). sim/engines.py gives each runner
one."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from dataclasses import dataclass

DECODE_STEP_SHARE = 0.79
"""A decode step of k streams takes 1 + 0.79 (k - 1) of one stream's: ENGINE-FACTS, b11312 with
SmolLM2, decode ~100 tok/s for one stream and ~112 for two together (2 / 1.12 = 1.79)."""


@dataclass
class Job:
    """One request's work in a runner's batch loop."""

    prompt_left: int
    decode_left: int
    first: asyncio.Future[None]
    done: asyncio.Future[None]
    slot: int  # its slot's id: update_slots takes prompt tokens slot by slot in id order
    started_s: float = -1.0  # its first prompt tokens' batch began (llama.cpp's prompt_ms from)
    prefill_s: float = 0.0


class BatchLoop:
    """llama-server's update_slots on virtual time: each iteration is one batch holding every
    decoding slot's next token and prompt tokens of the slots still prefilling (slot by slot in
    id order, up to `batch_tokens`); a prompt that arrives while a batch computes joins the
    next one.
    So a prefill beside a decoding slot runs at its own speed and the decoder waits for the
    batch, and one sent while another prefills waits for that batch first (the wait is in its
    TTFT, not in its prompt_ms). Between prompts the decoders step together (fluid: the next
    event computed, not each step; an arriving prompt waits for the step under way)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        *,
        batch_tokens: int,
        prefill_s_per_token: float,
        decode_s_per_token: float,
        slowdown: Callable[[BatchLoop], float],
    ) -> None:
        """`slowdown(self)`: how much slower a batch runs beside the host's other runners."""
        self._loop_time = loop
        self._batch_tokens = batch_tokens
        self._prefill_s_per_token = prefill_s_per_token
        self._decode_s_per_token = decode_s_per_token
        self._slowdown = slowdown
        self._prefilling: list[Job] = []
        self._decoding: list[Job] = []
        self._arrived: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def active(self) -> bool:
        return bool(self._prefilling or self._decoding)

    async def run(self, prompt_tokens: int, decode_tokens: int, slot: int) -> Job:
        """Queue the work; returns the job once its first token is out (await job.done)."""
        loop = self._loop_time
        job = Job(prompt_tokens, decode_tokens, loop.create_future(), loop.create_future(), slot)
        self._prefilling.append(job)
        self._prefilling.sort(key=lambda j: j.slot)
        if self._arrived is not None:
            self._arrived.set()
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._loop())
        await job.first
        return job

    async def _loop(self) -> None:
        now = self._loop_time.time
        while self._prefilling or self._decoding:
            slower = self._slowdown(self)
            if self._prefilling:
                budget = max(1, self._batch_tokens - len(self._decoding))
                chunk: list[tuple[Job, int]] = []
                for job in self._prefilling:
                    if budget <= 0:
                        break
                    take = min(job.prompt_left, budget)
                    chunk.append((job, take))
                    budget -= take
                tokens = sum(take for _, take in chunk) + len(self._decoding)
                began_s = now()
                for job, _ in chunk:
                    if job.started_s < 0:
                        job.started_s = began_s
                await asyncio.sleep(tokens * self._prefill_s_per_token * slower)
                self._step_decoders(1)
                ended_s = now()
                for job, take in chunk:
                    job.prompt_left -= take
                    if job.prompt_left <= 0:
                        self._prefilling.remove(job)
                        job.prefill_s = ended_s - job.started_s
                        job.first.set_result(None)
                        if job.decode_left > 0:
                            self._decoding.append(job)
                        else:
                            job.done.set_result(None)
                continue
            await self._decode_until_arrival(slower)

    async def _decode_until_arrival(self, slower: float) -> None:
        streams = len(self._decoding)
        step_s = self._decode_s_per_token * (1 + DECODE_STEP_SHARE * (streams - 1)) * slower
        steps = min(job.decode_left for job in self._decoding)
        if step_s <= 0:
            self._step_decoders(steps)
            return
        self._arrived = asyncio.Event()
        began_s = self._loop_time.time()
        try:
            await asyncio.wait_for(self._arrived.wait(), steps * step_s)
            elapsed_s = self._loop_time.time() - began_s
            done = min(steps, max(1, math.ceil(elapsed_s / step_s - 1e-9)))
            await asyncio.sleep(max(0.0, done * step_s - elapsed_s))  # the step under way ends
        except TimeoutError:
            done = steps
        finally:
            self._arrived = None
        self._step_decoders(done)

    def _step_decoders(self, steps: int) -> None:
        for job in list(self._decoding):
            job.decode_left -= steps
            if job.decode_left <= 0:
                self._decoding.remove(job)
                job.done.set_result(None)
