"""Docker label discovery (spec §10): the running containers labelled pharos.enable=true.

The watcher subscribes to the events stream for labelled containers, lists the running
ones, and lists them again after every event (a `docker restart` sends die then start, and
the container is briefly missing from the list: State keeps its old state for that). Each
new set is handed to `publish`. When the daemon goes away, the last set published holds and
the watcher reconnects with backoff (1 s doubling to 30 s, reset by a list that answered),
learning the API version again, since the daemon may come back upgraded.

A quiet events stream is listed again every `idle_relist_s`: a bound on every read, and a
daemon that stopped answering is then noticed by the list's own timeout.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

import aiohttp

from pharos.discovery.docker_api import DockerApi, DockerError, label_filters
from pharos.discovery.docker_labels import ENABLE_LABELS, LeftOut, backends_of_containers
from pharos.state import BackendSpec

log = logging.getLogger("pharos.discovery")

PublishFn = Callable[[Sequence[BackendSpec]], None]
SleepFn = Callable[[float], Awaitable[None]]


def _enable_labels() -> Mapping[str, str]:
    return dict(ENABLE_LABELS)


@dataclass(frozen=True)
class DockerOptions:
    labels: Mapping[str, str] = field(default_factory=_enable_labels)
    """Every label a container must carry; extra ones scope discovery (e.g. a compose
    project) when several Pharos stacks share one daemon."""
    backoff_start_s: float = 1.0
    backoff_max_s: float = 30.0
    idle_relist_s: float = 60.0


class DockerDiscovery:
    """Keeps `publish` told of the labelled containers' backends; state only for the watch."""

    def __init__(
        self,
        api: DockerApi,
        publish: PublishFn,
        options: DockerOptions = DockerOptions(),
        *,
        sleep: SleepFn = asyncio.sleep,
    ) -> None:
        self._api = api
        self._publish = publish
        self._options = options
        self._sleep = sleep
        self.specs: tuple[BackendSpec, ...] | None = None  # the last set published
        self._left_out: dict[str, str] = {}  # container id -> reason already logged
        self._down_since_logged = False
        self._backoff_s = options.backoff_start_s

    async def close(self) -> None:
        await self._api.close()

    async def list_once(self) -> tuple[BackendSpec, ...]:
        """List the running labelled containers and publish their set if it changed."""
        if self._api.version is None:
            await self._api.connect()
        containers = await self._api.running_containers(self._options.labels)
        specs, left_out = backends_of_containers(containers)
        self._log_left_out(left_out)
        found = tuple(specs)
        if found != self.specs:
            self.specs = found
            self._publish(found)
        return found

    def _log_left_out(self, left_out: Sequence[LeftOut]) -> None:
        current: dict[str, str] = {}
        for item in left_out:
            current[item.container_id] = item.reason
            if self._left_out.get(item.container_id) != item.reason:
                log.warning(
                    "docker: container %s is labelled %s but makes no backend: %s",
                    item.name,
                    ", ".join(f"{k}={v}" for k, v in self._options.labels.items()),
                    item.reason,
                )
        self._left_out = current

    async def run(self) -> None:
        """Watch until cancelled; never raises for the daemon's sake."""
        while True:
            error: Exception = DockerError("the events stream ended")
            try:
                await self._watch()
            except asyncio.CancelledError:
                raise
            except (DockerError, aiohttp.ClientError, TimeoutError, ValueError) as failure:
                error = failure
            self._disconnected(error)
            self._api.version = None  # ask again: the daemon may come back upgraded
            await self._sleep(self._backoff_s)
            self._backoff_s = min(self._backoff_s * 2.0, self._options.backoff_max_s)

    def _connected(self) -> None:
        self._backoff_s = self._options.backoff_start_s
        if self._down_since_logged:
            log.info("docker: the daemon at %s answers again", self._api.socket)
        self._down_since_logged = False

    def _disconnected(self, error: Exception) -> None:
        if not self._down_since_logged:
            kept = 0 if self.specs is None else len(self.specs)
            log.warning(
                "docker: lost the watch on %s (%s); keeping the last %d backends, retrying",
                self._api.socket,
                error,
                kept,
            )
        self._down_since_logged = True

    async def _watch(self) -> None:
        """One connection: subscribe, list, then list again after each event."""
        await self._api.connect()
        filters = json.loads(label_filters(self._options.labels))
        filters["type"] = ["container"]
        response = await self._api.open_stream("/events", {"filters": json.dumps(filters)})
        try:
            await self.list_once()
            self._connected()
            while True:
                try:
                    async with asyncio.timeout(self._options.idle_relist_s):
                        line = await response.content.readline()
                except TimeoutError:
                    await self.list_once()
                    continue
                except ValueError:  # a line over the reader's limit: still an event
                    line = b"{}"
                if not line:
                    return
                if line.strip():
                    await self.list_once()
        finally:
            response.close()


def parse_label(text: str) -> tuple[str, str]:
    """`com.docker.compose.project=llm` -> (key, value); ValueError naming the problem."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip() or not value.strip():
        raise ValueError(f"{text!r} is not KEY=VALUE")
    return key.strip(), value.strip()


async def docker_source(
    publish: PublishFn,
    *,
    extra_labels: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
    first_list_timeout_s: float = 5.0,
) -> DockerDiscovery | None:
    """The Docker source when there is a socket to watch (DOCKER_HOST=unix://..., or
    /var/run/docker.sock exists), after one bounded first list, so the first backend set
    State sees already holds the labelled engines. None (logged) when there is no socket.
    A socket that doesn't answer yet is still watched: the daemon may be starting."""
    env = os.environ if environ is None else environ
    api = DockerApi.from_environment(env)
    if api is None:
        log.warning(
            "docker: DOCKER_HOST=%s is not unix://; label discovery off", env.get("DOCKER_HOST")
        )
        return None
    if "DOCKER_HOST" not in env and not await asyncio.to_thread(os.path.exists, api.socket):
        log.info("docker: no socket at %s; label discovery off", api.socket)
        return None
    labels = dict(ENABLE_LABELS)
    labels.update(extra_labels or {})
    discovery = DockerDiscovery(api, publish, DockerOptions(labels=labels))
    try:
        async with asyncio.timeout(first_list_timeout_s):
            found = await discovery.list_once()
        log.info(
            "docker: watching %s (API %s): %d labelled backends",
            api.socket,
            api.version,
            len(found),
        )
    except (DockerError, aiohttp.ClientError, TimeoutError) as error:
        log.warning("docker: %s does not answer yet (%s); watching it", api.socket, error)
    return discovery
