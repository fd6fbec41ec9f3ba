"""Pharos, a bare aiohttp pass-through and LiteLLM side by side, one run (issue 13). Reported,
never asserted.

Every proxy forwards 32 KiB streamed chats to one fake vLLM. Each proxy runs pinned to the
last core (`taskset`), the fake engine and this client on the others, one proxy at a time
(they would steal each other's core). c=1: TTFT (first body byte) per request, Pharos and
the bare pass-through taken in turn request by request, C1_GAP_S apart, so they share the
machine's noise; then LiteLLM, in turn with the bare one, in a phase of its own
(C1_LITELLM_REQUESTS). c=32: completed
requests per second over a fixed time, each proxy twice in alternating order, the better
of the two kept, for each fixed workload (WORKLOADS: output tokens per stream, fake slots).
Prints `bench compare-...` lines with the ratios against the bare pass-through and LiteLLM,
the proxies' own event-loop lag read from their /metrics (Pharos, and the bare one as the
control), each proxy's CPU per request, and issue 13's table. Beside them, floor_proxy.py
(FLOORS) shows the least CPU per request any Python proxy of this workload spends.

A/B of two Pharos builds: `--pharos-b SRC` runs a second Pharos (`pharos-b`) from another
checkout's `src` (built in place; this venv's Python with PYTHONPATH=SRC) beside this one,
`--rounds N` alternates the c=32 phases N times (each order and its reverse), `--workload`
keeps one workload, and every c=32 phase is printed (`bench compare-phase-...`) with the median
CPU per request of each proxy (`bench compare-median-...`).

Run: make bench-compare (installs LiteLLM 1.110.2 into ~/.cache/pharos/bench first), or
     .venv/bin/python benchmarks/compare.py [--litellm PATH] [--requests N] [--seconds S]
     .venv/bin/python benchmarks/compare.py --no-floors --pharos-b /tmp/main/src --rounds 3 \
         --workload chat-32k-10tok --requests 300
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
from rawhttp import Client, request_bytes  # noqa: E402

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

    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

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


HEADERS = {"Content-Type": "application/json", "Authorization": f"Bearer {BENCH_KEY}"}
CHAT_PATH = "/v1/chat/completions"


def host_port(base: str) -> tuple[str, int]:
    host, _, port = base.removeprefix("http://").partition(":")
    return host, int(port)


def requests_for(proxy: Proxy, bodies: Sequence[bytes]) -> list[bytes]:
    """Each body as the whole request the client writes, encoded once."""
    host, port = host_port(proxy.base)
    return [request_bytes(f"{host}:{port}", CHAT_PATH, body, HEADERS) for body in bodies]


CLK_TCK = os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    """utime + stime of `pid` and every process under it (/proc/PID/stat), in seconds."""
    children: dict[int, list[int]] = {}
    times: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        child = int(entry)
        children.setdefault(int(fields[1]), []).append(child)  # fields[1]: ppid
        times[child] = (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        total += times.get(current, 0.0)
        todo.extend(children.get(current, ()))
    return total


def own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


@dataclass
class Phase:
    """One proxy's c=N run: what it completed, and the CPU each process spent on it."""

    requests: int = 0
    elapsed_s: float = 0.0
    proxy_cpu_s: float = 0.0
    fake_cpu_s: float = 0.0
    client_cpu_s: float = 0.0

    @property
    def rps(self) -> float:
        return self.requests / self.elapsed_s if self.elapsed_s else 0.0

    @property
    def cpu_ms_per_request(self) -> float:
        return self.proxy_cpu_s * 1e3 / self.requests if self.requests else 0.0

    def busy(self, cpu_s: float) -> float:
        """Share of one core over the phase."""
        return cpu_s / self.elapsed_s if self.elapsed_s else 0.0


class CpuMeter:
    """CPU of the proxy, the fake engine and this client between start() and stop()."""

    def __init__(self, proxy_pid: int, fake_pid: int) -> None:
        self._pids = (proxy_pid, fake_pid)
        self._start = (0.0, 0.0, 0.0, 0.0)

    def start(self) -> None:
        proxy, fake = self._pids
        self._start = (time.perf_counter(), process_cpu_s(proxy), process_cpu_s(fake), own_cpu_s())

    def stop(self, requests: int) -> Phase:
        proxy, fake = self._pids
        t0, p0, f0, c0 = self._start
        return Phase(
            requests,
            time.perf_counter() - t0,
            process_cpu_s(proxy) - p0,
            process_cpu_s(fake) - f0,
            own_cpu_s() - c0,
        )


def c1_groups(
    proxies: Sequence[Proxy], requests: int, litellm_requests: int
) -> list[tuple[list[Proxy], int]]:
    """The c=1 phases: every proxy but LiteLLM in one rotation, then LiteLLM with the bare
    pass-through as its own control (C1_LITELLM_REQUESTS says why)."""
    bare = [p for p in proxies if p.name == "bare"]
    ours = [p for p in proxies if p.name != "litellm"]
    theirs = [p for p in proxies if p.name == "litellm"]
    return [(ours, requests)] + [(bare + theirs, litellm_requests)] * bool(theirs)


C1_GAP_S = 0.005
"""c=1 waits this long after each reply before the next request, to any proxy. Back to back,
one proxy's work after its reply (Pharos records the prefix chain, metrics and the access line
once the stream ends; LiteLLM spends about half its ~31 ms of CPU after its first byte) ran
while the next proxy's request waited on the same pinned core: beside Pharos the bare
pass-through's p50 rose from 1.27 to 1.87 ms and Pharos's "added" TTFT fell to 0.06 ms (19:34
UTC). With the gap each request meets an idle proxy, so TTFT is what that proxy adds before
the first byte; the work after the reply is in the c=32 figures (CPU per request, req/s)."""


async def ttft_interleaved(
    proxies: Sequence[Proxy], bodies: Sequence[bytes], requests: int, warmup: int
) -> tuple[dict[str, list[float]], dict[str, int]]:
    """`requests` TTFT samples per proxy, the proxies taken in turn request by request (so
    they share the machine's noise), C1_GAP_S apart; and how many each served."""
    samples: dict[str, list[float]] = {p.name: [] for p in proxies}
    raw = {p.name: requests_for(p, bodies) for p in proxies}
    clients = {p.name: Client(*host_port(p.base)) for p in proxies}
    try:
        for i in range(warmup + requests):
            for proxy in proxies:
                reply = await clients[proxy.name].send(raw[proxy.name][i % len(bodies)])
                if i >= warmup:
                    samples[proxy.name].append(reply.ttft_s)
                await asyncio.sleep(C1_GAP_S)
    finally:
        for client in clients.values():
            client.close()
    return samples, dict.fromkeys(samples, warmup + requests)


async def throughput(
    proxy: Proxy, bodies: Sequence[bytes], concurrency: int, seconds: float, meter: CpuMeter
) -> Phase:
    """Completed requests per second with `concurrency` clients in a closed loop, and the CPU
    each process spent meanwhile."""
    raw = requests_for(proxy, bodies)
    clients = [Client(*host_port(proxy.base)) for _ in range(concurrency)]
    done = 0
    try:
        # every connection warmed at once: one after another, the first sat idle past
        # uvicorn's 5 s keep-alive while LiteLLM answered the other 31
        await asyncio.gather(*(c.send(raw[i % len(raw)]) for i, c in enumerate(clients)))
        meter.start()
        stop_at = time.perf_counter() + seconds

        async def run_client(n: int) -> None:
            nonlocal done
            i = n
            client = clients[n]
            while time.perf_counter() < stop_at:
                await client.send(raw[i % len(raw)])
                done += 1
                i += concurrency

        await asyncio.gather(*(run_client(n) for n in range(concurrency)))
        return meter.stop(done)
    finally:
        for client in clients:
            client.close()


def pct_ms(samples: Sequence[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return statistics.median(samples) * 1e3, cuts[98] * 1e3


@dataclass(frozen=True)
class Fake:
    url: str
    pid: int


@contextlib.contextmanager
def fake_engine(core: str) -> Iterator[Fake]:
    """rawhttp's pre-encoded fake vLLM in its own process: aiohttp's FakeVLLM cost more CPU per
    request than the proxies it was measuring."""
    tokens = ",".join(str(w.output_tokens) for w in WORKLOADS)
    fake = subprocess.Popen(
        pinned(core, [sys.executable, str(HERE / "rawhttp.py"), "--tokens", tokens]),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert fake.stdout is not None
        url = fake.stdout.readline().strip()
        if not url.startswith("http://"):
            raise SystemExit("the fake engine did not start")
        yield Fake(url, fake.pid)
    finally:
        if fake.stdin is not None:
            fake.stdin.close()
        try:
            fake.wait(10)
        except subprocess.TimeoutExpired:
            fake.kill()


FLOORS = (("floor", ()), ("floor-parse", ("--parse",)))
"""floor_proxy.py alone and with Pharos's parse: how much of each proxy's CPU per request is its
HTTP layers, and what the compute a prefix-aware router can't skip costs on top of the least any
Python proxy spends. Printed beside the others, never part of issue 13's ratios."""


def proxies_for(
    engine: str,
    workdir: Path,
    litellm: Path | None,
    *,
    floors: bool = True,
    pharos_b: Path | None = None,
) -> list[Proxy]:
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
    if pharos_b is not None:
        port = free_port()
        config_b = workdir / "pharos-b.yaml"
        config_b.write_text(config.read_text().replace(f":{pharos_port}\n", f":{port}\n", 1))
        out.append(
            Proxy(
                "pharos-b",
                [sys.executable, "-m", "pharos.cmd.main", "serve", "--config", str(config_b)],
                f"http://127.0.0.1:{port}",
                "/healthz",
                env={"PYTHONPATH": str(pharos_b)},
            )
        )
    for name, flags in FLOORS if floors else ():
        port = free_port()
        out.append(
            Proxy(
                name,
                [sys.executable, str(HERE / "floor_proxy.py"), "--port", str(port), *flags, engine],
                f"http://127.0.0.1:{port}",
                "/healthz",
            )
        )
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


C1_LITELLM_REQUESTS = 300
"""LiteLLM's c=1 phase, apart from Pharos's: it spends ~30 ms of CPU per request, about half of
it after its first byte, on the core every proxy is pinned to, so in one rotation with Pharos
its trailing work landed on the next proxies' requests and set their p99 (run to run, Pharos's
p99 against bare's moved 1.13x to 1.56x with the same code). 300 of its ~20 ms requests take
about as long as Pharos's whole phase."""


LAG_METRIC = "pharos_event_loop_lag_seconds"
LAG_SAMPLED = ("pharos", "bare")
"""Both sample their loop with obs/looplag.py: the bare pass-through's lag is the control."""
STALL_LE = "0.001"


async def loop_lag_buckets(proxy: Proxy) -> dict[str, float]:
    """The proxy's own pharos_event_loop_lag_seconds buckets (le -> cumulative count), read
    from its /metrics: the lag of the proxy's process alone, not of this client."""
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


def lag_line(name: str, phase: str, before: dict[str, float], after: dict[str, float]) -> str:
    """Samples, samples over 1 ms, and the bucket bound the worst sample stayed under."""
    delta = {le: after[le] - before.get(le, 0.0) for le in after}
    samples = delta.get("+Inf", 0.0)
    over = samples - delta.get(STALL_LE, 0.0)
    bounds = sorted((le for le in delta if le != "+Inf"), key=float)
    worst = next((le for le in bounds if delta[le] >= samples), "+Inf")
    worst_ms = "inf" if worst == "+Inf" else f"{float(worst) * 1e3:g}"
    return (
        f"bench compare-{name}-loop-lag-{phase} samples={samples:.0f} "
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
        fake_engine(other_cores) as fake,
    ):
        pharos_b = Path(args.pharos_b) if args.pharos_b else None  # main() made it absolute
        proxies = proxies_for(
            fake.url, Path(tmp), litellm, floors=not args.no_floors, pharos_b=pharos_b
        )
        workloads = [w for w in WORKLOADS if args.workload in (None, w.name)]
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
        phases: dict[str, dict[str, Phase]] = {w.name: {} for w in workloads}
        every: dict[str, dict[str, list[Phase]]] = {w.name: {} for w in workloads}
        lag_c32: dict[str, dict[str, float]] = {}
        try:
            for proxy in proxies:
                proxy.start(proxy_core, Path(tmp))
            for proxy in proxies:
                await wait_ready(proxy, args.ready_timeout)
            sampled = [p for p in proxies if p.name in LAG_SAMPLED]
            meters = {p.name: CpuMeter(p.pid(), fake.pid) for p in proxies}
            # c=1 with every proxy running but idle between its own requests
            lag_start = {p.name: await loop_lag_buckets(p) for p in sampled}
            ttft: dict[str, list[float]] = {}
            controls: dict[str, list[float]] = {}
            c1: dict[str, Phase] = {}
            lag_c1: dict[str, dict[str, float]] = {}
            for group, requests in c1_groups(proxies, args.requests, args.litellm_requests):
                for proxy in group:
                    meters[proxy.name].start()
                samples, served = await ttft_interleaved(
                    group, bodies[first.name], requests, args.warmup
                )
                for proxy in group:  # bare's own figures are from the first phase
                    c1.setdefault(proxy.name, meters[proxy.name].stop(served[proxy.name]))
                    ttft.setdefault(proxy.name, samples[proxy.name])
                    controls.setdefault(proxy.name, samples["bare"])
                if not lag_c1:  # the first phase only: in LiteLLM's, its CPU delays their loops
                    lag_c1 = {p.name: await loop_lag_buckets(p) for p in sampled}
            for w in workloads:
                for order in (proxies, proxies[::-1]) * args.rounds:
                    for proxy in order:
                        before = await loop_lag_buckets(proxy) if proxy in sampled else {}
                        meter = meters[proxy.name]
                        got = await throughput(
                            proxy, bodies[w.name], args.concurrency, args.seconds, meter
                        )
                        if proxy in sampled:
                            add(
                                lag_c32.setdefault(proxy.name, {}),
                                before,
                                await loop_lag_buckets(proxy),
                            )
                        every[w.name].setdefault(proxy.name, []).append(got)
                        print(phase_line(proxy.name, w.name, got, os.getloadavg()[0]))
                        kept = phases[w.name].get(proxy.name)
                        if kept is None or got.rps > kept.rps:
                            phases[w.name][proxy.name] = got
        finally:
            for proxy in proxies:
                proxy.stop()
    report(ttft, controls, c1, phases, args.concurrency)
    for workload, by_proxy in every.items():
        for name, runs in by_proxy.items():
            print(median_line(name, workload, runs))
    for name in LAG_SAMPLED:
        print(lag_line(name, "c1", lag_start[name], lag_c1[name]))
        print(lag_line(name, f"c{args.concurrency}", {}, lag_c32[name]))


def phase_line(name: str, workload: str, phase: Phase, load: float) -> str:
    """One c=32 phase as it ended (printed at once: an A/B run's every phase, in order)."""
    return (
        f"bench compare-phase-{name}-{workload} rps={phase.rps:.0f} "
        f"cpu_ms_per_req={phase.cpu_ms_per_request:.3f} "
        f"proxy_busy={phase.busy(phase.proxy_cpu_s):.2f} load={load:.2f}"
    )


def median_line(name: str, workload: str, runs: Sequence[Phase]) -> str:
    """A proxy's c=32 phases of one workload: the median CPU per request and req/s."""
    cpu = statistics.median(p.cpu_ms_per_request for p in runs)
    rps = statistics.median(p.rps for p in runs)
    return (
        f"bench compare-median-{name}-{workload} cpu_ms_per_req={cpu:.3f} rps={rps:.0f} "
        f"phases={len(runs)}"
    )


def report(
    ttft: dict[str, list[float]],
    controls: dict[str, list[float]],
    c1_cpu: dict[str, Phase],
    phases: dict[str, dict[str, Phase]],
    concurrency: int,
) -> None:
    """`bench` lines on stdout, and issue 13's table (with the ratios) on stderr.

    cpu_ms_per_req is the proxy process's own CPU (utime + stime, its children included) over
    the phase divided by the requests completed: the comparison that needs no workload chosen,
    as long as the proxy, not the client or the fake, is the limit (proxy_busy near 1 core,
    load_busy, the fake's and the client's, under 1)."""
    c1 = {name: pct_ms(samples) for name, samples in ttft.items()}
    control = {name: pct_ms(samples) for name, samples in controls.items()}
    for name, (p50, p99) in c1.items():
        print(
            f"bench compare-{name} ttft_c1_p50_ms={p50:.2f} ttft_c1_p99_ms={p99:.2f} "
            f"cpu_ms_per_req_c1={c1_cpu[name].cpu_ms_per_request:.3f} samples={len(ttft[name])}"
        )
        if name != "bare":
            bare_p50, bare_p99 = control[name]
            print(
                f"bench compare-{name}-vs-bare ttft_p50_x={p50 / bare_p50:.2f} "
                f"ttft_p99_x={p99 / bare_p99:.2f} added_ttft_p50_ms={p50 - bare_p50:.2f} "
                f"bare_in_phase_p50_ms={bare_p50:.2f} bare_in_phase_p99_ms={bare_p99:.2f}"
            )
    for workload, by_proxy in phases.items():
        bare = by_proxy["bare"]
        for name, ph in by_proxy.items():
            x = ph.rps / bare.rps if bare.rps else 0.0
            print(
                f"bench compare-{name}-{workload} rps_c{concurrency}={ph.rps:.0f} "
                f"vs_bare_x={x:.2f} cpu_ms_per_req={ph.cpu_ms_per_request:.3f} "
                f"proxy_busy={ph.busy(ph.proxy_cpu_s):.2f} "
                f"fake_busy={ph.busy(ph.fake_cpu_s):.2f} client_busy={ph.busy(ph.client_cpu_s):.2f}"
            )
        lite = by_proxy.get("litellm")
        if lite is not None and lite.rps:
            pharos = by_proxy["pharos"]
            cpu_x = (
                lite.cpu_ms_per_request / pharos.cpu_ms_per_request
                if pharos.cpu_ms_per_request
                else 0.0
            )
            print(
                f"bench compare-pharos-vs-litellm-{workload} rps_x={pharos.rps / lite.rps:.1f} "
                f"cpu_per_req_x={cpu_x:.1f}"
            )
    names = list(c1)
    table = [
        "| | " + " | ".join(names) + " |",
        "|---" * (len(names) + 1) + "|",
        "| TTFT c=1, p50 / p99 ms ("
        + WORKLOADS[0].name
        + ") | "
        + " | ".join(f"{c1[n][0]:.2f} / {c1[n][1]:.2f}" for n in names)
        + " |",
        "| ÷ bare in the same phase, p50 / p99 | "
        + " | ".join(
            f"{c1[n][0] / control[n][0]:.2f}× / {c1[n][1] / control[n][1]:.2f}×" for n in names
        )
        + " |",
    ]
    for workload, by_proxy in phases.items():
        bare_rps = by_proxy["bare"].rps
        cells = []
        for n in names:
            ph = by_proxy[n]
            cell = f"{ph.rps:.0f}"
            if n != "bare" and bare_rps:
                cell += f" ({ph.rps / bare_rps:.2f}× bare)"
            if n == "litellm" and ph.rps:
                cell += f", Pharos {by_proxy['pharos'].rps / ph.rps:.1f}×"
            cells.append(cell)
        table.append(f"| req/s c={concurrency} ({workload}) | " + " | ".join(cells) + " |")
        table.append(
            f"| CPU ms/request, proxy busy ({workload}) | "
            + " | ".join(
                f"{ph.cpu_ms_per_request:.3f}, {ph.busy(ph.proxy_cpu_s):.2f} core"
                for ph in (by_proxy[n] for n in names)
            )
            + " |"
        )
    print("\n".join(table), file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--litellm", help="LiteLLM's venv (scripts/bench/install-litellm.sh)")
    parser.add_argument(
        "--requests", type=int, default=3000, help="c=1 requests to Pharos and to the bare one"
    )
    parser.add_argument(
        "--litellm-requests",
        type=int,
        default=C1_LITELLM_REQUESTS,
        help="c=1 requests to LiteLLM (and the bare one beside it)",
    )
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10.0, help="per c=32 phase")
    parser.add_argument("--ready-timeout", type=float, default=120.0)
    parser.add_argument("--smoke", action="store_true", help="tiny counts: checks it runs")
    parser.add_argument(
        "--no-floors", action="store_true", help="skip floor_proxy.py (A/B runs of Pharos)"
    )
    parser.add_argument(
        "--pharos-b", help="another checkout's src (built in place): a second Pharos, pharos-b"
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="c=32: each order and its reverse, this many times"
    )
    parser.add_argument(
        "--workload", choices=[w.name for w in WORKLOADS], help="c=32: this workload only"
    )
    args = parser.parse_args(argv)
    if args.pharos_b:
        args.pharos_b = os.path.abspath(args.pharos_b)
    if args.smoke or os.environ.get("PHAROS_BENCH_SMOKE") == "1":
        args.requests, args.warmup, args.seconds, args.concurrency = 20, 2, 0.5, 4
        args.litellm_requests = 10
    with contextlib.suppress(ImportError):
        import uvloop  # the client's own CPU per request, as low as asyncio goes

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
