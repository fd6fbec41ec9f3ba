"""A hostile battery against `pharos demo` and `pharos serve` on 127.0.0.1 (issue 11).

Run by hand: `.venv/bin/python scripts/hostile/battery.py [--seconds 300]`. It starts
`pharos demo` (three fake engines behind Pharos), then `pharos serve` with keys and a
state file in front of the demo's fake engines, and for a bounded time runs, round after
round: fuzzed bodies over every route of both, broken configs written under serve's
watcher, slow and abusive clients (half request heads, short bodies, a connection flood),
a model too large for its host, and kill -9 of serve at random moments of its state
writes. Every loop stops by itself; both processes are stopped at the end.

It prints one line per finding and a summary: 5xx answered by Pharos itself (code
pharos_error), tracebacks in either log, RSS over time, and how long slow connections
and a never-fitting request were held.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

ROUTES = (
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/embeddings",
    "/v1/messages",
    "/v1/responses",
    "/api/chat",
    "/api/generate",
    "/api/embed",
    "/api/embeddings",
)
MODEL = "qwen2.5:0.5b"
KEY = "sk-hostile-battery-key"
KEY_SHA256 = hashlib.sha256(KEY.encode()).hexdigest()
CLIENT_IDLE_S = 3.0
CLIENT_BODY_S = 3.0
MAX_CONNECTIONS = 200
DEMO_CLIENT_IDLE_S = 30.0  # the demo runs with the default limits


@dataclass
class Findings:
    requests: int = 0
    pharos_5xx: list[str] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    rss_mb: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    slow_held_s: list[float] = field(default_factory=list)
    slow_unbounded: int = 0
    short_body_s: list[float] = field(default_factory=list)
    never_fits_s: list[float] = field(default_factory=list)
    refused_connections: int = 0
    config_rounds: int = 0
    auth_opened: int = 0
    kills: int = 0
    temp_files_after_restart: list[int] = field(default_factory=list)

    def note(self, target: str, route: str, status: int, body: bytes) -> None:
        self.requests += 1
        self.statuses[status] = self.statuses.get(status, 0) + 1
        if status >= 500 and b"pharos_error" in body:
            self.pharos_5xx.append(f"{target} {route} {status} {body[:120]!r}")


# ---- bodies ------------------------------------------------------------------------------


def _valid(route: str, rng: random.Random) -> dict[str, object]:
    text = "".join(rng.choice("abc xyz\u00e9\u4f60") for _ in range(rng.randint(0, 40)))
    if route in ("/v1/chat/completions", "/v1/messages", "/api/chat"):
        body: dict[str, object] = {
            "model": MODEL,
            "messages": [{"role": "user", "content": text}],
            "max_tokens": 4,
        }
    elif route in ("/v1/completions", "/api/generate"):
        body = {"model": MODEL, "prompt": text, "max_tokens": 4}
    else:
        body = {"model": MODEL, "input": text or "x"}
    if rng.random() < 0.3:
        body["stream"] = rng.random() < 0.5
    if rng.random() < 0.2:
        body["stream_options"] = rng.choice([None, {}, {"include_usage": False}, 3])
    return body


def fuzzed_body(route: str, rng: random.Random) -> bytes:
    kind = rng.randrange(8)
    data = json.dumps(_valid(route, rng)).encode()
    if kind == 0:
        return data
    if kind == 1:  # flipped bytes
        raw = bytearray(data)
        for _ in range(rng.randint(1, 6)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        return bytes(raw)
    if kind == 2:  # deep nesting
        depth = rng.choice([100, 1000, 5000, 20000])
        return data[:-1] + b',"x":' + b"[" * depth + b"]" * depth + b"}"
    if kind == 3:  # lone surrogates, with stream_options (the usage rewrite)
        return (
            b'{"model":"' + MODEL.encode() + b'","stream":true,"stream_options":{"a":1},'
            b'"messages":[{"role":"user","content":"\\ud800 x"}],"prompt":"\\udfff"}'
        )
    if kind == 4:  # invalid UTF-8 in raw fields, or a UTF-16 body
        if rng.random() < 0.5:
            return json.dumps(_valid(route, rng)).encode("utf-16")
        return data[:-1] + b',"prompt":"\xff\xfe","input":"\xc3\x28"}'
    if kind == 5:  # wrong types
        return json.dumps(
            {"model": rng.choice([1, None, [], {}, ""]), "messages": rng.choice([1, "x", [1]])}
        ).encode()
    if kind == 6:  # truncated
        return data[: rng.randrange(len(data))]
    return bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))


async def fuzz(
    session: aiohttp.ClientSession, target: str, base: str, until: float, findings: Findings
) -> None:
    rng = random.Random(11)
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    while time.monotonic() < until:
        route = rng.choice(ROUTES)
        body = fuzzed_body(route, rng)
        try:
            async with session.post(base + route, data=body, headers=headers) as response:
                findings.note(target, route, response.status, await response.read())
        except (aiohttp.ClientError, TimeoutError) as err:
            findings.note(target, route, 599, f"client error {type(err).__name__}".encode())


# ---- slow and abusive clients ----------------------------------------------------------------


def _host_port(base: str) -> tuple[str, int]:
    host, port = base.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


async def slowloris(base: str, count: int, findings: Findings, idle_s: float) -> None:
    """Half request heads: each must be closed within the listener's client_idle."""
    host, port = _host_port(base)

    async def one() -> None:
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            findings.refused_connections += 1
            return
        start = time.monotonic()
        writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        try:
            await asyncio.wait_for(reader.read(), idle_s + 5)
            findings.slow_held_s.append(time.monotonic() - start)
        except TimeoutError:
            findings.slow_unbounded += 1
        except OSError:
            findings.slow_held_s.append(time.monotonic() - start)
        writer.close()

    await asyncio.gather(*(one() for _ in range(count)))


async def short_bodies(base: str, count: int, findings: Findings) -> None:
    """Content-Length 1000 with 80 bytes sent: must be answered within client_body."""
    host, port = _host_port(base)

    async def one() -> None:
        reader, writer = await asyncio.open_connection(host, port)
        start = time.monotonic()
        writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            + KEY.encode()
            + b"\r\nContent-Length: 1000\r\n\r\n"
            + b"{" * 80
        )
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n"), CLIENT_BODY_S * 4)
            findings.short_body_s.append(time.monotonic() - start)
            status = int(head.split()[1])
            findings.statuses[status] = findings.statuses.get(status, 0) + 1
        except (TimeoutError, asyncio.IncompleteReadError, OSError):
            findings.slow_unbounded += 1
        writer.close()

    await asyncio.gather(*(one() for _ in range(count)))


async def flood(base: str, count: int, findings: Findings) -> None:
    """More connections than limits.max_connections; /healthz must still answer after."""
    host, port = _host_port(base)
    held = []
    for _ in range(count):
        try:
            held.append(await asyncio.open_connection(host, port))
        except OSError:
            findings.refused_connections += 1
    for _, writer in held:
        writer.write(b"GET /healthz HTTP/1.1\r\n")
    await asyncio.sleep(0.5)
    for _, writer in held:
        writer.close()


async def never_fits(session: aiohttp.ClientSession, base: str, findings: Findings) -> None:
    body = {"model": "llama3.2:1b", "messages": [{"role": "user", "content": "hi"}]}
    start = time.monotonic()
    try:
        async with asyncio.timeout(30):
            async with session.post(base + "/v1/chat/completions", json=body) as response:
                findings.note("demo", "never-fits", response.status, await response.read())
        findings.never_fits_s.append(time.monotonic() - start)
    except TimeoutError:
        findings.never_fits_s.append(float("inf"))


# ---- broken configs ----------------------------------------------------------------------


def serve_config(fakes: list[str], state_file: Path, *, keys: bool = True) -> str:
    lines = [
        "listen: 127.0.0.1:0",
        f"state_file: {state_file}",
        "limits:",
        f"  client_idle: {CLIENT_IDLE_S:g}s",
        f"  client_body: {CLIENT_BODY_S:g}s",
        f"  max_connections: {MAX_CONNECTIONS}",
        "  queue_wait: 20s",
        "backends:",
    ]
    lines += [f"  - url: {url}" for url in fakes]
    if keys:
        lines += ["keys:", f"  - name: battery\n    sha256: {KEY_SHA256}\n    admin: true"]
    return "\n".join(lines) + "\n"


def broken_configs(good: str) -> list[str]:
    return [
        "",
        good[:70],
        good[: good.index("keys:")],
        good + "polcy: cost\n",
        "keys: [\n",
        good.replace("client_idle: ", "client_idle: -"),
        "\x00\xff garbage",
        good,
    ]


async def configs(
    session: aiohttp.ClientSession, base: str, path: Path, good: str, until: float, f: Findings
) -> None:
    """Each broken file stays long enough for serve's 10 s poll; access must stay closed."""
    for text in broken_configs(good):
        if time.monotonic() + 12 > until:
            return
        path.write_text(text, encoding="utf-8", errors="surrogateescape")
        await asyncio.sleep(11)
        f.config_rounds += 1
        with contextlib.suppress(aiohttp.ClientError):
            async with session.get(base + "/v1/models") as response:
                if response.status == 200:
                    f.auth_opened += 1
                    print(f"FINDING access opened by config {text[:30]!r}", flush=True)


# ---- processes -----------------------------------------------------------------------------


class Process:
    def __init__(self, name: str, argv: list[str], log_path: Path) -> None:
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT)

    def rss_mb(self) -> float | None:
        if self.proc is None:
            return None
        try:
            status = Path(f"/proc/{self.proc.pid}/status").read_text()
        except OSError:
            return None
        match = re.search(r"VmRSS:\s+(\d+) kB", status)
        return int(match.group(1)) / 1024 if match else None

    def kill9(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill9()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")


async def wait_for_line(process: Process, pattern: str, timeout_s: float = 30) -> re.Match[str]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        match = re.search(pattern, process.log_text())
        if match:
            return match
        await asyncio.sleep(0.2)
    raise RuntimeError(f"{process.name}: no line matching {pattern!r} in {timeout_s}s")


async def healthy(session: aiohttp.ClientSession, base: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(aiohttp.ClientError):
            async with session.get(base + "/healthz") as response:
                if response.status == 200:
                    return
        await asyncio.sleep(0.2)
    raise RuntimeError(f"{base}/healthz never answered 200")


async def sample_rss(processes: list[Process], until: float, findings: Findings) -> None:
    start = time.monotonic()
    while time.monotonic() < until:
        for process in processes:
            rss = process.rss_mb()
            if rss is not None:
                findings.rss_mb.setdefault(process.name, []).append((time.monotonic() - start, rss))
        await asyncio.sleep(5)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def battery(seconds: float, workdir: Path) -> Findings:
    findings = Findings()
    pharos = str(Path(sys.executable).with_name("pharos"))  # the venv's console script
    demo_port = free_port()
    demo = Process(
        "demo",
        [pharos, "demo", "--listen", f"127.0.0.1:{demo_port}", "--speed", "50"],
        workdir / "demo.log",
    )
    demo.start()
    banner = await wait_for_line(demo, r"fake vLLM v\S+\s+(http://\S+)")
    text = demo.log_text()
    fakes = re.findall(r"fake (?:Ollama|llama\.cpp|vLLM) \S+\s+(http://127\.0\.0\.1:\d+)", text)
    assert banner and len(fakes) == 3, text
    demo_base = f"http://127.0.0.1:{demo_port}"

    serve_port = free_port()
    state_file = workdir / "pharos.state"
    config_path = workdir / "pharos.yaml"
    good = serve_config(fakes, state_file).replace("127.0.0.1:0", f"127.0.0.1:{serve_port}")
    config_path.write_text(good)
    serve_argv = [pharos, "serve", "--config", str(config_path)]
    serve = Process("serve", serve_argv, workdir / "serve.log")
    serve.start()
    serve_base = f"http://127.0.0.1:{serve_port}"
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        await healthy(session, demo_base)
        await healthy(session, serve_base)
        start = time.monotonic()
        until = start + seconds
        rss = asyncio.create_task(sample_rss([demo, serve], until, findings))
        config_task = asyncio.create_task(
            configs(session, serve_base, config_path, good, start + min(seconds, 100), findings)
        )
        round_index = 0
        while time.monotonic() < until:
            round_index += 1
            round_end = min(until, time.monotonic() + 20)
            await asyncio.gather(
                fuzz(session, "demo", demo_base, round_end, findings),
                fuzz(session, "serve", serve_base, round_end, findings),
                slowloris(serve_base, 50, findings, CLIENT_IDLE_S),
                slowloris(demo_base, 20, findings, DEMO_CLIENT_IDLE_S),
                short_bodies(serve_base, 10, findings),
                never_fits(session, demo_base, findings),
            )
            if round_index % 3 == 0 and time.monotonic() + 30 < until:
                await flood(serve_base, MAX_CONNECTIONS + 50, findings)
            if config_task.done() and round_index % 2 == 0 and time.monotonic() + 30 < until:
                await asyncio.sleep(random.uniform(0, 2))
                serve.kill9()  # at a random moment, maybe during a state write
                findings.kills += 1
                serve.start()
                await healthy(session, serve_base)
                findings.temp_files_after_restart.append(
                    len([p for p in workdir.iterdir() if p.name.endswith(".tmp")])
                )
        config_task.cancel()
        await asyncio.gather(config_task, rss, return_exceptions=True)
    serve.stop()
    demo.stop()
    return findings


def tracebacks_of(log_text: str) -> tuple[int, int]:
    """(Pharos's own, the demo's fake engines'): the fakes run inside the demo process."""
    blocks = log_text.split("Traceback (most recent call last):")[1:]
    fake = sum(1 for block in blocks if "pharos/fakeengine/" in block.split("\n\n")[0])
    return len(blocks) - fake, fake


def report(findings: Findings, workdir: Path) -> int:
    counted = {
        name: tracebacks_of((workdir / f"{name}.log").read_text(errors="replace"))
        for name in ("demo", "serve")
    }
    tracebacks = {name: own for name, (own, _) in counted.items()}
    fake_tracebacks = sum(fake for _, fake in counted.values())
    print(f"requests: {findings.requests}, statuses: {dict(sorted(findings.statuses.items()))}")
    print(f"5xx from Pharos itself: {len(findings.pharos_5xx)}")
    for line in findings.pharos_5xx[:10]:
        print(f"  {line}")
    print(f"tracebacks from Pharos in logs: {tracebacks}")
    print(f"tracebacks from the demo's fake engines (not Pharos): {fake_tracebacks}")
    for name, samples in findings.rss_mb.items():
        series = " ".join(f"{t:.0f}s={mb:.0f}" for t, mb in samples[:: max(1, len(samples) // 12)])
        print(f"rss_mb {name}: {series} (max {max(mb for _, mb in samples):.0f})")
    held = findings.slow_held_s
    if held:
        print(
            f"half-header connections: {len(held)} closed by Pharos, longest held "
            f"{max(held):.1f}s (client_idle {CLIENT_IDLE_S:g}s serve, "
            f"{DEMO_CLIENT_IDLE_S:g}s demo); unbounded: {findings.slow_unbounded}"
        )
    if findings.short_body_s:
        print(
            f"short bodies: {len(findings.short_body_s)} answered, longest "
            f"{max(findings.short_body_s):.1f}s (client_body {CLIENT_BODY_S:g}s)"
        )
    if findings.never_fits_s:
        print(f"never-fitting model: answered in at most {max(findings.never_fits_s):.2f}s")
    print(
        f"config rounds: {findings.config_rounds}, access opened: {findings.auth_opened}; "
        f"kill -9 of serve: {findings.kills}, temp files after each restart: "
        f"{findings.temp_files_after_restart}"
    )
    bad = (
        findings.pharos_5xx
        or any(tracebacks.values())
        or findings.slow_unbounded
        or findings.auth_opened
        or any(findings.temp_files_after_restart)
    )
    print("RESULT: " + ("FINDINGS above" if bad else "clean"))
    return 1 if bad else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--workdir", default=None, help="keep logs here (default: a temp dir)")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        if args.workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hostile-")))
        else:
            workdir = Path(args.workdir)
            workdir.mkdir(parents=True, exist_ok=True)
        findings = asyncio.run(battery(args.seconds, workdir))
        return report(findings, workdir)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
