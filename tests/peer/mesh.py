"""Three Pharos instances in one process (spec §14 layer 3, multi-instance): each a real
`Pharos` runtime with its public listener on 127.0.0.1, peers talking over an in-memory
transport that can cut an instance off, one injected FakeClock, ticks stepped by hand.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp import web

from pharos.clock import FakeClock
from pharos.cmd.runtime import Pharos, RuntimeOptions
from pharos.config import parse_config
from pharos.fakeengine import FakeEngine, FakeLlamaCpp, no_sleep, serve
from pharos.peer.fingerprint import fingerprint
from pharos.peer.members import Members
from pharos.peer.node import Node, NodeOptions
from pharos.peer.transport import Reply, Unreachable
from pharos.proxy.auth import hash_key
from pharos.proxy.done import RequestDone
from pharos.state import StateOptions

MODEL = "qwen2.5-0.5b"
SECRET = b"peer-secret-for-tests"
ADDRESSES = ("a:8081", "b:8081", "c:8081")
START_WALL_S = 1_790_000_040.0  # on a minute boundary: RPM windows start empty
MESH_STATE = StateOptions(fast_interval_s=0.05, full_interval_s=0.05, stale_factor=1e9)
"""Scrape often so tests don't wait; a stepped clock must not make signals stale."""
WAIT_S = 10.0


class Network:
    """Who can reach whom: an instance is reachable while registered and not cut off."""

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.cut: set[str] = set()
        self.requests: list[tuple[str, str, str]] = []  # (from, to, path)

    def transport(self, address: str) -> MemoryTransport:
        return MemoryTransport(self, address)


class MemoryTransport:
    def __init__(self, network: Network, me: str) -> None:
        self._network = network
        self._me = me

    async def request(
        self,
        address: str,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: bytes,
        timeout_s: float,  # noqa: ARG002 (the Transport protocol; in memory nothing times out)
    ) -> Reply:
        network = self._network
        target = network.nodes.get(address)
        if target is None or address in network.cut or self._me in network.cut:
            raise Unreachable("cut off")
        network.requests.append((self._me, address, path))
        reply = await target.handle(method, path, headers, body)
        if self._me in network.cut or address in network.cut:
            raise Unreachable("cut off mid-request")
        return reply


@dataclass
class Instance:
    address: str
    pharos: Pharos
    node: Node
    base: str
    runner: web.AppRunner
    done: list[RequestDone]

    @property
    def origin(self) -> int:
        return self.node.origin

    def status(self, address: str) -> Any:
        (row,) = [s for s in self.pharos.peers.status() if s.address == address]
        return row


@dataclass
class Key:
    name: str
    secret: str
    rpm: int | None = None
    tokens_per_day: int | None = None

    def entry(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": self.name, "sha256": hash_key(self.secret)}
        if self.rpm is not None:
            entry["rpm"] = self.rpm
        if self.tokens_per_day is not None:
            entry["tokens_per_day"] = self.tokens_per_day
        return entry


@dataclass
class Mesh:
    clock: FakeClock
    network: Network
    urls: list[str]
    fakes: list[FakeEngine]
    client: aiohttp.ClientSession
    keys: Sequence[Key]
    instances: dict[str, Instance] = field(default_factory=dict)
    _stack: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)

    def config_text(self, keys: Sequence[Key] | None = None, timezone: str = "UTC") -> str:
        document: dict[str, Any] = {
            "backends": [{"url": url, "kind": "llamacpp"} for url in self.urls],
            "usage": {"timezone": timezone},
            "peers": {"secret_file": "/unused", "members": list(ADDRESSES)},
        }
        chosen = self.keys if keys is None else keys
        if chosen:
            document["keys"] = [key.entry() for key in chosen]
        return yaml.safe_dump(document, sort_keys=False)

    async def start(
        self,
        address: str,
        *,
        origin: int,
        keys: Sequence[Key] | None = None,
        timezone: str = "UTC",
        proto: int | None = None,
        secret: bytes = SECRET,
        pull: bool = True,
    ) -> Instance:
        """One instance: public listener, first scrape round, snapshots of reachable peers."""
        done: list[RequestDone] = []
        config = parse_config(self.config_text(keys, timezone), "mesh")
        pharos = Pharos(
            config,
            clock=self.clock,
            options=RuntimeOptions(state=MESH_STATE, origin=origin, on_done=done.append),
        )
        zone = str(pharos.usage.zone)
        options = NodeOptions() if proto is None else NodeOptions(proto=proto)
        node = Node(
            shared=pharos.shared,
            table=pharos.peers,
            transport=self.network.transport(address),
            members=Members(members=ADDRESSES),
            secret=secret,
            clock=self.clock,
            fingerprint=lambda: fingerprint(pharos.config, zone),
            options=options,
        )
        self.network.nodes[address] = node
        self.network.cut.discard(address)
        runner = web.AppRunner(pharos.app, handle_signals=False, shutdown_timeout=0.05)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        base = f"http://127.0.0.1:{runner.addresses[0][1]}"
        await pharos.start()
        assert await pharos.wait_ready(WAIT_S), "the first scrape round never finished"
        await until(
            lambda: len(pharos.state.targets_for_model(MODEL, self.clock.now())) == len(self.urls),
            "every target published",
        )
        if pull:
            await node.pull_all()
        else:
            await node.refresh_members()
        instance = Instance(address, pharos, node, base, runner, done)
        self.instances[address] = instance
        return instance

    async def kill(self, address: str) -> None:
        """A crash: the listener and every connection go, nothing is sent to peers."""
        instance = self.instances.pop(address)
        self.network.nodes.pop(address, None)
        await instance.runner.cleanup()
        await instance.pharos.stop()

    async def leave(self, address: str) -> None:
        """A graceful stop: the leaving delta, then the listener goes."""
        instance = self.instances.pop(address)
        await instance.node.leave()
        self.network.nodes.pop(address, None)
        await instance.runner.cleanup()
        await instance.pharos.stop()

    async def tick(self, *addresses: str) -> None:
        """One sender round on the named instances (all when none named)."""
        for address in addresses or tuple(self.instances):
            await self.instances[address].node.tick()

    async def close(self) -> None:
        for address in list(self.instances):
            await self.kill(address)

    def __getitem__(self, address: str) -> Instance:
        return self.instances[address]

    async def chat(
        self,
        address: str,
        messages: list[dict[str, str]],
        *,
        secret: str | None = None,
        stream: bool = False,
    ) -> tuple[int, bytes]:
        headers = {} if secret is None else {"Authorization": f"Bearer {secret}"}
        body = {"model": MODEL, "messages": messages, "stream": stream}
        async with self.client.post(
            f"{self[address].base}/v1/chat/completions", json=body, headers=headers
        ) as resp:
            return resp.status, await resp.read()


async def until(condition: Callable[[], object], what: str, timeout_s: float = WAIT_S) -> None:
    """Poll in-process state (no I/O of ours) until it holds; real sockets need real time."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


MeshFactory = Callable[..., Any]


@pytest.fixture
async def mesh() -> AsyncIterator[MeshFactory]:
    """`await mesh(engines=2, keys=(...))` -> a Mesh with fakes up and no instance yet."""
    async with contextlib.AsyncExitStack() as stack:
        created: list[Mesh] = []

        async def make(engines: int = 2, keys: Sequence[Key] = (), slots: int = 2) -> Mesh:
            from pharos.fakeengine import Ledger

            fakes: list[FakeEngine] = [
                FakeLlamaCpp(ledger=Ledger(slots=slots), sleep=no_sleep) for _ in range(engines)
            ]
            urls = [await stack.enter_async_context(serve(fake)) for fake in fakes]
            client = await stack.enter_async_context(aiohttp.ClientSession())
            built = Mesh(FakeClock(start_wall=START_WALL_S), Network(), urls, fakes, client, keys)
            created.append(built)
            return built

        try:
            yield make
        finally:
            for built in created:
                await built.close()
