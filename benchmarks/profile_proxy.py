"""Where `pharos serve` spends a request, on compare.py's 32 KiB 10-token chats (issue 13).
Reported, never asserted.

Two measures, both of a real `pharos serve` in front of rawhttp's fake vLLM:

- `--callgrind [--proxy bare]`: instructions per request under valgrind's callgrind, c=1,
  the instructions of an idle window as long as the requests' subtracted (scrape rounds, the
  loop-lag sampler). Instruction counts hold still on a busy machine, where CPU time moves
  by 15% between runs; this is the A/B figure. valgrind runs no SHA extensions, so the chain's
  hashing weighs more here than on the CPU.
- `--spy FILE`: py-spy (scripts/bench/profile.sh installs it) samples the proxy through a c=32
  phase; prints each function's share of the samples, inclusive and self.

Run: bash scripts/bench/profile.sh [--callgrind | --spy /tmp/pharos.spy] (or this file with
     .venv/bin/python; py-spy and valgrind must then be on PATH or in .venv/bin)
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import compare  # noqa: E402
from bench_proxy import chat_body  # noqa: E402
from rawhttp import Client  # noqa: E402

IDLE_FRAMES = ("_worker (concurrent/futures/thread.py",)
"""The resolver's thread pool, parked in a queue wait py-spy counts as running."""


def _tool(name: str) -> str:
    local = Path(sys.executable).parent / name
    found = str(local) if local.exists() else shutil.which(name)
    if found is None:
        raise SystemExit(f"{name} is not installed (scripts/bench/profile.sh installs it)")
    return found


def _config(workdir: Path, engine: str) -> tuple[Path, int]:
    port = compare.free_port()
    path = workdir / "pharos.yaml"
    path.write_text(
        f"listen: 127.0.0.1:{port}\nbackends:\n  - url: {engine}\n    kind: vllm\n"
        f"    capacity: {compare.SLOTS}\n"
    )
    return path, port


def _start(argv: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    with log_path.open("wb") as log:
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)


def _control(pid: int, *args: str) -> None:
    """callgrind_control: -z zeroes the counts, -d NAME dumps them to the next cg.out.N."""
    subprocess.run([_tool("callgrind_control"), *args, str(pid)], capture_output=True, check=True)


def _dumps_ir(directory: Path) -> tuple[int, int]:
    """(requests window, idle window) instructions, the two dumps in the order written."""
    dumps = sorted(directory.glob("cg.out.*"), key=lambda p: int(p.suffix[1:]))
    return _total_ir(dumps[0]), _total_ir(dumps[1])


def _keep_dumps(directory: Path, keep: Path) -> None:
    keep.mkdir(parents=True, exist_ok=True)
    for dump in directory.glob("cg.out.*"):
        shutil.copy(dump, keep / dump.name)


def _spy(argv: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _total_ir(dump: Path) -> int:
    out = subprocess.run(
        [_tool("callgrind_annotate"), str(dump)], capture_output=True, text=True, check=True
    ).stdout
    found = re.search(r"([\d,]+) \(100.0%\)\s+PROGRAM TOTALS", out)
    if found is None:
        raise SystemExit(f"no totals in {dump}")
    return int(found.group(1).replace(",", ""))


async def callgrind(
    name: str, requests: int, warmup: int, keep: Path | None, serve_args: list[str]
) -> None:
    bodies = [chat_body(v, compare.WORKLOADS[0].output_tokens) for v in range(16)]
    with tempfile.TemporaryDirectory() as tmp, compare.fake_engine("0") as fake:
        config, port = _config(Path(tmp), fake.url)
        out = Path(tmp) / "cg.out"
        argv = [_tool("valgrind"), "--tool=callgrind", f"--callgrind-out-file={out}"]
        if name == "bare":
            argv += [sys.executable, str(HERE / "passthrough.py"), "--port", str(port), fake.url]
        else:
            pharos_bin = str(Path(sys.executable).parent / "pharos")
            argv += [sys.executable, pharos_bin, "serve", "--config", str(config), *serve_args]
        process = _start(argv, Path(tmp) / "proxy.log")
        proxy = compare.Proxy(name, argv, f"http://127.0.0.1:{port}", "/healthz", process=process)
        try:
            await compare.wait_ready(proxy, 600)
            raw = compare.requests_for(proxy, bodies)
            client = Client("127.0.0.1", port)
            for i in range(warmup):
                await client.send(raw[i % len(raw)])
            _control(process.pid, "-z")
            started = time.perf_counter()
            for i in range(requests):
                await client.send(raw[i % len(raw)])
            elapsed_s = time.perf_counter() - started
            _control(process.pid, "-d", "requests")
            client.close()
            _control(process.pid, "-z")
            await asyncio.sleep(elapsed_s)
            _control(process.pid, "-d", "idle")
        finally:
            proxy.stop()
        busy, idle = _dumps_ir(Path(tmp))
        if keep is not None:
            _keep_dumps(Path(tmp), keep)
    print(
        f"bench profile-callgrind-{name} instructions_per_request={(busy - idle) / requests:.0f} "
        f"requests={requests} window_s={elapsed_s:.1f} idle_instructions={idle}"
    )


def _frame_name(frame: str) -> str:
    name, _, where = frame.partition(" (")
    return f"{name} ({where.split(':')[0]}" if where else name


def shares(path: Path, top: int) -> None:
    """Each function's share of py-spy's raw (collapsed) samples, idle frames left out."""
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if any(idle in stack for idle in IDLE_FRAMES):
            continue
        count = int(count_text)
        frames = [_frame_name(f) for f in stack.split(";")]
        total += count
        for name in set(frames):
            inclusive[name] += count
        own[frames[-1]] += count
    print(f"# {total} samples; share of them, inclusive then self")
    for title, counter in (("inclusive", inclusive), ("self", own)):
        for name, count in counter.most_common(top):
            print(f"{title} {100 * count / total:5.1f}% {name}")


async def spy(path: Path, seconds: float, top: int) -> None:
    proxy_core, other_cores = compare.cores()
    bodies = [chat_body(v, compare.WORKLOADS[0].output_tokens) for v in range(16)]
    with tempfile.TemporaryDirectory() as tmp, compare.fake_engine(other_cores) as fake:
        proxy = next(
            p for p in compare.proxies_for(fake.url, Path(tmp), None) if p.name == "pharos"
        )
        proxy.start(proxy_core, Path(tmp))
        try:
            await compare.wait_ready(proxy, 60)
            argv = [_tool("py-spy"), "record", "-p", str(proxy.pid()), "-o", str(path)]
            argv += ["-f", "raw", "-r", "250", "-d", str(int(seconds))]
            recorder = _spy(argv)
            meter = compare.CpuMeter(proxy.pid(), fake.pid)
            phase = await compare.throughput(proxy, bodies, compare.SLOTS // 2, seconds + 2, meter)
            _, err = recorder.communicate(timeout=60)
            if recorder.returncode != 0:
                raise SystemExit(f"py-spy failed: {err.decode(errors='replace')[-400:]}")
        finally:
            proxy.stop()
    print(
        f"bench profile-spy rps={phase.rps:.0f} cpu_ms_per_req={phase.cpu_ms_per_request:.3f} "
        f"proxy_busy={phase.busy(phase.proxy_cpu_s):.2f}"
    )
    shares(path, top)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--callgrind", action="store_true", help="instructions per request, c=1")
    mode.add_argument("--spy", type=Path, help="py-spy's raw samples go here, c=32")
    parser.add_argument("--proxy", choices=("pharos", "bare"), default="pharos")
    parser.add_argument("--requests", type=int, default=200, help="--callgrind: timed requests")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument(
        "--keep", type=Path, help="--callgrind: copy the dumps here (callgrind_annotate them)"
    )
    parser.add_argument(
        "--serve-arg",
        action="append",
        default=[],
        help="--callgrind: an argument for `pharos serve`, e.g. --serve-arg=--no-access-log",
    )
    parser.add_argument("--seconds", type=float, default=15.0, help="--spy: sampled seconds")
    parser.add_argument("--top", type=int, default=40, help="--spy: functions listed")
    args = parser.parse_args()
    if args.callgrind:
        asyncio.run(callgrind(args.proxy, args.requests, args.warmup, args.keep, args.serve_arg))
    else:
        asyncio.run(spy(args.spy, args.seconds, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
