"""A fake engine as a container's main process, for the live Docker tests.

    python -m tests.discovery.fake_container --kind ollama --port 11434 --log FILE

Runs inside the busybox image with the host's /usr, pyenv and this worktree (its .venv)
mounted read-only; listens on 0.0.0.0 inside the container (reachable only from the host
over docker0). `--log` copies a recorded engine.log to stderr at startup, as the engine
would print it (Ollama 0.34.4 prints its server config line once there). The model loads in
0.2 s instead of the ledger's 8 s so tests don't wait on a synthetic load, and a reply runs to
its max_tokens (the e2e needs streams long enough to cut and to drain).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import signal
import sys
from pathlib import Path

from aiohttp import web

from pharos.fakeengine import DEFAULT_LEDGER, FakeLlamaCpp, FakeModel, FakeOllama, FakeVLLM
from pharos.fakeengine.engine import FakeEngine

MODEL = "qwen2.5:0.5b"


def build(kind: str) -> FakeEngine:
    # Long replies when asked (natural_stop off): the e2e cuts and drains long streams.
    ledger = dataclasses.replace(DEFAULT_LEDGER, load_s=0.2, natural_stop=False)
    if kind == "ollama":
        return FakeOllama([FakeModel(MODEL)], ledger=ledger)
    if kind == "vllm":
        return FakeVLLM(ledger=ledger)
    if kind == "llamacpp":
        return FakeLlamaCpp(ledger=ledger)
    raise SystemExit(f"unknown --kind {kind}")


def print_log(log: Path | None) -> None:
    if log is not None:
        sys.stderr.buffer.write(log.read_bytes())
        sys.stderr.flush()


async def main(kind: str, port: int) -> None:
    runner = web.AppRunner(build(kind).app(), handle_signals=False, shutdown_timeout=0.1)
    await runner.setup()
    await web.TCPSite(runner, "0.0.0.0", port).start()
    print(f"fake {kind} listening on :{port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--kind", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", type=Path, default=None)
    args = parser.parse_args()
    print_log(args.log)
    asyncio.run(main(args.kind, args.port))
