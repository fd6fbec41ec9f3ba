"""Pharos's own overhead on a 32 KiB chat to a warm fake vLLM (spec §15). Reported, never asserted.

Three numbers from one run, the direct and routed requests interleaved so they
share the machine's noise:

- overhead: Pharos's own time before the first upstream send (auth, admission,
  body read, prefix lookup, routing; queue wait excluded), read from
  RequestDone.overhead_s: the value behind pharos_overhead_seconds. Budget: p99 < 2 ms.
- ttft-direct: client -> fake engine, time to the first body byte.
- ttft-pharos: client -> Pharos -> fake engine, time to the first body byte.

Pharos's event-loop lag is compare.py's (`make bench-compare`): there Pharos runs in its own
process, here its loop shares this process (and the GIL) with the client's.

The fake engine runs in a helper subprocess (no synthetic delays), Pharos in a
thread with its own event loop, the client in the main thread: three loops, as in
a deployment, on one machine.

Run: .venv/bin/python benchmarks/bench_proxy.py [--requests N] [--warmup N]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

import aiohttp

from pharos.cmd.runtime import Pharos, RuntimeOptions, running
from pharos.config import Backend, Config
from pharos.engine.types import Kind
from pharos.proxy.done import RequestDone

MODEL = "qwen2.5-0.5b"
BODY_BYTES = 32 * 1024

_SNIPPETS = (
    "Here is the function I wrote yesterday:\n```python\ndef merge(a, b):\n"
    "    return {**a, **b}\n```\nWhy does it drop keys?",
    'The log said: {"level":"error","msg":"timeout after 30s","path":"/v1/chat"}\t(retry 3)',
    "Résumé des étapes : télécharger, vérifier la somme, installer — puis redémarrer.",
    "请把这段话翻译成英文，并保持原来的语气。谢谢！",
    "Can you compare these two approaches?\n1. a queue per key\n2. one shared queue\n",
    'Thanks, that worked. One more question about "quotes" and back\\slashes.',
    "Привет! Как настроить таймаут для длинных ответов?",
    "| col a | col b |\n|---|---|\n| 1 | 2 |\nWhat does this table say about latency?",
)


def chat_body(variant: int, max_tokens: int | None = None) -> bytes:
    """A realistic ~32 KiB streamed chat: a system prompt and many mixed turns. `max_tokens`:
    sent as the chat's limit (compare.py's fake runs every reply to it), None: no limit."""
    messages: list[dict[str, str]] = [
        {"role": "system", "content": "You are a helpful assistant for a small team. " * 8}
    ]
    turn = 0
    while True:
        role = "user" if turn % 2 == 0 else "assistant"
        text = _SNIPPETS[turn % len(_SNIPPETS)]
        messages.append({"role": role, "content": f"{text} (turn {turn})"})
        encoded = json.dumps({"model": MODEL, "stream": True, "messages": messages})
        if len(encoded.encode()) >= BODY_BYTES - 300:
            break
        turn += 1
    messages.append({"role": "user", "content": f"And now the last question, number {variant}?"})
    body: dict[str, object] = {"model": MODEL, "stream": True, "messages": messages}
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    return json.dumps(body).encode()


# ---- the fake engine, in a helper subprocess ---------------------------------------------


def run_fake(slots: int, run_to_max: bool) -> None:
    from pharos.fakeengine import FakeVLLM, no_sleep, serve
    from pharos.fakeengine.ledger import Ledger

    ledger = Ledger(slots=slots, natural_stop=not run_to_max)

    async def main() -> None:
        async with serve(FakeVLLM(ledger=ledger, sleep=no_sleep)) as url:
            print(url, flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

    with contextlib.suppress(ImportError):
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    asyncio.run(main())


# ---- Pharos, in a thread with its own loop -------------------------------------------------


class PharosThread:
    def __init__(self, engine_url: str) -> None:
        self.overheads_s: list[float] = []
        self.pharos: Pharos | None = None
        self._engine_url = engine_url
        self._base: str | None = None
        self._started = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="pharos", daemon=True)

    def _on_done(self, done: RequestDone) -> None:
        if done.overhead_s is not None:
            self.overheads_s.append(done.overhead_s)

    def _run(self) -> None:
        try:
            import uvloop

            loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
        except ImportError:
            loop = asyncio.new_event_loop()
        self._loop = loop
        loop.run_until_complete(self._main())

    async def _main(self) -> None:
        config = Config(backends=(Backend(url=self._engine_url, kind=Kind.VLLM),))
        pharos = Pharos(config, options=RuntimeOptions(on_done=self._on_done))
        self.pharos = pharos
        self._stop = asyncio.Event()
        async with running(pharos) as base:
            if not await pharos.wait_ready(15):
                raise SystemExit("Pharos did not finish its first scrape round")
            self._base = base
            self._started.set()
            await self._stop.wait()

    def start(self) -> str:
        self._thread.start()
        if not self._started.wait(30) or self._base is None:
            raise SystemExit("Pharos did not start")
        return self._base

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


# ---- the client ---------------------------------------------------------------------------


async def first_byte_s(session: aiohttp.ClientSession, url: str, body: bytes) -> float:
    started = time.perf_counter()
    async with session.post(
        url, data=body, headers={"Content-Type": "application/json"}
    ) as response:
        await response.content.readany()
        elapsed = time.perf_counter() - started
        await response.read()
        if response.status != 200:
            raise SystemExit(f"{url} answered {response.status}")
    return elapsed


def percentiles_us(samples: Sequence[float]) -> tuple[int, int]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return round(statistics.median(samples) * 1e6), round(cuts[98] * 1e6)


async def measure(engine: str, base: str, requests: int, warmup: int, pharos: PharosThread) -> None:
    bodies = [chat_body(variant) for variant in range(16)]
    direct: list[float] = []
    routed: list[float] = []
    connector = aiohttp.TCPConnector(limit=4)
    async with aiohttp.ClientSession(connector=connector, auto_decompress=False) as session:
        for index in range(warmup):
            body = bodies[index % len(bodies)]
            await first_byte_s(session, f"{engine}/v1/chat/completions", body)
            await first_byte_s(session, f"{base}/v1/chat/completions", body)
        warm_overheads = len(pharos.overheads_s)
        for index in range(requests):
            body = bodies[index % len(bodies)]
            direct.append(await first_byte_s(session, f"{engine}/v1/chat/completions", body))
            routed.append(await first_byte_s(session, f"{base}/v1/chat/completions", body))
    overheads = pharos.overheads_s[warm_overheads:]
    print(
        f"# body {len(bodies[0])} bytes, {requests} requests each after {warmup} warmup, "
        f"{len(overheads)} overhead samples",
        file=sys.stderr,
    )
    for name, samples in (
        ("overhead-32k", overheads),
        ("ttft-direct-32k", direct),
        ("ttft-pharos-32k", routed),
    ):
        p50, p99 = percentiles_us(samples)
        print(f"bench {name} p50_us={p50} p99_us={p99}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--fake", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--fake-slots", type=int, default=2, help=argparse.SUPPRESS)
    parser.add_argument("--fake-run-to-max", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    smoke = os.environ.get("PHAROS_BENCH_SMOKE") == "1"  # tiny counts: CI checks it runs
    if smoke:
        args.requests, args.warmup = 20, 2
    if args.fake:
        run_fake(args.fake_slots, args.fake_run_to_max)
        return 0
    if args.requests < 500 and not smoke:
        parser.error("--requests: at least 500, for a meaningful p99")
    fake = subprocess.Popen(
        [sys.executable, __file__, "--fake"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    pharos: PharosThread | None = None
    try:
        assert fake.stdout is not None
        engine = fake.stdout.readline().strip()
        if not engine.startswith("http://"):
            raise SystemExit("the fake engine did not start")
        pharos = PharosThread(engine)
        base = pharos.start()
        asyncio.run(measure(engine, base, args.requests, args.warmup, pharos))
    finally:
        if pharos is not None:
            pharos.stop()
        if fake.stdin is not None:
            fake.stdin.close()
        try:
            fake.wait(10)
        except subprocess.TimeoutExpired:
            fake.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
