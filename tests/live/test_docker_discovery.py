"""Docker label discovery and the docker:// log feed on the machine's real Docker engine
(Debian's docker.io 20.10.24, API 1.41): spec §5, §10, §14's TestLiveDockerLabelsAndLogFeed.

An in-process Pharos (real clock, short intervals) watches the daemon through its socket,
scoped to this run's label pharos.test=<uuid>. The engines run in containers: fake engines
in the busybox image with the host's python mounted read-only, and the real llama-server
b11312 with SmolLM2.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field

import pytest

from pharos.cmd.runtime import Pharos, RuntimeOptions, running
from pharos.config import Config
from pharos.discovery.docker import DockerDiscovery, DockerOptions
from pharos.discovery.docker_api import DockerApi
from pharos.engine.types import Kind
from pharos.state import BackendSpec, StateOptions
from tests.discovery.docker_live import Containers, docker, prepare_docker
from tests.discovery.docker_rig import CAPTURES

OLLAMA_LOG = CAPTURES / "engines/ollama/v0.34.4/engine.log"  # holds OLLAMA_NUM_PARALLEL:2
FAST = StateOptions(
    fast_interval_s=0.25, full_interval_s=0.5, log_backoff_start_s=0.2, log_backoff_max_s=1.0
)


@pytest.fixture
def containers() -> Iterator[Containers]:
    prepare_docker()  # idempotent: ~0.3 s once dockerd runs and the images exist
    run = Containers()
    try:
        yield run
    finally:
        run.remove_all()


@dataclass
class Watched:
    pharos: Pharos
    discovery: DockerDiscovery
    published: list[tuple[str, ...]] = field(default_factory=list)

    def backend(self, url: str) -> object | None:
        return next((b for b in self.pharos.state.backends() if b.url == url), None)


@contextlib.asynccontextmanager
async def watching(run: Containers) -> AsyncIterator[Watched]:
    pharos = Pharos(Config(), backends=[], options=RuntimeOptions(state=FAST))
    published: list[tuple[str, ...]] = []

    def publish(specs: Sequence[BackendSpec]) -> None:
        published.append(tuple(spec.url for spec in specs))
        pharos.set_discovered(specs)

    api = DockerApi.from_environment()
    assert api is not None
    discovery = DockerDiscovery(
        api, publish, DockerOptions(labels=run.labels, backoff_start_s=0.2, idle_relist_s=5.0)
    )
    async with running(pharos):
        task = asyncio.create_task(discovery.run())
        try:
            yield Watched(pharos, discovery, published)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await discovery.close()


async def until(condition: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    try:
        async with asyncio.timeout(timeout_s):
            while True:  # state another task or the daemon changes; bounded above
                if condition():
                    return
                await asyncio.sleep(0.1)
    except TimeoutError:
        raise AssertionError(f"not within {timeout_s:.0f} s: {what}") from None


def kinds(watched: Watched) -> dict[str, Kind]:
    return {b.url: b.kind for b in watched.pharos.state.backends() if b.version is not None}


async def test_labelled_containers_are_found_with_their_kind_and_stop_drains_them(
    containers: Containers, caplog: pytest.LogCaptureFixture
) -> None:
    """Fake Ollama and vLLM (kind auto, one exposed port each), the real llama-server found
    through pharos.port, and a container exposing two ports with no pharos.port: left out."""
    caplog.set_level(logging.WARNING, logger="pharos.discovery")
    ollama = containers.fake_engine("ollama", "ollama", 11434)
    vllm = containers.fake_engine("vllm", "vllm", 8000)
    llama = containers.llama_server("llamacpp")
    two_ports = containers.start(
        "two-ports", ["sleep", "600"], options=["--expose", "8080", "--expose", "9090"]
    )
    urls = {
        f"http://{ollama.ip()}:11434": Kind.OLLAMA,
        f"http://{vllm.ip()}:8000": Kind.VLLM,
        f"http://{llama.ip()}:8080": Kind.LLAMACPP,
    }
    async with watching(containers) as watched:
        await until(lambda: kinds(watched) == urls, f"kinds {urls}")
        left_out = [r.getMessage() for r in caplog.records if "makes no backend" in r.getMessage()]
        assert left_out == [
            f"docker: container {two_ports.name} is labelled pharos.enable=true, "
            f"pharos.test={containers.run} but makes no backend: exposes TCP ports 8080, "
            "9090; set pharos.port to the engine's"
        ]
        feeds = {b.url: b.log_feed for b in watched.pharos.state.backends()}
        assert feeds[f"http://{ollama.ip()}:11434"] == f"docker://{ollama.id}"

        vllm_url = f"http://{vllm.ip()}:8000"
        docker("stop", "-t", "2", vllm.id)
        await until(
            lambda: all(b.draining for b in watched.pharos.state.backends() if b.url == vllm_url),
            "vllm draining",
        )
        assert vllm_url not in watched.published[-1]
        views = watched.pharos.state.targets_of_backend(vllm_url, watched.pharos.clock.now())
        assert views and all(view.draining and not view.up for view in views)
        ollama_url = f"http://{ollama.ip()}:11434"
        assert not any(b.draining for b in watched.pharos.state.backends() if b.url == ollama_url)


async def test_the_log_feed_fills_capacity_unknown_across_a_restart_and_state_comes_back(
    containers: Containers,
) -> None:
    """Ollama reports its slots only in its log (OLLAMA_NUM_PARALLEL:2 in the captured
    0.34.4 engine.log); docker stop/start and docker restart keep the backend's state."""
    ollama = containers.fake_engine("ollama", "ollama", 11434, log=OLLAMA_LOG)
    url = f"http://{ollama.ip()}:11434"
    key = f"{url} qwen2.5:0.5b"
    async with watching(containers) as watched:
        state = watched.pharos.state

        def capacity() -> int | None:
            target_id = state.target_id_of(key)
            view = None if target_id is None else state.target(target_id, state_now())
            return None if view is None else view.capacity

        def state_now() -> float:
            return watched.pharos.clock.now()

        await until(lambda: capacity() == 2, "capacity 2 from the log")
        target_id = state.target_id_of(key)
        assert target_id is not None
        state.observe(target_id, load_s=0.7, service_s=1.5)
        generation = state.generation_of(target_id)

        docker("stop", "-t", "2", ollama.id)
        await until(lambda: capacity() is None, "capacity unknown while stopped")
        view = state.target(target_id, state_now())
        assert view is not None and view.draining

        docker("start", ollama.id)
        await until(lambda: capacity() == 2, "capacity back after the start")
        back = state.target(target_id, state_now())
        assert back is not None and not back.draining
        assert (back.load_s, back.service_s) == (0.7, 1.5)
        assert state.generation_of(target_id) == generation

        # docker restart: die then start. Whether a list lands between them (29.1.3 was
        # seen without the container) is a race; either way the state must hold.
        docker("restart", "-t", "2", ollama.id)
        await until(lambda: capacity() == 2, "capacity back after docker restart")
        again = state.target(target_id, state_now())
        assert again is not None and not again.draining
        assert (again.load_s, again.service_s) == (0.7, 1.5)
        assert state.target_id_of(key) == target_id
