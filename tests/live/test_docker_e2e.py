"""End to end (spec §14): the Pharos image in front of engine containers it finds by their
labels through the mounted socket, run from the README's compose.yaml with
deploy/docker/compose.e2e.yaml swapping in local engine images (no registry here): two fake
Ollama 0.34.4 and the real llama-server b11312. It asserts only what needs the image and
real containers together, and first that the image runs the compiled build. The tests run
in file order on one stack (SIGTERM last).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import aiohttp
import pytest

from tests.discovery.docker_live import (
    LLAMA_SERVER_DIR,
    REPO_ROOT,
    SMOLLM2_GGUF,
    compose,
    docker,
    prepare_docker,
    python_root,
    wait_http,
)
from tests.discovery.docker_rig import CAPTURES

OLLAMA_MODEL = "qwen2.5:0.5b"
LLAMA_MODEL = "smollm2"
PHAROS_IMAGE = "pharos:dev"


@dataclass
class Stack:
    env: dict[str, str]
    base: str  # http://<pharos container IP>:8090

    def compose(self, *args: str, timeout_s: float = 120.0) -> str:
        files = [REPO_ROOT / "compose.yaml", REPO_ROOT / "deploy/docker/compose.e2e.yaml"]
        return compose(files, args, self.env, timeout_s)

    def container(self, service: str) -> str:
        return self.compose("ps", "-q", service)

    def ip(self, service: str) -> str:
        return docker(
            "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}",
            self.container(service),
        ).split()[0]  # fmt: skip


@pytest.fixture(scope="module")
def image() -> str:
    prepare_docker()
    subprocess.run(
        ["docker", "build", "--network", "host", "-q", "-t", PHAROS_IMAGE, str(REPO_ROOT)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return PHAROS_IMAGE


@pytest.fixture(scope="module")
def stack(image: str) -> Iterator[Stack]:
    run = uuid.uuid4().hex[:12]
    env = dict(os.environ)
    env.update(
        COMPOSE_PROJECT_NAME=f"pharos-e2e-{run}",
        PHAROS_TEST_RUN=run,
        PHAROS_IMAGE=image,
        PHAROS_REPO=str(REPO_ROOT),
        PHAROS_PYTHON=sys.executable,
        PHAROS_PY_ROOT=python_root(),
        OLLAMA_LOG=str(CAPTURES / "engines/ollama/v0.34.4/engine.log"),
        LLAMACPP_DIR=str(LLAMA_SERVER_DIR),
        MODELS_DIR=str(SMOLLM2_GGUF.parent),
        LLAMACPP_MODEL=SMOLLM2_GGUF.name,
        DOCKER_GID=str(os.stat("/var/run/docker.sock").st_gid),
        PHAROS_PUBLISH="127.0.0.1::8090",
    )
    pending = Stack(env, "")
    try:
        pending.compose("up", "-d", "--no-build")
        pending.base = f"http://{pending.ip('pharos')}:8090"
        wait_http(f"{pending.base}/healthz", timeout_s=60)
        yield pending
    finally:
        pending.compose("down", "-v", "--timeout", "2")


BUILD_REPORT = """
import json, shutil
import pharos.policy.cost, pharos.policy.least_load, pharos.sched.candidates, pharos.state.view
import pharos.prefix.chain as chain, pharos.prefix.links as links
from pharos.policy._load import implementation
modules = (pharos.policy.cost, pharos.policy.least_load, pharos.sched.candidates, pharos.state.view)
print(json.dumps({
    "modules": {m.__name__: implementation(m) for m in modules},
    "chain": chain.IMPLEMENTATION,
    "index": links.IMPLEMENTATION,
    "compiler": [c for c in ("cc", "gcc") if shutil.which(c)],
}))
"""


COMPILED = "mypyc"
PURE = "python"


# env given to `docker run`    | policy, candidates, view | chain and index links
@pytest.mark.parametrize(
    ("env", "modules", "chain"),
    [
        ([], COMPILED, "c"),  # the image as shipped
        (["PHAROS_PURE_PYTHON=1"], PURE, PURE),  # the switch still reaches the source build
    ],
)
def test_the_image_runs_the_compiled_policy_and_chain_links_without_a_compiler(
    image: str, env: list[str], modules: str, chain: str
) -> None:
    """The build stage compiles (setup.py: mypyc, prefix/_chainc.c and _indexc.c); the final
    stage, run as its own user, loads those builds and has no compiler left in it. The
    pure-Python fallback here cost pick p50 ~45 instead of ~8 us."""
    name = f"pharos-e2e-build-{uuid.uuid4().hex[:12]}"
    env_args = [arg for pair in env for arg in ("-e", pair)]
    out = docker(
        "run", "--rm", "--name", name, "--label", "pharos.test=build", "--network", "none",
        *env_args, "--entrypoint", "python", image, "-c", BUILD_REPORT,
    )  # fmt: skip
    report = json.loads(out.splitlines()[-1])
    assert report["modules"] == {
        "pharos.policy.cost": modules,
        "pharos.policy.least_load": modules,
        "pharos.sched.candidates": modules,
        "pharos.state.view": modules,
    }, report
    assert report["chain"] == report["index"] == chain, report
    assert report["compiler"] == [], report


async def metrics(stack: Stack) -> str:
    async with aiohttp.ClientSession() as client, client.get(f"{stack.base}/metrics") as reply:
        return await reply.text()


def samples(text: str, name: str) -> dict[str, float]:
    found: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels, _, value = line.rpartition(" ")
            found[labels[len(name) :]] = float(value)
    return found


async def until_metrics(stack: Stack, check: object, what: str, timeout_s: float = 90.0) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        text = await metrics(stack)
        if callable(check) and check(text):
            return text
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s:.0f} s: {what}")
        await asyncio.sleep(0.5)


def kinds_up(text: str) -> list[str]:
    """The kinds of the backends that are up: pharos_backend_up{backend} joined with
    pharos_backend_info{backend,kind,version} (up carries no kind or version label)."""
    backend = re.compile(r'backend="([^"]+)"')
    kinds = {
        b[1]: k[1]
        for key in samples(text, "pharos_backend_info")
        if (b := backend.search(key)) and (k := re.search(r'kind="(\w+)"', key))
    }
    ups = samples(text, "pharos_backend_up")
    return sorted(
        kinds.get(b[1], "?") for key, v in ups.items() if v == 1.0 if (b := backend.search(key))
    )


def feeds_up(text: str) -> list[float]:
    return sorted(samples(text, "pharos_backend_log_feed_up").values())


def chat(model: str, max_tokens: int) -> dict[str, object]:
    return {
        "model": model,
        "stream": True,
        "max_tokens": max_tokens,
        "messages": [{"role": "user", "content": f"Count to ten. ({uuid.uuid4().hex})"}],
    }


@dataclass
class Streamed:
    status: int
    events: list[bytes]
    complete: bool  # ended with data: [DONE] and a clean end of body
    error: str | None


async def stream(
    client: aiohttp.ClientSession, base: str, body: dict[str, object], first: asyncio.Event | None
) -> Streamed:
    events: list[bytes] = []
    try:
        async with client.post(f"{base}/v1/chat/completions", json=body) as reply:
            async for line in reply.content:
                if line.startswith(b"data: "):
                    events.append(line.strip())
                    if first is not None:
                        first.set()
            return Streamed(reply.status, events, events[-1:] == [b"data: [DONE]"], None)
    except aiohttp.ClientError as error:
        return Streamed(0, events, False, type(error).__name__)


def usage_chunks(events: list[bytes]) -> list[bytes]:
    return [e for e in events if e != b"data: [DONE]" and json.loads(e[6:]).get("choices") == []]


async def test_every_labelled_engine_is_found_with_its_kind(stack: Stack) -> None:
    """Two Ollama (kind auto, exposed port 11434) and llama-server through pharos.port."""
    text = await until_metrics(
        stack,
        lambda t: kinds_up(t) == ["llamacpp", "ollama", "ollama"] and feeds_up(t) == [1.0, 1.0],
        "3 engines up and both Ollama log feeds connected",
    )
    feeds = samples(text, "pharos_backend_log_feed_up")  # Ollama's recipe has a log probe
    assert sorted(feeds.values()) == [1.0, 1.0], feeds


async def test_a_stream_arrives_whole_without_the_usage_chunk_and_is_metered(
    stack: Stack,
) -> None:
    async with aiohttp.ClientSession() as client:
        for model in (OLLAMA_MODEL, LLAMA_MODEL):
            got = await stream(client, stack.base, chat(model, 12), None)
            assert got.status == 200 and got.complete, (model, got)
            assert usage_chunks(got.events) == [], model  # Pharos asked for it, then dropped it
            last = json.loads(got.events[-2][6:])
            assert last["choices"][0]["finish_reason"] in ("stop", "length"), model
    text = await metrics(stack)
    tokens = samples(text, "pharos_tokens_total")
    for model in (OLLAMA_MODEL, LLAMA_MODEL):
        metered = [v for k, v in tokens.items() if f'model="{model}"' in k]
        assert metered and sum(metered) > 0, (model, tokens)
    assert not any(v > 0 for v in samples(text, "pharos_unmetered_requests_total").values())


async def test_an_engine_killed_mid_stream_cuts_only_that_stream(stack: Stack) -> None:
    """Kill the Ollama serving a long stream: that stream is cut (never a clean end), a
    stream on llama-server beside it completes, and the next request goes to the other
    Ollama."""
    async with aiohttp.ClientSession() as client:
        other_first = asyncio.Event()
        other = asyncio.create_task(stream(client, stack.base, chat(LLAMA_MODEL, 150), other_first))
        await asyncio.wait_for(other_first.wait(), 60)
        first = asyncio.Event()
        victim = asyncio.create_task(stream(client, stack.base, chat(OLLAMA_MODEL, 400), first))
        await asyncio.wait_for(first.wait(), 30)
        inflight = samples(await metrics(stack), "pharos_target_inflight")
        busy = [key for key, value in inflight.items() if value >= 1 and OLLAMA_MODEL in key]
        assert len(busy) == 1, inflight
        ips = {stack.ip(s): s for s in ("ollama-a", "ollama-b")}
        serving = next(ips[ip] for ip in ips if f"//{ip}:" in busy[0])
        docker("kill", stack.container(serving))
        cut, beside = await asyncio.wait_for(asyncio.gather(victim, other), 120)
        assert not cut.complete, cut  # an incomplete read, not a truncated reply passed off
        assert beside.status == 200 and beside.complete, beside
        survivor = next(s for s in ips.values() if s != serving)
        after = await stream(client, stack.base, chat(OLLAMA_MODEL, 5), None)
        assert after.status == 200 and after.complete, after
    inflight = samples(await metrics(stack), "pharos_target_inflight")
    assert all(value == 0 for value in inflight.values()), inflight  # the lease was released
    assert stack.container(survivor)


async def until_healthy(container: str, timeout_s: float = 90.0) -> None:
    """Docker runs the first HEALTHCHECK one interval after the start: wait for it."""
    deadline = time.monotonic() + timeout_s
    while True:
        health = json.loads(docker("inspect", "-f", "{{json .State.Health}}", container))
        if health["Status"] == "healthy":
            return
        assert health["Status"] == "starting", health
        if time.monotonic() > deadline:
            raise AssertionError(f"not healthy within {timeout_s:.0f} s: {health}")
        await asyncio.sleep(1.0)


async def test_sigterm_lets_a_stream_in_flight_finish_and_the_container_exits_0(
    stack: Stack,
) -> None:
    pharos = stack.container("pharos")
    await until_healthy(pharos)  # the image's HEALTHCHECK on /healthz
    async with aiohttp.ClientSession() as client:
        first = asyncio.Event()
        running = asyncio.create_task(stream(client, stack.base, chat(OLLAMA_MODEL, 120), first))
        await asyncio.wait_for(first.wait(), 30)
        assert docker("inspect", "-f", "{{.Config.User}}", pharos) == "pharos"
        stopping = asyncio.create_task(asyncio.to_thread(docker, "stop", "-t", "60", pharos))
        got = await asyncio.wait_for(running, 60)
        await asyncio.wait_for(stopping, 90)
    assert got.status == 200 and got.complete, got
    assert len(got.events) > 100  # the whole reply, not a cut one
    state = json.loads(docker("inspect", "-f", "{{json .State}}", pharos))
    assert (state["Running"], state["ExitCode"]) == (False, 0)
