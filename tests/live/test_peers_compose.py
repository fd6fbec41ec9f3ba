"""README "Several instances", run for real: deploy/peers/compose.yaml (three `pharos serve`
built from the Dockerfile, sharing state over the peer plane, behind Debian's HAProxy built
from deploy/peers/front.Dockerfile) with deploy/peers/compose.e2e.yaml swapping the Ollama
image for a local fake (no registry here). Streamed chats go through the front; usage counted
on one instance shows on the others; every instance sees its two peers up; one stopped
instance is marked down on the other two. One project per run (unique name, labels and image
tags), published on 127.0.0.1 only, torn down and its images removed afterwards.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from tests.discovery.docker_live import REPO_ROOT, compose, docker, prepare_docker, python_root

DEPLOY = REPO_ROOT / "deploy" / "peers"
INSTANCES = ("pharos-a", "pharos-b", "pharos-c")
MODEL = "qwen2.5:0.5b"  # the fake Ollama's model (tests/discovery/fake_container.py)
CHATS = 12
SERVED = r'^pharos_requests_total\{[^}]*status="200"[^}]*\} (\S+)$'


@dataclass
class Stack:
    env: dict[str, str]
    front: str = ""  # http://127.0.0.1:<published port>
    bases: dict[str, str] | None = None  # instance -> http://<container IP>:8090
    stats: str = ""  # the front's HAProxy stats as CSV, on the compose network

    def compose(self, *args: str, timeout_s: float = 300.0) -> str:
        files = [DEPLOY / "compose.yaml", DEPLOY / "compose.e2e.yaml"]
        return compose(files, args, self.env, timeout_s)

    def ip(self, service: str) -> str:
        container = self.compose("ps", "-q", service)
        return docker(
            "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}",
            container,
        ).split()[0]  # fmt: skip

    def base(self, instance: str) -> str:
        assert self.bases is not None
        return self.bases[instance]

    async def all_in_rotation(self) -> bool:
        """HAProxy marks an instance up after two good /healthz checks a second apart (rise 2),
        and an instance answers 503 there until it has restored state: chats sent before that
        got HAProxy's own 503 "No server is available" (seen in CI, 2 of 8 runs)."""
        async with aiohttp.ClientSession() as client:
            status, csv = await get(client, self.stats)
        rows = [line.split(",") for line in csv.splitlines()]
        up = {row[1] for row in rows if len(row) > 17 and row[0] == "instances" and row[17] == "UP"}
        return status == 200 and {"a", "b", "c"} <= up  # servers of compose's haproxy.cfg


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    prepare_docker()
    run = uuid.uuid4().hex[:12]
    secret = tmp_path_factory.mktemp("peers") / "peer-secret"
    secret.write_text(uuid.uuid4().hex + uuid.uuid4().hex + "\n")
    secret.chmod(0o644)  # read by the image's non-root user through the bind mount
    env = dict(os.environ)
    env.update(
        COMPOSE_PROJECT_NAME=f"pharos-peers-{run}",
        PHAROS_TEST_RUN=run,
        PHAROS_IMAGE=f"pharos-peers-test:{run}",
        PHAROS_FRONT_IMAGE=f"pharos-peers-front:{run}",
        PHAROS_PEER_SECRET_FILE=str(secret),
        PHAROS_PUBLISH="127.0.0.1::8090",
        PHAROS_REPO=str(REPO_ROOT),
        PHAROS_PYTHON=str(Path(REPO_ROOT / ".venv/bin/python")),
        PHAROS_PY_ROOT=python_root(),
    )
    pending = Stack(env)
    try:
        pending.compose("build", timeout_s=900.0)
        pending.compose("up", "-d", "--no-build")
        port = pending.compose("port", "front", "8090")  # "127.0.0.1:49153"
        assert port.startswith("127.0.0.1:"), port
        pending.front = f"http://{port}"
        pending.bases = {name: f"http://{pending.ip(name)}:8090" for name in INSTANCES}
        pending.stats = f"http://{pending.ip('front')}:8404/stats;csv"
        asyncio.run(until(pending.all_in_rotation, "the front sends to all three instances"))
        yield pending
    finally:
        try:
            pending.compose("down", "-v", "--timeout", "2")
        finally:
            docker("rmi", env["PHAROS_IMAGE"], env["PHAROS_FRONT_IMAGE"], check=False)


async def until(check: Callable[[], Awaitable[bool]], what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s:.0f} s: {what}")
        await asyncio.sleep(0.5)


async def get(client: aiohttp.ClientSession, url: str) -> tuple[int, str]:
    try:
        async with client.get(url, timeout=aiohttp.ClientTimeout(total=5)) as reply:
            return reply.status, await reply.text()
    except (aiohttp.ClientError, TimeoutError):
        return 0, ""


def peer_up(metrics: str) -> dict[str, float]:
    return {
        m[1]: float(m[2])
        for m in re.finditer(r'^pharos_peer_up\{peer="([^"]+)"\} (\S+)$', metrics, re.M)
    }


async def usage_requests(client: aiohttp.ClientSession, base: str) -> int:
    async with client.get(f"{base}/usage") as reply:
        assert reply.status == 200
        rows = (await reply.json())["rows"]
    return sum(int(row["requests"]) for row in rows)


async def chat(client: aiohttp.ClientSession, front: str, n: int) -> tuple[int, bool]:
    body = {
        "model": MODEL,
        "stream": True,
        "max_tokens": 6,
        "messages": [{"role": "user", "content": f"Count to ten. ({n}, {uuid.uuid4().hex})"}],
    }
    async with client.post(f"{front}/v1/chat/completions", json=body) as reply:
        data = await reply.read()
    return reply.status, data.rstrip().endswith(b"data: [DONE]")


async def test_every_instance_sees_its_two_peers_up_on_status_and_metrics(stack: Stack) -> None:
    async with aiohttp.ClientSession() as client:
        for name in INSTANCES:
            others = {f"{other}:8081" for other in INSTANCES if other != name}

            async def both_up(name: str = name, others: set[str] = others) -> bool:
                status, text = await get(client, f"{stack.base(name)}/metrics")
                return status == 200 and peer_up(text) == dict.fromkeys(others, 1.0)

            await until(both_up, f"{name} sees {sorted(others)} up")
            status, page = await get(client, f"{stack.base(name)}/status")
            assert status == 200
            peers = page[page.index('<section id="peers">') :]
            for other in others:
                row = peers[peers.index(f">{other}</td>") :].split("</tr>")[0]
                assert '<span class="pill">up</span>' in row, (name, other, row)


async def test_streamed_chats_through_the_front_are_counted_on_every_instance(
    stack: Stack,
) -> None:
    async with aiohttp.ClientSession() as client:
        before = [await usage_requests(client, stack.base(name)) for name in INSTANCES]
        results = [await chat(client, stack.front, n) for n in range(CHATS)]
        assert results == [(200, True)] * CHATS
        served = []
        for name in INSTANCES:  # round robin: every instance served some of them itself
            _, text = await get(client, f"{stack.base(name)}/metrics")
            counts = re.findall(SERVED, text, re.M)
            served.append(sum(float(count) for count in counts))
        assert all(count >= 1 for count in served), served

        async def counted_everywhere() -> bool:
            now = [await usage_requests(client, stack.base(name)) for name in INSTANCES]
            return all(n - b == CHATS for n, b in zip(now, before, strict=True))

        await until(counted_everywhere, f"all {CHATS} requests in every instance's /usage", 10)


async def test_a_stopped_instance_is_marked_down_on_the_other_two(stack: Stack) -> None:
    stopped = "pharos-c"
    stack.compose("stop", "-t", "30", stopped, timeout_s=60)
    async with aiohttp.ClientSession() as client:
        for name in INSTANCES[:2]:

            async def marked_down(name: str = name) -> bool:
                _, text = await get(client, f"{stack.base(name)}/metrics")
                return peer_up(text).get(f"{stopped}:8081") == 0.0

            await until(marked_down, f"{name} marks {stopped} down", 30)
            status, _ = await get(client, f"{stack.front}/healthz")
            assert status == 200  # the front still answers through the two left
