"""`pharos demo`: Pharos in front of three fake engines, for a first look with no GPU.

The fakes answer every status path and reply shape exactly as the recorded
engines did (Ollama 0.34.4, llama.cpp v0.5.0, vLLM v0.30.0); only their speed,
memory and prompt cache are simulated. All three serve `qwen2.5:0.5b` (the
llama.cpp and vLLM fakes under an alias), so requests show routing by load,
residency and prefix cache.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Sequence

from pharos.cmd.runtime import Pharos, running
from pharos.cmd.serve import add_access_log_argument, setup_logging
from pharos.config import Backend, Config, HostPort
from pharos.engine.types import Kind
from pharos.fakeengine import (
    FakeLlamaCpp,
    FakeModel,
    FakeOllama,
    FakeVLLM,
    Ledger,
    scaled_sleep,
    serve,
)

DEMO_MODEL = "qwen2.5:0.5b"
OLLAMA_MODELS = (
    FakeModel(DEMO_MODEL),
    FakeModel("llama3.2:1b", 1_321_098_329, 2_019_000_000),  # ollama v0.34.4 api_tags / api_ps
)
OLLAMA_MEMORY_GB = 2.5
"""GiB, for the fake Ollama and its memory_gb alike: each model fits alone (the larger is
1.23 GiB on disk, 1.88 GiB loaded) but not both loaded at once, so switching unloads.
At 1 GiB llama3.2:1b could never fit and its requests waited forever."""


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--listen",
        metavar="HOST:PORT",
        default="127.0.0.1:8090",
        help="where the demo router listens (default: 127.0.0.1:8090)",
    )
    parser.add_argument(
        "--speed",
        type=float,
        default=1.0,
        help="run the fake engines this many times faster than a small CPU engine (default 1)",
    )
    parser.add_argument(
        "--log-level",
        choices=("debug", "info", "warning"),
        default="info",
        help="debug adds each request's routing decisions",
    )
    add_access_log_argument(parser)


def demo_config(urls: Sequence[str]) -> Config:
    ollama_url, llamacpp_url, vllm_url = urls
    alias = {"qwen2.5-0.5b": DEMO_MODEL}
    return Config(
        backends=(
            Backend(url=ollama_url, kind=Kind.OLLAMA, memory_gb=OLLAMA_MEMORY_GB, capacity=2),
            Backend(url=llamacpp_url, kind=Kind.LLAMACPP, aliases=alias),
            Backend(url=vllm_url, kind=Kind.VLLM, aliases=alias),
        ),
    )


def run_demo(args: argparse.Namespace) -> int:
    setup_logging(args.log_level, access_log=args.access_log)
    try:
        listen = HostPort.parse(args.listen)
    except ValueError as err:
        sys.stderr.write(f"--listen: {err}\n")
        return 2
    if args.speed <= 0:
        sys.stderr.write("--speed must be above 0\n")
        return 2
    try:
        asyncio.run(_demo(listen, args.speed))
    except KeyboardInterrupt:
        pass
    except OSError as err:
        sys.stderr.write(f"pharos demo: cannot listen on {listen}: {err}\n")
        return 1
    return 0


async def _demo(listen: HostPort, speed: float) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    sleep = scaled_sleep(speed)
    fakes = (
        FakeOllama(
            list(OLLAMA_MODELS),
            ledger=Ledger(memory_bytes=int(OLLAMA_MEMORY_GB * 2**30)),
            sleep=sleep,
        ),
        FakeLlamaCpp(sleep=sleep),
        FakeVLLM(sleep=sleep),
    )
    async with contextlib.AsyncExitStack() as stack:
        urls = [await stack.enter_async_context(serve(fake)) for fake in fakes]
        pharos = Pharos(demo_config(urls))
        base = await stack.enter_async_context(
            running(pharos, host=listen.host or "127.0.0.1", port=listen.port)
        )
        await pharos.wait_ready(10.0)
        print(_banner(base, urls), flush=True)
        await stop.wait()


def _banner(base: str, urls: Sequence[str]) -> str:
    return f"""
Pharos demo is running at {base}
  fake Ollama 0.34.4     {urls[0]}  (qwen2.5:0.5b, llama3.2:1b; room for one at a time)
  fake llama.cpp v0.5.0  {urls[1]}  (qwen2.5-0.5b, aliased to qwen2.5:0.5b)
  fake vLLM v0.30.0      {urls[2]}  (qwen2.5-0.5b, aliased to qwen2.5:0.5b)

Try:
  curl -s {base}/v1/models
  curl -s {base}/v1/chat/completions \\
    -d '{{"model":"{DEMO_MODEL}","messages":[{{"role":"user","content":"hi"}}]}}'
  curl -s {base}/api/chat \\
    -d '{{"model":"llama3.2:1b","messages":[{{"role":"user","content":"hi"}}],"stream":false}}'
  curl -s {base}/metrics
  open {base}/status     (macOS; xdg-open on Linux: what each engine reports, and why each
                          request went where)
Stop with Ctrl-C.
"""
