"""Three real `pharos serve` processes on 127.0.0.1 with peers (spec §14 rolling restart):
a client spreads streamed multi-turn chats over them, honouring /healthz, while each is
restarted in turn with SIGTERM; and one is killed with SIGKILL."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest

from pharos.fakeengine import FakeLlamaCpp, Ledger
from pharos.proxy.auth import hash_key
from tests.cmd.serve_procs import PharosProcess, free_port, poll_status, serve_fake

MODEL = "qwen2.5-0.5b"
USER, ADMIN = "sk-user-procs", "sk-admin-procs"
ENGINE = Ledger(slots=16, decode_s_per_token=0.03, prefill_s_per_token=0.0001)
"""Ten tokens at 30 ms: each stream is in flight for ~0.3 s, long enough to span a SIGTERM."""


@dataclass
class Node:
    name: str
    port: int
    peer_port: int
    config: Path
    process: PharosProcess | None = None
    healthy: bool = False

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self.process = await PharosProcess.start("serve", "--config", str(self.config))
        await poll_status(f"{self.base}/healthz", lambda s: s == 200, timeout_s=20)
        self.healthy = True


def write_configs(tmp_path: Path, backends: list[str], count: int = 3) -> list[Node]:
    secret = tmp_path / "peer-secret"
    secret.write_text("procs-peer-secret\n")
    ports = [(free_port(), free_port()) for _ in range(count)]
    members = ", ".join(f"127.0.0.1:{peer}" for _, peer in ports)
    nodes = []
    for index, (port, peer) in enumerate(ports):
        path = tmp_path / f"pharos-{index}.yaml"
        backend_lines = "".join(f"  - {{url: {url}, kind: llamacpp}}\n" for url in backends)
        path.write_text(
            f"""
listen: 127.0.0.1:{port}
backends:
{backend_lines}
keys:
  - {{name: user, sha256: {hash_key(USER)}}}
  - {{name: ops, sha256: {hash_key(ADMIN)}, admin: true}}
usage: {{timezone: UTC}}
drain: {{grace: 0.5s, timeout: 10s}}
peers:
  listen: 127.0.0.1:{peer}
  secret_file: {secret}
  members: [{members}]
"""
        )
        nodes.append(Node(f"n{index}", port, peer, path))
    return nodes


@dataclass
class Traffic:
    """Streamed three-turn conversations, each turn to the next instance whose /healthz
    said 200; a refused connection (before any byte) is tried on another instance."""

    nodes: list[Node]
    session: aiohttp.ClientSession
    succeeded: int = 0
    cut: list[str] = field(default_factory=list)
    per_node: dict[str, int] = field(default_factory=dict)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _turn: itertools.count[int] = field(default_factory=itertools.count)

    def pick(self) -> Node | None:
        healthy = [n for n in self.nodes if n.healthy]
        return healthy[next(self._turn) % len(healthy)] if healthy else None

    async def watch_health(self) -> None:
        while not self._stop.is_set():
            for node in self.nodes:
                try:
                    async with self.session.get(f"{node.base}/healthz") as resp:
                        node.healthy = resp.status == 200
                except aiohttp.ClientError:
                    node.healthy = False
            await asyncio.sleep(0.05)

    async def conversation(self, worker: int) -> None:
        while not self._stop.is_set():
            messages = [{"role": "system", "content": f"worker {worker} " * 200}]
            for turn in range(3):
                messages.append({"role": "user", "content": f"turn {turn}"})
                reply = await self.one_turn(messages)
                if reply is None:
                    break
                messages.append({"role": "assistant", "content": reply})

    async def one_turn(self, messages: list[dict[str, str]]) -> str | None:
        body = {"model": MODEL, "stream": True, "messages": messages}
        headers = {"Authorization": f"Bearer {USER}"}
        for _ in range(20):
            node = self.pick()
            if node is None:
                await asyncio.sleep(0.05)
                continue
            try:
                resp = await self.session.post(
                    f"{node.base}/v1/chat/completions", json=body, headers=headers
                )
            except aiohttp.ClientConnectionError:
                node.healthy = False  # closed before it read our request: try another
                continue
            async with resp:
                try:
                    data = await resp.read()
                except aiohttp.ClientError as err:
                    self.cut.append(f"{node.name}: {type(err).__name__}")
                    return None
                if resp.status != 200 or not data.rstrip().endswith(b"data: [DONE]"):
                    self.cut.append(f"{node.name}: {resp.status} {data[-80:]!r}")
                    return None
                self.succeeded += 1
                self.per_node[node.name] = self.per_node.get(node.name, 0) + 1
                return "ok"
        return None

    def stop(self) -> None:
        self._stop.set()


async def usage_requests(session: aiohttp.ClientSession, node: Node) -> int:
    async with session.get(
        f"{node.base}/usage", headers={"Authorization": f"Bearer {ADMIN}"}
    ) as resp:
        assert resp.status == 200
        rows = (await resp.json())["rows"]
    return sum(int(row["requests"]) for row in rows if row.get("key") == "user")


@contextlib.asynccontextmanager
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[list[Node], aiohttp.ClientSession]]:
    fakes = [FakeLlamaCpp(ledger=ENGINE) for _ in range(2)]
    async with contextlib.AsyncExitStack() as stack:
        backends = [await stack.enter_async_context(serve_fake(fake)) for fake in fakes]
        nodes = write_configs(tmp_path, backends)
        session = await stack.enter_async_context(
            aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(force_close=True),
                timeout=aiohttp.ClientTimeout(total=30),
            )
        )
        try:
            await asyncio.gather(*(node.start() for node in nodes))
            yield nodes, session
        finally:
            for node in nodes:
                if node.process is not None:
                    await node.process.close()


async def settle(session: aiohttp.ClientSession, nodes: list[Node], want: int) -> list[int]:
    """Peers tick every 200 ms: poll (bounded) until every instance counts `want`."""
    counts: list[int] = []
    for _ in range(50):
        counts = [await usage_requests(session, node) for node in nodes]
        if all(count == want for count in counts):
            break
        await asyncio.sleep(0.1)
    return counts


@pytest.mark.live  # 19-29 s of real processes on a shared 2-core machine: `make live` runs it
async def test_a_rolling_restart_cuts_no_stream_and_loses_no_usage(tmp_path: Path) -> None:
    async with cluster(tmp_path) as (nodes, session):
        traffic = Traffic(nodes, session)
        watcher = asyncio.create_task(traffic.watch_health())
        workers = [asyncio.create_task(traffic.conversation(w)) for w in range(4)]
        try:
            await asyncio.sleep(0.5)
            for node in nodes:
                assert node.process is not None
                node.process.signal(signal.SIGTERM)
                assert await node.process.wait(timeout_s=20) == 0, node.process.output
                assert "Traceback" not in node.process.output
                await node.start()
                await asyncio.sleep(0.3)
        finally:
            traffic.stop()
            await asyncio.gather(*workers)
            await watcher
        assert traffic.cut == []
        assert traffic.succeeded > 10
        assert len(traffic.per_node) == 3
        assert await settle(session, nodes, traffic.succeeded) == [traffic.succeeded] * 3


async def test_sigkill_fails_only_that_instances_streams_and_its_usage_survives(
    tmp_path: Path,
) -> None:
    async with cluster(tmp_path) as (nodes, session):
        victim, *others = nodes
        traffic = Traffic([victim], session)
        for _ in range(3):
            assert await traffic.one_turn([{"role": "user", "content": "before"}]) == "ok"
        assert await settle(session, nodes, 3) == [3, 3, 3]  # shared within a few ticks

        body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "x"}]}
        headers = {"Authorization": f"Bearer {USER}"}
        on_victim = await session.post(
            f"{victim.base}/v1/chat/completions", json=body, headers=headers
        )
        on_other = await session.post(
            f"{others[0].base}/v1/chat/completions", json=body, headers=headers
        )
        assert victim.process is not None
        victim.process.process.kill()
        await victim.process.wait()
        try:
            data: bytes | None = await on_victim.read()
        except aiohttp.ClientError:
            data = None
        assert data is None or not data.rstrip().endswith(b"data: [DONE]")
        assert (await on_other.read()).rstrip().endswith(b"data: [DONE]")
        survivors = Traffic(others, session)
        for _ in range(4):
            assert await survivors.one_turn([{"role": "user", "content": "after"}]) == "ok"
        assert await settle(session, others, 3 + 1 + 4) == [8, 8]


async def test_serve_refuses_to_start_peers_without_a_secret(tmp_path: Path) -> None:
    async with serve_fake(FakeLlamaCpp(ledger=ENGINE)) as backend:
        (node,) = write_configs(tmp_path, [backend], count=1)
        (tmp_path / "peer-secret").write_text("\n")
        process = await PharosProcess.start("serve", "--config", str(node.config))
        try:
            assert await process.wait() == 2
        finally:
            await process.close()
    assert "peers.secret_file:" in process.output and "is empty" in process.output
    assert "Traceback" not in process.output
    assert "listening on" not in process.output  # nothing started
