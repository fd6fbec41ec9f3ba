"""Real engines for the Pharos and doctor live tests: single-thread llama-servers and vLLM.

Two llama-servers share the machine's 2 cores, so each gets one thread (`-t 1`). They start
in about a second, which is why each test gets fresh ones: a test that asserts what an
engine cached must not inherit another test's cache, and the kill test may kill one.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path

from tests.live.capture import LLAMACPP_GAUGE
from tests.live.engines import RunningEngine, start_llamacpp

LLAMACPP_THREADS = 1


def start_llamacpp_single_thread(name: str, log_dir: Path) -> RunningEngine:
    """llama-server b11312 serving SmolLM2 as `smollm2` with one thread (`-t 1`)."""
    return start_llamacpp(log_dir, name=name, threads=LLAMACPP_THREADS)


def llamacpp_processing(engine: RunningEngine, timeout_s: float = 10.0) -> float | None:
    """The engine's own count of requests in progress (its /metrics), read without Pharos.

    Sync I/O: call it through asyncio.to_thread from a test's event loop."""
    with urllib.request.urlopen(engine.base_url + LLAMACPP_GAUGE.path, timeout=timeout_s) as reply:
        body: bytes = reply.read()
    running, _ = LLAMACPP_GAUGE.read(body)
    return running
