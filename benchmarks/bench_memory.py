"""Whole-process RSS of a running Pharos with its prefix index full (200k entries), and of a
fresh one after restoring that state file (issue 13 goal: <= 100 MB both). Reported, never
asserted.

Each phase is its own interpreter: a Pharos routing to an in-process fake vLLM, its index
filled with one-link chains the way live traffic records them. Prints `mem pharos-full
rss_mb=N peak_mb=N`, the same after writing the state file, and `mem pharos-restored ...`
(peak: VmHWM, the most the process held so far).

Run: .venv/bin/python benchmarks/bench_memory.py
"""

from __future__ import annotations

import asyncio
import gc
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from pharos.cmd.runtime import Pharos
from pharos.cmd.serve import restore_state_file, save_state_file
from pharos.config import Backend, Config
from pharos.engine.types import Kind
from pharos.fakeengine import FakeVLLM, no_sleep, serve
from pharos.fakeengine.vllm import RECORDED_MODEL
from pharos.prefix import DEFAULT_CAP_ENTRIES, Chain

SMOKE = os.environ.get("PHAROS_BENCH_SMOKE") == "1"  # tiny counts: CI checks it still runs
ENTRIES = 2_000 if SMOKE else DEFAULT_CAP_ENTRIES


def status_mb(field: str) -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def rss_mb() -> str:
    """RSS now, and the process's peak so far (VmHWM): the peak is what a limit kills at."""
    return f"rss_mb={status_mb('VmRSS'):.1f} peak_mb={status_mb('VmHWM'):.1f}"


async def phase(mode: str, state_file: Path, port: int) -> None:
    async with serve(FakeVLLM(sleep=no_sleep), port=port) as url:
        config = Config(backends=(Backend(url=url, kind=Kind.VLLM),))
        pharos = Pharos(config)
        await pharos.start()
        try:
            if not await pharos.wait_ready(15):
                raise SystemExit("Pharos did not finish its first scrape round")
            target = pharos.state.targets_for_model(RECORDED_MODEL, pharos.clock.now())[0]
            if mode == "full":
                for n in range(ENTRIES):
                    chain = Chain(((n * 0x9E3779B97F4A7C15) & 0xFFFF_FFFF_FFFF_FFFF,), (1000,))
                    pharos.prefix.record(chain, target.target_id, target.generation, float(n))
                gc.collect()
                print(f"mem pharos-full {rss_mb()} entries={len(pharos.prefix)}")
                await save_state_file(pharos, state_file)
                mode = "full-after-save"
            else:
                await restore_state_file(pharos, state_file)
            gc.collect()
            print(f"mem pharos-{mode} {rss_mb()} entries={len(pharos.prefix)}")
        finally:
            await pharos.stop()


def main() -> None:
    if len(sys.argv) == 4:
        asyncio.run(phase(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])))
        return
    with socket.socket() as s:  # the same engine URL in both phases: the state file's keys
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="pharos-mem-") as tmp:
        state_file = Path(tmp) / "pharos.state"
        for mode in ("full", "restored"):
            subprocess.run([sys.executable, __file__, mode, str(state_file), str(port)], check=True)


if __name__ == "__main__":
    main()
