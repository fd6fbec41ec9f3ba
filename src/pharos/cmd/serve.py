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
from collections.abc import Sequence
from pathlib import Path

from aiohttp import web

from pharos.cmd.runtime import Pharos
from pharos.config import Config, ConfigError, Drain, Duration, HostPort, load_config
from pharos.config.env import serve_defaults
from pharos.config.watch import watch_config
from pharos.discovery.docker import DockerDiscovery, docker_source, parse_label
from pharos.discovery.local import (
    DEFAULT_PORT_NUMBERS,
    DEFAULT_PORTS,
    describe_ports,
    zero_config_backends,
)
from pharos.obs.logfmt import LineFormatter
from pharos.obs.looplag import freeze_startup_objects
from pharos.obs.startup import startup_lines
from pharos.peer.node import Node
from pharos.peer.restore import restore_state_file, save_state_file, write_state_periodically
from pharos.peer.server import PeerSetupError, running_peers
from pharos.policy import PURE_REASON

log = logging.getLogger("pharos")

READY_TIMEOUT_S = 15.0
SECOND_SIGNAL_STATUS = 1
ZERO_CONFIG_LISTEN = HostPort("127.0.0.1", 8090)
ZERO_CONFIG = Config(listen=ZERO_CONFIG_LISTEN, drain=Drain(grace=Duration("0s")))
"""On 127.0.0.1 no load balancer reads /healthz, so a drain grace would only delay Ctrl-C."""


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
        default=None,
        help="debug adds each request's routing decisions (never prompt text); default info",
    )
    add_access_log_argument(parser)
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


def add_access_log_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-access-log",
        dest="access_log",
        action="store_false",
        help="leave out the info line per request (method, path, key, model, target, status, "
        "TTFT, duration, request id)",
    )


LOG_FORMAT = "%(asctime)s level=%(levelname)s logger=%(name)s %(message)s"


def setup_logging(level: str, *, access_log: bool = True) -> None:
    """The format names no thread or process, so records don't look them up: a record took
    8.0 µs to make with them, 2.7 without (one per request, the access line)."""
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LineFormatter(LOG_FORMAT))
    logging.basicConfig(level=getattr(logging, level.upper()), handlers=[handler])
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    if not access_log:
        logging.getLogger("pharos.access").setLevel(logging.WARNING)


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
    env, env_problems = serve_defaults(os.environ)  # flags win over PHAROS_* variables
    if env_problems:
        sys.stderr.write("pharos serve: " + "\n".join(env_problems) + "\n")
        return 2
    setup_logging(args.log_level or env.log_level or "info", access_log=args.access_log)
    config_arg = args.config if args.config is not None else env.config
    config_path: Path | None = Path(config_arg) if config_arg is not None else None
    try:
        config = load_config(config_path) if config_path is not None else ZERO_CONFIG
    except ConfigError as err:
        sys.stderr.write(f"pharos serve: bad config, nothing started:\n{err}\n")
        return 2
    listen_arg, listen_from = (
        (args.listen, "--listen") if args.listen is not None else (env.listen, "PHAROS_LISTEN")
    )
    try:
        listen = HostPort.parse(listen_arg) if listen_arg is not None else config.listen
    except ValueError as err:
        sys.stderr.write(f"pharos serve: {listen_from}: {err}\n")
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
    backends = None
    if config_path is None:
        backends = await zero_config_backends(discover_host, discover_ports)
    pharos = Pharos(config, backends=backends)
    # Docker labels (§10): watched when there is a socket, combined with the static list.
    docker = await docker_source(pharos.set_discovered, extra_labels=docker_labels)
    try:
        return await _serve_pharos(pharos, config, config_path, listen, signals, docker)
    finally:
        if docker is not None:
            await docker.close()


async def _serve_pharos(
    pharos: Pharos,
    config: Config,
    config_path: Path | None,
    listen: HostPort,
    signals: Signals,
    docker: DockerDiscovery | None = None,
) -> int:
    async with contextlib.AsyncExitStack() as peer_stack:
        node: Node | None = None
        if config.peers is not None:  # peer plane (spec §12): its listener opens first
            try:
                node = await peer_stack.enter_async_context(
                    running_peers(
                        peers=config.peers,
                        shared=pharos.shared,
                        table=pharos.peers,
                        clock=pharos.clock,
                        config_now=lambda: pharos.config,
                    )
                )
            except PeerSetupError as err:
                log.error("peers not started, nothing started: %s", err)
                await pharos.stop()
                return 2
        return await _serve_public(pharos, config, config_path, listen, signals, node, docker)


async def _serve_public(
    pharos: Pharos,
    config: Config,
    config_path: Path | None,
    listen: HostPort,
    signals: Signals,
    node: Node | None,
    docker: DockerDiscovery | None,
) -> int:
    drain = config.drain  # a restart-only section: reloads don't change it
    runner = pharos.public_runner(shutdown_timeout_s=drain.timeout.seconds)
    await runner.setup()
    try:
        site = web.TCPSite(runner, listen.host or None, listen.port)
        await site.start()
    except OSError as err:
        log.error("cannot listen on %s: %s", listen, err)
        await runner.cleanup()
        await pharos.stop()
        return 1
    log.info(
        "listening on %s (status page: /status, metrics: /metrics); /healthz answers 503 "
        "until every backend was scraped once",
        _addresses(runner),
    )
    if PURE_REASON:
        log.warning("routing runs its pure-Python build: %s", PURE_REASON)
    background: list[asyncio.Task[None]] = []
    try:
        await pharos.start(restored=False)
        if docker is not None:
            background.append(asyncio.create_task(docker.run()))
        # A stop before the restore must not overwrite the state file with an empty one.
        if not signals.stop.is_set() and await _startup(pharos, config, signals, node):
            pharos.restored.set()
        state_path = Path(config.state_file) if config.state_file is not None else None
        background += [
            asyncio.create_task(write_state_periodically(pharos.shared, state_path)),
            asyncio.create_task(watch_config(pharos, config_path)),
        ]
        await signals.stop.wait()
        await _drain_grace(pharos, drain.grace.seconds, drain.timeout.seconds)
    finally:
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        await runner.cleanup()
        if node is not None and pharos.restored.is_set():
            await node.leave()  # peers drop our gauges now and get our last cells
        if config.state_file is not None and pharos.restored.is_set():
            await save_state_file(pharos.shared, Path(config.state_file))
        await pharos.stop()
    log.info("stopped")
    return 0


async def _startup(pharos: Pharos, config: Config, signals: Signals, node: Node | None) -> bool:
    """Wait (bounded) for the first scrape round, then restore the state file, then every
    reachable peer's snapshot (§12). False when a signal came first."""
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
        await restore_state_file(pharos.shared, Path(config.state_file))
    if node is not None:
        await node.pull_all()
        node.start()
    for line in startup_lines(pharos.state.backends(), pharos.keys, config.policy.value):
        log.info("%s", line)
    freeze_startup_objects()  # a full GC with a restored index took 20 ms; frozen, ~0 (issue 13)
    return True


async def _drain_grace(pharos: Pharos, grace_s: float, timeout_s: float) -> None:
    """Fail /healthz and keep serving for the grace; the caller's runner.cleanup() then
    closes the listener and waits up to drain.timeout for requests in flight."""
    pharos.flags.drain()
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
