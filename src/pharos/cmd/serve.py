"""`pharos serve`: run the router until SIGTERM, then drain (spec §9 "Readiness and drain").

Startup: the public listener opens first, with /healthz answering 503; every
backend is scraped once and the state file restored, and only then does
/healthz answer 200, so a load balancer never sends traffic to an instance that
would route blind. SIGTERM: /healthz turns 503, requests are still accepted
for drain.grace, then the listener closes and requests in flight get
drain.timeout; the state file is written and the process exits 0. A second
signal exits at once (status 1).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import aiohttp
from aiohttp import web

from pharos.cmd.discover import (
    DEFAULT_PORT_NUMBERS,
    DEFAULT_PORTS,
    describe_ports,
    discover_local,
)
from pharos.cmd.runtime import Pharos, new_session
from pharos.config import Config, ConfigError, Drain, Duration, HostPort, load_config
from pharos.discovery.docker import DockerDiscovery, docker_source, parse_label
from pharos.peer.statefile import StateFileError, read_state_file_async, write_state_file_async
from pharos.state import BackendSpec

log = logging.getLogger("pharos")

STATE_FILE_INTERVAL_S = 30.0
CONFIG_POLL_INTERVAL_S = 10.0
READY_TIMEOUT_S = 15.0
SECOND_SIGNAL_STATUS = 1
ZERO_CONFIG_LISTEN = HostPort("127.0.0.1", 8090)
ZERO_CONFIG = Config(listen=ZERO_CONFIG_LISTEN, drain=Drain(grace=Duration("0s")))
"""On 127.0.0.1 no load balancer reads /healthz, so a drain grace would only delay Ctrl-C."""

HOW_TO_CONFIGURE = (
    "start an engine on one of those ports and restart, or write a config file listing "
    "your backends and run `pharos serve --config FILE` (see `pharos serve --help`)"
)


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        "-c",
        metavar="FILE",
        default=None,
        help="config file; without one, Pharos finds engines on this host's default ports "
        f"({describe_ports(DEFAULT_PORTS)})",
    )
    parser.add_argument(
        "--listen",
        metavar="HOST:PORT",
        default=None,
        help="where to listen, overriding the config (default :8090; 127.0.0.1:8090 with "
        "no config)",
    )
    parser.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default="info",
        help="debug adds one line per request (never prompt text)",
    )
    parser.add_argument(
        "--docker-label",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="with the Docker socket, discover only containers that also carry this label "
        "(repeatable), e.g. com.docker.compose.project=llm when several stacks share a host",
    )
    # Zero-config probing targets, for tests: a fake engine on a free port.
    parser.add_argument("--discover-host", default="127.0.0.1", help=argparse.SUPPRESS)
    parser.add_argument("--discover-ports", default=None, help=argparse.SUPPRESS)


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper()),
        format="%(asctime)s level=%(levelname)s logger=%(name)s %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


def parse_ports(text: str) -> tuple[int, ...]:
    """`11434,8080` -> (11434, 8080); ValueError naming the bad entry."""
    ports: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or not 0 < int(part) <= 65535:
            raise ValueError(f'"{part}" is not a port number from 1 to 65535')
        ports.append(int(part))
    return tuple(ports)


def run_serve(args: argparse.Namespace) -> int:
    setup_logging(args.log_level)
    config_path: Path | None = Path(args.config) if args.config is not None else None
    try:
        config = load_config(config_path) if config_path is not None else ZERO_CONFIG
    except ConfigError as err:
        sys.stderr.write(f"pharos serve: bad config, nothing started:\n{err}\n")
        return 2
    try:
        listen = HostPort.parse(args.listen) if args.listen is not None else config.listen
    except ValueError as err:
        sys.stderr.write(f"pharos serve: --listen: {err}\n")
        return 2
    discover_ports = DEFAULT_PORT_NUMBERS
    if args.discover_ports is not None:
        try:
            discover_ports = parse_ports(args.discover_ports)
        except ValueError as err:
            sys.stderr.write(f"pharos serve: --discover-ports: {err}\n")
            return 2
    try:
        docker_labels = dict(parse_label(text) for text in args.docker_label)
    except ValueError as err:
        sys.stderr.write(f"pharos serve: --docker-label: {err}\n")
        return 2
    _install_uvloop()
    try:
        return asyncio.run(
            serve(
                config,
                config_path,
                listen,
                discover_host=args.discover_host,
                discover_ports=discover_ports,
                docker_labels=docker_labels,
            )
        )
    except KeyboardInterrupt:
        return 130


def _install_uvloop() -> None:
    with contextlib.suppress(ImportError):
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


class Signals:
    """The first SIGTERM/SIGINT starts the drain; a second one ends the process at once."""

    def __init__(self) -> None:
        self.stop = asyncio.Event()

    def install(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_signal, sig)

    def _on_signal(self, sig: signal.Signals) -> None:
        if self.stop.is_set():
            log.warning("second signal (%s): exiting now, without draining", sig.name)
            logging.shutdown()
            os._exit(SECOND_SIGNAL_STATUS)
        log.info("%s: draining", sig.name)
        self.stop.set()


async def zero_config_backends(
    session: aiohttp.ClientSession, host: str, ports: Sequence[int]
) -> list[BackendSpec]:
    """Probe host:ports and say what answered, or how to configure when nothing did."""
    log.info(
        "zero-config: no --config given; looking for engines on %s ports %s",
        host,
        describe_ports([(port, "") for port in ports]),
    )
    found = await discover_local(session, host=host, ports=ports)
    for spec in found:
        log.info("zero-config: found %s at %s", spec.kind.value, spec.url)
    if not found:
        log.warning(
            "zero-config: no engine answered on %s ports %s; %s",
            host,
            describe_ports([(port, "") for port in ports]),
            HOW_TO_CONFIGURE,
        )
    return found


async def serve(
    config: Config,
    config_path: Path | None,
    listen: HostPort,
    *,
    discover_host: str = "127.0.0.1",
    discover_ports: Sequence[int] = DEFAULT_PORT_NUMBERS,
    docker_labels: dict[str, str] | None = None,
) -> int:
    signals = Signals()
    signals.install()
    session = new_session()
    try:
        backends = None
        if config_path is None:
            backends = await zero_config_backends(session, discover_host, discover_ports)
        pharos = Pharos(config, session=session, backends=backends)
        # Docker labels (§10): watched when there is a socket, combined with the static list.
        docker = await docker_source(pharos.set_discovered, extra_labels=docker_labels)
        try:
            return await _serve_pharos(pharos, config, config_path, listen, signals, docker)
        finally:
            if docker is not None:
                await docker.close()
    finally:
        await session.close()


async def _serve_pharos(
    pharos: Pharos,
    config: Config,
    config_path: Path | None,
    listen: HostPort,
    signals: Signals,
    docker: DockerDiscovery | None = None,
) -> int:
    restored = asyncio.Event()
    pharos.flags.ready = lambda: restored.is_set() and pharos.state.ready
    drain = config.drain  # a restart-only section: reloads don't change it
    runner = web.AppRunner(
        pharos.app,
        handle_signals=False,
        handler_cancellation=True,
        access_log=None,
        shutdown_timeout=drain.timeout.seconds,
    )
    await runner.setup()
    try:
        site = web.TCPSite(runner, listen.host or None, listen.port)
        await site.start()
    except OSError as err:
        log.error("cannot listen on %s: %s", listen, err)
        await runner.cleanup()
        return 1
    log.info(
        "listening on %s (status page: /status, metrics: /metrics); /healthz answers 503 "
        "until every backend was scraped once",
        _addresses(runner),
    )
    background: list[asyncio.Task[None]] = []
    try:
        await pharos.start()
        if docker is not None:
            background.append(asyncio.create_task(docker.run()))
        # A stop before the restore must not overwrite the state file with an empty one.
        if not signals.stop.is_set() and await _startup(pharos, config, signals):
            restored.set()
        state_path = Path(config.state_file) if config.state_file is not None else None
        background += [
            asyncio.create_task(write_state_periodically(pharos, state_path)),
            asyncio.create_task(watch_config(pharos, config_path)),
        ]
        await signals.stop.wait()
        await _drain_grace(pharos, drain.grace.seconds, drain.timeout.seconds)
    finally:
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        await runner.cleanup()
        if config.state_file is not None and restored.is_set():
            await save_state_file(pharos, Path(config.state_file))
        await pharos.stop()
    log.info("stopped")
    return 0


async def _startup(pharos: Pharos, config: Config, signals: Signals) -> bool:
    """Wait (bounded) for the first scrape round, then restore the state file (§12).
    False when a signal came first."""
    ready = asyncio.create_task(pharos.wait_ready(READY_TIMEOUT_S))
    stopped = asyncio.create_task(signals.stop.wait())
    await asyncio.wait((ready, stopped), return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    if not ready.done():
        ready.cancel()
        return False
    if not ready.result():
        log.warning(
            "first scrape round not finished after %.0fs; restoring state anyway", READY_TIMEOUT_S
        )
    if config.state_file is not None:
        await restore_state_file(pharos, Path(config.state_file))
    log.info("ready: %d backends", len(pharos.state.backends()))
    return True


async def _drain_grace(pharos: Pharos, grace_s: float, timeout_s: float) -> None:
    """Fail /healthz and keep serving for the grace; the caller's runner.cleanup() then
    closes the listener and waits up to drain.timeout for requests in flight."""
    pharos.flags.draining = True
    log.info("draining: /healthz answers 503; still accepting requests for %.1fs", grace_s)
    await asyncio.sleep(grace_s)
    log.info(
        "draining: closed the listener; waiting up to %.0fs for %d requests in flight",
        timeout_s,
        pharos.proxy.inflight_streams,
    )


def _addresses(runner: web.AppRunner) -> str:
    names = []
    for address in runner.addresses:
        host, port = address[0], address[1]
        names.append(f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}")
    return ", ".join(names)


# ---- the state file (§12 "Warm restart without peers") ---------------------------------


async def restore_state_file(pharos: Pharos, path: Path) -> bool:
    """Merge the state file if there is one; a corrupt one is logged and startup goes on."""
    try:
        snapshot = await read_state_file_async(path)
    except StateFileError as err:
        log.error("state file not restored, starting empty: %s", err)
        return False
    if snapshot is None:
        log.info(
            "no state file at %s yet; it is written every %.0fs and on shutdown",
            path,
            STATE_FILE_INTERVAL_S,
        )
        return False
    await pharos.restore(snapshot)
    log.info(
        "restored %d usage cells, %d prefix entries and %d target stats from %s",
        len(snapshot.cells),
        len(snapshot.prefix),
        len(snapshot.stats),
        path,
    )
    return True


async def save_state_file(pharos: Pharos, path: Path) -> bool:
    """Snapshot (in slices, on the loop) and write it in a thread; an error is only logged."""
    try:
        await write_state_file_async(path, await pharos.snapshot())
    except OSError as err:
        log.error("could not write the state file %s: %s", path, err)
        return False
    return True


async def write_state_periodically(
    pharos: Pharos,
    path: Path | None,
    interval_s: float = STATE_FILE_INTERVAL_S,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    if path is None:
        return
    while True:
        await sleep(interval_s)
        try:
            await save_state_file(pharos, path)
        except Exception:  # a bug here must not end the writer for the process's lifetime
            log.exception("state file write failed; trying again in %.0fs", interval_s)


# ---- hot reload (§10) --------------------------------------------------------------------


async def reload_config(pharos: Pharos, path: Path) -> bool:
    """Re-read the file and apply it; False (logged) when it doesn't parse: the running
    config stays. Keys, quotas and static backends apply live; other changed sections
    are logged as needing a restart."""
    try:
        new = await asyncio.to_thread(load_config, path)
        pending = pharos.apply_config(new)
    except ConfigError as err:
        log.error("config reload failed; the running config stays:\n%s", err)
        return False
    log.info("config reloaded: %d keys, %d backends", len(new.keys), len(new.backends))
    for section in pending:
        log.warning("config reload: `%s` changed and needs a restart to take effect", section)
    return True


async def reload_if_changed(pharos: Pharos, path: Path, last_mtime_ns: int | None) -> int | None:
    """One poll of the watcher: reload when the modification time moved; returns the
    modification time seen (None when the file is gone, which keeps the running config)."""
    mtime_ns = _mtime_ns(path)
    if mtime_ns is not None and mtime_ns != last_mtime_ns:
        await reload_config(pharos, path)
    return mtime_ns if mtime_ns is not None else last_mtime_ns


async def watch_config(
    pharos: Pharos,
    path: Path | None,
    interval_s: float = CONFIG_POLL_INTERVAL_S,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    if path is None:
        return
    last_mtime_ns = _mtime_ns(path)
    while True:
        await sleep(interval_s)
        try:
            last_mtime_ns = await reload_if_changed(pharos, path, last_mtime_ns)
        except Exception:  # a bug here must not end the watcher; the running config stays
            log.exception("config reload failed; the running config stays")
            last_mtime_ns = _mtime_ns(path)


def _mtime_ns(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None
