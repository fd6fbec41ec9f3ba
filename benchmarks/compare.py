"""Pharos, a bare aiohttp pass-through and LiteLLM side by side, one run (issue 13). Reported,
never asserted.

Every proxy forwards 32 KiB streamed chats to one fake vLLM. Each proxy runs pinned to the
last core (`taskset`), the fake engine and this client on the others, one proxy at a time
(they would steal each other's core). c=1: TTFT (first body byte) per request, the proxies
taken in turn request by request so they share the machine's noise. c=32: completed
requests per second over a fixed time, each proxy twice in alternating order, the better
of the two kept, for each fixed workload (WORKLOADS: output tokens per stream, fake slots).
Prints `bench compare-...` lines with the ratios against the bare pass-through and LiteLLM,
Pharos's own event-loop lag read from its /metrics (its own process), and issue 13's table.

Run: make bench-compare (installs LiteLLM 1.110.2 into ~/.cache/pharos/bench first), or
     .venv/bin/python benchmarks/compare.py [--litellm PATH] [--requests N] [--seconds S]
     .venv/bin/python benchmarks/compare.py --smoke   (tiny counts, for CI)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_proxy import MODEL, chat_body  # noqa: E402

BENCH_KEY = "sk-" + "5e1f" * 16
"""LiteLLM refuses to start without a master key; Pharos (no keys configured) and the bare
pass-through ignore it."""

LITELLM_ENV = {
    "LITELLM_MASTER_KEY": BENCH_KEY,
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_TELEMETRY_DISABLED": "true",
    "LITELLM_MODE": "PRODUCTION",
}


SLOTS = 64
"""The fake engine runs this many requests at once, and Pharos is told so (`capacity:`): with the
fake's default 2, Pharos queues 30 of 32 clients in its fair queue while the pass-through hands
them to the engine's own queue, and the comparison measures queueing, not proxying."""


@dataclass(frozen=True)
class Workload:
    """What every proxy forwards: bench_proxy's ~32 KiB (BODY_BYTES) mixed-language streamed
    chats, fixed so runs compare (issue 13's 28× against LiteLLM was a 2-slot fake whose 32 KiB
    chats streamed 10 tokens; commit 2a20ad2, before 20a8370 gave the fake 64 slots)."""

    name: str
    output_tokens: int  # the chat's max_tokens; the fake runs every reply to it
    slots: int = SLOTS  # one fake serves every workload: its slots are fixed


WORKLOADS = (
    Workload("chat-32k-10tok", output_tokens=10),
    Workload("chat-32k-256tok", output_tokens=256),
)
"""10 tokens: the recorded chat stream's length (Ledger.reply_tokens), where per-request costs
dominate; 256: a typical chat answer, where per-chunk costs do. Both are printed: the ratio
against LiteLLM depends on which. c=1 TTFT is measured on the first."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cores() -> tuple[str, str]:
    """(the proxy's core, everything else's), e.g. ("1", "0") on 2 cores."""
    available = sorted(os.sched_getaffinity(0))
    if len(available) < 2:
        only = str(available[0])
        return only, only
    return str(available[-1]), ",".join(str(c) for c in available[:-1])


def pinned(core: str, argv: list[str]) -> list[str]:
    return ["taskset", "-c", core, *argv] if shutil.which("taskset") else argv


@dataclass
class Proxy:
    name: str
    argv: list[str]
    base: str
    ready_path: str
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None

    def start(self, core: str, log_dir: Path) -> None:
        log = (log_dir / f"{self.name}.log").open("wb")
        self.process = subprocess.Popen(
            pinned(core, self.argv),
            env={**os.environ, **self.env},
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self.process = None


async def wait_ready(proxy: Proxy, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            if proxy.process is not None and proxy.process.poll() is not None:
                raise SystemExit(f"{proxy.name} exited with {proxy.process.returncode}")
            with contextlib.suppress(aiohttp.ClientError, OSError):
                async with session.get(proxy.base + proxy.ready_path) as response:
                    if response.status == 200:
                        return
            await asyncio.sleep(0.2)
    raise SystemExit(f"{proxy.name} was not ready after {timeout_s:.0f}s")


async def one_request(
    session: aiohttp.ClientSession, url: str, body: bytes, headers: dict[str, str]
) -> float:
    """Seconds to the first body byte; the whole reply is read."""
    started = time.perf_counter()
    async with session.post(url, data=body, headers=headers) as response:
        await response.content.readany()
        ttft_s = time.perf_counter() - started
        await response.read()
        if response.status != 200:
            raise SystemExit(f"{url} answered {response.status}")
    return ttft_s


HEADERS = {"Content-Type": "application/json", "Authorization": f"Bearer {BENCH_KEY}"}


async def ttft_interleaved(
    proxies: Sequence[Proxy], bodies: Sequence[bytes], requests: int, warmup: int
) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {p.name: [] for p in proxies}
    connector = aiohttp.TCPConnector(limit=len(proxies) * 2)
    async with aiohttp.ClientSession(connector=connector, auto_decompress=False) as session:
        for i in range(warmup + requests):
            body = bodies[i % len(bodies)]
            for proxy in proxies:
                ttft_s = await one_request(
                    session, proxy.base + "/v1/chat/completions", body, HEADERS
                )
                if i >= warmup:
                    samples[proxy.name].append(ttft_s)
    return samples


async def throughput(
    proxy: Proxy, bodies: Sequence[bytes], concurrency: int, seconds: float
) -> float:
    """Completed requests per second with `concurrency` clients in a closed loop."""
    url = proxy.base + "/v1/chat/completions"
    done = 0
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, auto_decompress=False) as session:
        for i in range(concurrency):  # warm every connection
            await one_request(session, url, bodies[i % len(bodies)], HEADERS)
        stop_at = time.perf_counter() + seconds

        async def client(n: int) -> None:
            nonlocal done
            i = n
            while time.perf_counter() < stop_at:
                await one_request(session, url, bodies[i % len(bodies)], HEADERS)
                done += 1
                i += concurrency

        started = time.perf_counter()
        await asyncio.gather(*(client(n) for n in range(concurrency)))
        elapsed = time.perf_counter() - started
    return done / elapsed


def pct_ms(samples: Sequence[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return statistics.median(samples) * 1e3, cuts[98] * 1e3


@contextlib.contextmanager
def fake_engine(core: str) -> Iterator[str]:
    fake = subprocess.Popen(
        pinned(
            core,
            [
                sys.executable,
                str(HERE / "bench_proxy.py"),
                "--fake",
                "--fake-slots",
                str(SLOTS),
                "--fake-run-to-max",
            ],
        ),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert fake.stdout is not None
        url = fake.stdout.readline().strip()
        if not url.startswith("http://"):
            raise SystemExit("the fake engine did not start")
        yield url
    finally:
        if fake.stdin is not None:
            fake.stdin.close()
        try:
            fake.wait(10)
        except subprocess.TimeoutExpired:
            fake.kill()


def proxies_for(engine: str, workdir: Path, litellm: Path | None) -> list[Proxy]:
    bin_dir = Path(sys.executable).parent
    pharos_port, bare_port = free_port(), free_port()
    config = workdir / "pharos.yaml"
    config.write_text(
        f"listen: 127.0.0.1:{pharos_port}\nbackends:\n  - url: {engine}\n    kind: vllm\n"
        f"    capacity: {SLOTS}\n"
    )
    out = [
        Proxy(
            "bare",
            [sys.executable, str(HERE / "passthrough.py"), "--port", str(bare_port), engine],
            f"http://127.0.0.1:{bare_port}",
            "/healthz",
        ),
        Proxy(
            "pharos",
            [str(bin_dir / "pharos"), "serve", "--config", str(config)],
            f"http://127.0.0.1:{pharos_port}",
            "/healthz",
        ),
    ]
    if litellm is not None:
        port = free_port()
        cfg = workdir / "litellm.yaml"
        cfg.write_text(
            "model_list:\n"
            f"  - model_name: {MODEL}\n"
            "    litellm_params:\n"
            f"      model: hosted_vllm/{MODEL}\n"
            f"      api_base: {engine}/v1\n"
            "      api_key: none\n"
        )
        out.append(
            Proxy(
                "litellm",
                [
                    str(litellm / "bin" / "litellm"),
                    "--config",
                    str(cfg),
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--num_workers",
                    "1",
                ],
                f"http://127.0.0.1:{port}",
                "/health/liveliness",
                env=LITELLM_ENV,
            )
        )
    return out


LAG_METRIC = "pharos_event_loop_lag_seconds"
STALL_LE = "0.001"


async def loop_lag_buckets(proxy: Proxy) -> dict[str, float]:
    """Pharos's own pharos_event_loop_lag_seconds buckets (le -> cumulative count), read from
    its /metrics: the lag of the proxy's process alone, not of this client."""
    async with (
        aiohttp.ClientSession() as session,
        session.get(proxy.base + "/metrics", headers=HEADERS) as response,
    ):
        text = await response.text()
    buckets: dict[str, float] = {}
    prefix = LAG_METRIC + '_bucket{le="'
    for line in text.splitlines():
        if line.startswith(prefix):
            le, _, value = line[len(prefix) :].partition('"} ')
            buckets[le] = float(value)
    return buckets


def lag_line(phase: str, before: dict[str, float], after: dict[str, float]) -> str:
    """Samples, samples over 1 ms, and the bucket bound the worst sample stayed under."""
    delta = {le: after[le] - before.get(le, 0.0) for le in after}
    samples = delta.get("+Inf", 0.0)
    over = samples - delta.get(STALL_LE, 0.0)
    bounds = sorted((le for le in delta if le != "+Inf"), key=float)
    worst = next((le for le in bounds if delta[le] >= samples), "+Inf")
    worst_ms = "inf" if worst == "+Inf" else f"{float(worst) * 1e3:g}"
    return (
        f"bench compare-pharos-loop-lag-{phase} samples={samples:.0f} "
        f"over_1ms={over:.0f} worst_under_ms={worst_ms}"
    )


def add(total: dict[str, float], before: dict[str, float], after: dict[str, float]) -> None:
    for le, value in after.items():
        total[le] = total.get(le, 0.0) + value - before.get(le, 0.0)


async def run(args: argparse.Namespace) -> None:
    proxy_core, other_cores = cores()
    os.sched_setaffinity(0, {int(c) for c in other_cores.split(",")})
    bodies = {w.name: [chat_body(v, w.output_tokens) for v in range(16)] for w in WORKLOADS}
    first = WORKLOADS[0]
    litellm = Path(args.litellm) if args.litellm else None
    with (
        tempfile.TemporaryDirectory(prefix="pharos-bench-") as tmp,
        fake_engine(other_cores) as engine,
    ):
        proxies = proxies_for(engine, Path(tmp), litellm)
        print(
            f"# proxy on core {proxy_core}, fake vLLM and client on {other_cores}; "
            f"load average {os.getloadavg()[0]:.2f}",
            file=sys.stderr,
        )
        for w in WORKLOADS:
            print(
                f"# workload {w.name}: {len(bodies[w.name][0])}-byte streamed chats, "
                f"{w.output_tokens} output tokens per stream, fake with {w.slots} slots",
                file=sys.stderr,
            )
        rps: dict[str, dict[str, float]] = {
            w.name: {p.name: 0.0 for p in proxies} for w in WORKLOADS
        }
        lag_c32: dict[str, float] = {}
        try:
            for proxy in proxies:
                proxy.start(proxy_core, Path(tmp))
            for proxy in proxies:
                await wait_ready(proxy, args.ready_timeout)
            pharos = next(p for p in proxies if p.name == "pharos")
            # c=1 with every proxy running but idle between its own requests
            lag_start = await loop_lag_buckets(pharos)
            ttft = await ttft_interleaved(proxies, bodies[first.name], args.requests, args.warmup)
            lag_c1 = await loop_lag_buckets(pharos)
            for w in WORKLOADS:
                for order in (proxies, proxies[::-1]):
                    for proxy in order:
                        before = await loop_lag_buckets(pharos) if proxy is pharos else {}
                        got = await throughput(
                            proxy, bodies[w.name], args.concurrency, args.seconds
                        )
                        if proxy is pharos:
                            add(lag_c32, before, await loop_lag_buckets(pharos))
                        rps[w.name][proxy.name] = max(rps[w.name][proxy.name], got)
        finally:
            for proxy in proxies:
                proxy.stop()
    report(ttft, rps, args.concurrency)
    print(lag_line("c1", lag_start, lag_c1))
    print(lag_line(f"c{args.concurrency}", {}, lag_c32))


def report(
    ttft: dict[str, list[float]], rps: dict[str, dict[str, float]], concurrency: int
) -> None:
    """`bench` lines on stdout, and issue 13's table (with the ratios) on stderr."""
    c1 = {name: pct_ms(samples) for name, samples in ttft.items()}
    bare_p50, bare_p99 = c1["bare"]
    for name, (p50, p99) in c1.items():
        print(f"bench compare-{name} ttft_c1_p50_ms={p50:.2f} ttft_c1_p99_ms={p99:.2f}")
        if name != "bare":
            print(
                f"bench compare-{name}-vs-bare ttft_p50_x={p50 / bare_p50:.2f} "
                f"ttft_p99_x={p99 / bare_p99:.2f} added_ttft_p50_ms={p50 - bare_p50:.2f}"
            )
    for workload, by_proxy in rps.items():
        for name, value in by_proxy.items():
            x = value / by_proxy["bare"] if by_proxy["bare"] else 0.0
            print(
                f"bench compare-{name}-{workload} rps_c{concurrency}={value:.0f} vs_bare_x={x:.2f}"
            )
        if by_proxy.get("litellm"):
            x = by_proxy["pharos"] / by_proxy["litellm"]
            print(f"bench compare-pharos-vs-litellm-{workload} rps_x={x:.1f}")
    names = list(c1)
    table = [
        "| | " + " | ".join(names) + " |",
        "|---" * (len(names) + 1) + "|",
        "| TTFT c=1, p50 / p99 ms ("
        + WORKLOADS[0].name
        + ") | "
        + " | ".join(f"{c1[n][0]:.2f} / {c1[n][1]:.2f}" for n in names)
        + " |",
        "| ÷ bare, p50 / p99 | "
        + " | ".join(f"{c1[n][0] / bare_p50:.2f}× / {c1[n][1] / bare_p99:.2f}×" for n in names)
        + " |",
    ]
    for workload, by_proxy in rps.items():
        cells = []
        for n in names:
            cell = f"{by_proxy[n]:.0f}"
            if n != "bare" and by_proxy["bare"]:
                cell += f" ({by_proxy[n] / by_proxy['bare']:.2f}× bare)"
            if n == "litellm" and by_proxy[n]:
                cell += f", Pharos {by_proxy['pharos'] / by_proxy[n]:.1f}×"
            cells.append(cell)
        table.append(f"| req/s c={concurrency} ({workload}) | " + " | ".join(cells) + " |")
    print("\n".join(table), file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--litellm", help="LiteLLM's venv (scripts/bench/install-litellm.sh)")
    parser.add_argument("--requests", type=int, default=1000, help="c=1 requests per proxy")
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10.0, help="per c=32 phase")
    parser.add_argument("--ready-timeout", type=float, default=120.0)
    parser.add_argument("--smoke", action="store_true", help="tiny counts: checks it runs")
    args = parser.parse_args(argv)
    if args.smoke or os.environ.get("PHAROS_BENCH_SMOKE") == "1":
        args.requests, args.warmup, args.seconds, args.concurrency = 20, 2, 0.5, 4
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
