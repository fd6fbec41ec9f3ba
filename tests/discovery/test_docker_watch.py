"""The Docker watcher against a fake daemon on a unix socket: version negotiation, a list
after every event (the recorded 29.1.3 stream), reconnect with backoff, and a restart that
gives the backend its old state back through State (spec §5, §10)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from pharos.discovery.docker import DockerDiscovery, DockerOptions, docker_source, parse_label
from pharos.discovery.docker_api import DockerApi, DockerError, api_version, socket_path
from pharos.engine.types import Residency
from pharos.state import BackendSpec
from tests.discovery.docker_rig import (
    FakeDaemon,
    captured_containers,
    captured_events,
    fake_daemon,
)
from tests.state.fakes import make_state, snap

SPIKE_URL = "http://172.17.0.2:11434"


async def until(condition: Callable[[], bool], timeout_s: float = 3.0) -> None:
    """Wait for something the watcher does on its own task (bounded)."""
    async with asyncio.timeout(timeout_s):
        while True:  # state another task or the daemon changes; bounded above
            if condition():
                return
            await asyncio.sleep(0.005)


def list_count(daemon: FakeDaemon) -> int:
    return daemon.requests.count(f"/v{daemon.api_version}/containers/json")


async def until_listed_after(daemon: FakeDaemon, before: int) -> None:
    """Wait for the list the watcher makes after an event."""
    await until(lambda: list_count(daemon) > before)


class Published:
    def __init__(self) -> None:
        self.sets: list[tuple[str, ...]] = []

    def __call__(self, specs: Sequence[BackendSpec]) -> None:
        self.sets.append(tuple(spec.url for spec in specs))


@contextlib.asynccontextmanager
async def watching(
    discovery: DockerDiscovery,
) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(discovery.run())
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest.mark.parametrize(
    ("environ", "path"),
    [
        # DOCKER_HOST                         socket used
        ({}, "/var/run/docker.sock"),
        ({"DOCKER_HOST": "unix:///run/user/1000/docker.sock"}, "/run/user/1000/docker.sock"),
        ({"DOCKER_HOST": "tcp://10.0.0.1:2376"}, None),
    ],
)
def test_the_socket_comes_from_docker_host(environ: dict[str, str], path: str | None) -> None:
    assert socket_path(environ) == path


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"ApiVersion": "1.41"}, None),
        ({"ApiVersion": "1.52"}, None),
        ({"ApiVersion": "1.12"}, "older than 1.24"),
        ({"Version": "20.10.24"}, "no ApiVersion"),
        (["1.41"], "no ApiVersion"),
    ],
)
def test_the_api_version_is_the_daemons(body: Any, error: str | None) -> None:
    if error is None:
        assert api_version(body) == body["ApiVersion"]
    else:
        with pytest.raises(DockerError, match=error):
            api_version(body)


@pytest.mark.parametrize("version", ["1.41", "1.52"])
async def test_every_path_speaks_the_version_the_daemon_reports(
    tmp_path: Path, version: str
) -> None:
    """Docker 20.10 (1.41) refuses newer paths with a 400; a newer daemon gets its own."""
    socket = tmp_path / "docker.sock"
    daemon = FakeDaemon(api_version=version)
    daemon.containers = captured_containers()
    async with fake_daemon(socket, daemon):
        published = Published()
        discovery = DockerDiscovery(DockerApi(str(socket)), published)
        async with watching(discovery):
            await until(lambda: published.sets != [])
        assert published.sets == [(SPIKE_URL,)]
        assert daemon.requests[0] == "/version"
        assert all(p.startswith(f"/v{version}/") for p in daemon.requests[1:])
        list_query = daemon.queries[daemon.requests.index(f"/v{version}/containers/json")]
        assert list_query == {"filters": '{"label": ["pharos.enable=true"]}'}


async def test_a_daemon_refusing_our_version_is_an_error_not_a_crash(tmp_path: Path) -> None:
    socket = tmp_path / "docker.sock"
    async with fake_daemon(socket, FakeDaemon(api_version="1.41")):
        api = DockerApi(str(socket))
        api.version = "1.43"  # as a client pinned to a newer version would ask
        with pytest.raises(DockerError, match="HTTP 400"):
            await api.running_containers({"pharos.enable": "true"})
        await api.close()


async def test_the_recorded_events_each_bring_a_list(tmp_path: Path) -> None:
    """29.1.3's create, start, kill, stop, die, destroy: the list after each is the truth."""
    socket = tmp_path / "docker.sock"
    daemon = FakeDaemon()
    running_after = {"create": False, "start": True, "kill": True, "stop": True, "die": False}
    async with fake_daemon(socket, daemon):
        published = Published()
        discovery = DockerDiscovery(DockerApi(str(socket)), published)
        async with watching(discovery):
            await until(lambda: daemon.requests.count("/v1.41/containers/json") == 1)
            for event in captured_events():
                lists = daemon.requests.count("/v1.41/containers/json")
                action = event.split(b'"Action":"')[1].split(b'"')[0].decode()
                daemon.containers = captured_containers() if running_after.get(action) else []
                daemon.events.put_nowait(event)
                await until_listed_after(daemon, lists)
        events_query = daemon.queries[daemon.requests.index("/v1.41/events")]
    assert events_query == {"filters": '{"label": ["pharos.enable=true"], "type": ["container"]}'}
    # published only when the set changed: empty, up at start, gone at die
    assert published.sets == [(), (SPIKE_URL,), ()]


async def test_a_lost_daemon_keeps_the_last_set_and_is_reconnected_with_backoff(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pharos.discovery")
    socket = tmp_path / "docker.sock"
    sleeps: list[float] = []
    allow = asyncio.Event()

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) >= 4:
            await allow.wait()
        await asyncio.sleep(0)

    published = Published()
    discovery = DockerDiscovery(DockerApi(str(socket)), published, sleep=sleep)
    daemon = FakeDaemon()
    daemon.containers = captured_containers()
    async with watching(discovery):
        async with fake_daemon(socket, daemon):
            await until(lambda: published.sets == [(SPIKE_URL,)])
        await until(lambda: len(sleeps) >= 4)  # gone: retried at 1, 2, 4, 8 s
        assert sleeps[:4] == [1.0, 2.0, 4.0, 8.0]
        assert published.sets == [(SPIKE_URL,)]  # nothing published while it was gone
        assert discovery.specs is not None and [s.url for s in discovery.specs] == [SPIKE_URL]
        back = FakeDaemon(api_version="1.52")  # came back upgraded
        moved = copy.deepcopy(captured_containers())
        moved[0]["NetworkSettings"]["Networks"]["bridge"]["IPAddress"] = "172.17.0.9"
        back.containers = moved
        async with fake_daemon(socket, back):
            allow.set()
            await until(lambda: len(published.sets) == 2)
            assert published.sets[-1] == ("http://172.17.0.9:11434",)
            assert back.requests[:2] == ["/version", "/v1.52/events"]
            lost = [r for r in caplog.records if "lost the watch" in r.getMessage()]
            assert len(lost) == 1  # logged once per outage, not once per retry
            assert "keeping the last 1 backends" in lost[0].getMessage()
            await until(lambda: any("answers again" in r.getMessage() for r in caplog.records))


async def test_a_container_left_out_is_logged_once_and_the_others_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="pharos.discovery")
    socket = tmp_path / "docker.sock"
    daemon = FakeDaemon()
    bad = copy.deepcopy(captured_containers()[0])
    bad["Id"] = "f" * 64
    bad["Names"] = ["/two-ports"]
    bad["Ports"] = [{"PrivatePort": 8080, "Type": "tcp"}, {"PrivatePort": 9090, "Type": "tcp"}]
    daemon.containers = [bad, *captured_containers()]
    async with fake_daemon(socket, daemon):
        published = Published()
        discovery = DockerDiscovery(DockerApi(str(socket)), published)
        async with watching(discovery):
            await until(lambda: published.sets != [])
            for _ in range(3):
                lists = daemon.requests.count("/v1.41/containers/json")
                daemon.events.put_nowait(captured_events()[1])
                await until_listed_after(daemon, lists)
    assert published.sets == [(SPIKE_URL,)]
    warnings = [r.getMessage() for r in caplog.records if "makes no backend" in r.getMessage()]
    assert warnings == [
        "docker: container two-ports is labelled pharos.enable=true but makes no backend: "
        "exposes TCP ports 8080, 9090; set pharos.port to the engine's"
    ]


async def test_extra_labels_scope_discovery(tmp_path: Path) -> None:
    socket = tmp_path / "docker.sock"
    daemon = FakeDaemon()
    async with fake_daemon(socket, daemon):
        options = DockerOptions(labels={"pharos.enable": "true", "pharos.test": "run-1"})
        discovery = DockerDiscovery(DockerApi(str(socket)), Published(), options)
        await discovery.list_once()
    assert daemon.queries[-1] == {
        "filters": '{"label": ["pharos.enable=true", "pharos.test=run-1"]}'
    }


async def test_docker_restart_gives_the_backend_its_old_state_back(tmp_path: Path) -> None:
    """die, then start: the container is briefly missing from the list (29.1.3) and State's
    memory of the last 32 removed backends brings back its targets, stats and generation."""
    socket = tmp_path / "docker.sock"
    daemon = FakeDaemon()
    daemon.containers = captured_containers()
    h = make_state()
    h.engine.snapshots[SPIKE_URL] = snap(models={"qwen2.5:0.5b": Residency.LOADED})
    async with fake_daemon(socket, daemon):
        discovery = DockerDiscovery(DockerApi(str(socket)), h.state.set_backends)
        async with watching(discovery):
            await until(lambda: discovery.specs is not None and len(discovery.specs) == 1)
            await h.state.run_round(SPIKE_URL)
            target_id = h.state.target_id_of(f"{SPIKE_URL} qwen2.5:0.5b")
            assert target_id is not None
            h.state.observe(target_id, load_s=3.5, service_s=1.25)
            generation = h.state.generation_of(target_id)

            lists = daemon.requests.count("/v1.41/containers/json")
            daemon.containers = []
            daemon.events.put_nowait(captured_events()[4])  # die
            await until_listed_after(daemon, lists)
            gone = h.state.target(target_id, h.clock.now())
            assert gone is not None and gone.draining and not gone.up

            lists = daemon.requests.count("/v1.41/containers/json")
            daemon.containers = captured_containers()
            daemon.events.put_nowait(captured_events()[1])  # start
            await until_listed_after(daemon, lists)
    back = h.state.target(target_id, h.clock.now())
    assert back is not None and not back.draining and back.up
    assert (back.load_s, back.service_s) == (3.5, 1.25)
    assert h.state.generation_of(target_id) == generation  # its prefix entries still count
    assert h.engine.calls.count((SPIKE_URL, "resolve")) == 1


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("com.docker.compose.project=llm", ("com.docker.compose.project", "llm")),
        ("pharos.test = a=b", ("pharos.test", "a=b")),
        ("novalue=", None),
        ("=value", None),
        ("plain", None),
    ],
)
def test_docker_label_arguments_are_key_value(text: str, parsed: tuple[str, str] | None) -> None:
    if parsed is None:
        with pytest.raises(ValueError, match="is not KEY=VALUE"):
            parse_label(text)
    else:
        assert parse_label(text) == parsed


async def test_no_socket_means_no_docker_source() -> None:
    missing = {"DOCKER_HOST": "tcp://10.0.0.1:2376"}
    assert await docker_source(Published(), environ=missing) is None


async def test_the_source_lists_once_before_it_is_returned(tmp_path: Path) -> None:
    socket = tmp_path / "docker.sock"
    daemon = FakeDaemon()
    daemon.containers = captured_containers()
    published = Published()
    async with fake_daemon(socket, daemon):
        source = await docker_source(
            published,
            extra_labels={"com.docker.compose.project": "llm"},
            environ={"DOCKER_HOST": f"unix://{socket}"},
        )
        assert source is not None
        await source.close()
    assert published.sets == [(SPIKE_URL,)]
    assert daemon.queries[-1] == {
        "filters": '{"label": ["pharos.enable=true", "com.docker.compose.project=llm"]}'
    }


async def test_a_socket_that_does_not_answer_yet_is_still_watched(tmp_path: Path) -> None:
    socket = tmp_path / "docker.sock"
    published = Published()
    source = await docker_source(
        published, environ={"DOCKER_HOST": f"unix://{socket}"}, first_list_timeout_s=1.0
    )
    assert source is not None and source.specs is None
    await source.close()
    assert published.sets == []


@pytest.mark.parametrize(
    "reply",
    [
        # what the daemon answers to GET /containers/json
        web.Response(text="<html>proxy error</html>", content_type="text/html"),
        web.json_response({"message": "server error"}, status=500),
        web.json_response({"not": "a list"}),
        web.json_response([1, "two", None]),  # items that aren't containers: skipped
    ],
)
async def test_a_broken_list_keeps_the_last_set_and_the_watch_goes_on(
    tmp_path: Path, reply: web.Response
) -> None:
    socket = tmp_path / "docker.sock"
    daemon = FakeDaemon()
    daemon.containers = captured_containers()
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        await asyncio.sleep(0)

    published = Published()
    async with fake_daemon(socket, daemon):
        discovery = DockerDiscovery(DockerApi(str(socket)), published, sleep=sleep)
        async with watching(discovery):
            await until(lambda: published.sets == [(SPIKE_URL,)])
            daemon.list_reply = reply
            lists = list_count(daemon)
            daemon.events.put_nowait(captured_events()[1])
            await until_listed_after(daemon, lists)
            await until(lambda: sleeps != [] or len(published.sets) > 1)
    if published.sets[1:]:  # a list of non-containers is an empty list, not an error
        assert published.sets == [(SPIKE_URL,), ()]
    else:
        assert discovery.specs is not None and [s.url for s in discovery.specs] == [SPIKE_URL]
        assert sleeps[0] == 1.0
