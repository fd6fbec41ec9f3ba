"""`pharos serve`: run the router until SIGTERM, then drain (spec §9 "Readiness and drain").

Startup: scrape every backend once, restore the state file, then open the
public listener, so a new instance never routes blind. SIGTERM: /healthz turns
503, requests are still accepted for drain.grace, then the listener closes and
streams in flight get drain.timeout; the state file is written and the process
exits 0. A second signal exits at once.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from pathlib import Path

from aiohttp import web

from pharos.cmd.discover import discover_local
from pharos.cmd.runtime import Pharos, new_session
from pharos.config import Config, ConfigError, HostPort, load_config
from pharos.peer.statefile import StateFileError, read_state_file_async, write_state_file_async

log = logging.getLogger("pharos")

STATE_FILE_INTERVAL_S = 30.0
CONFIG_POLL_INTERVAL_S = 10.0
READY_TIMEOUT_S = 15.0
ZERO_CONFIG_LISTEN = HostPort("127.0.0.1", 8090)


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", "-c", metavar="FILE", default=None,
        help="config file; without one, Pharos finds engines on this host's default ports "
             "(Ollama 11434, llama.cpp 8080, vLLM 8000, SGLang 30000)",
    )
    parser.add_argument(
        "--listen", metavar="HOST:PORT", default=None,
        help="where to listen, overriding the config (default :8090; 127.0.0.1:8090 with "
             "no config)",
    )
    parser.add_argument(
        "--log-level", choices=("debug", "info", "warning", "error"), default="info",
        help="debug adds one line per request (never prompt text)",
    )


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper()),
        format="%(asctime)s level=%(levelname)s logger=%(name)s %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


def run_serve(args: argparse.Namespace) -> int:
    setup_logging(args.log_level)
    config_path: Path | None = Path(args.config) if args.config is not None else None
    try:
        config = load_config(config_path) if config_path is not None else Config(
            listen=ZERO_CONFIG_LISTEN
        )
        listen = HostPort.parse(args.listen) if args.listen is not None else config.listen
    except ConfigError as err:
        sys.stderr.write(f"{err}\n")
        return 2
    except ValueError as err:
        sys.stderr.write(f"--listen: {err}\n")
        return 2
    _install_uvloop()
    try:
        return asyncio.run(serve(config, config_path, listen))
    except KeyboardInterrupt:
        return 130


def _install_uvloop() -> None:
    with contextlib.suppress(ImportError):
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


async def serve(config: Config, config_path: Path | None, listen: HostPort) -> int:
    session = new_session()
    backends = None
    if config_path is None:
        found = await discover_local(session)
        for spec in found:
            log.info("zero-config: found %s at %s", spec.kind.value, spec.url)
        if not found:
            log.warning(
                "zero-config: no engine answered on 127.0.0.1 ports 11434, 8080, 8000 or 30000; "
                "start one, or pass --config FILE (see `pharos serve --help`)"
            )
        backends = found
    pharos = Pharos(config, session=session, backends=backends)
    await pharos.start()
    if not await pharos.wait_ready(READY_TIMEOUT_S):
        log.warning("first scrape round not finished after %.0fs; /healthz stays 503 until it is",
                    READY_TIMEOUT_S)
    if config.state_file is not None:
        await _restore(pharos, config.state_file)

    runner = web.AppRunner(
        pharos.app, handle_signals=False, handler_cancellation=True, access_log=None,
        shutdown_timeout=config.drain.timeout.seconds,
    )
    await runner.setup()
    site = web.TCPSite(runner, listen.host or None, listen.port)
    try:
        await site.start()
    except OSError as err:
        log.error("cannot listen on %s: %s", listen, err)
        await runner.cleanup()
        await pharos.stop()
        await session.close()
        return 1
    log.info("listening on http://%s (status page: /status, metrics: /metrics)", listen)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    signals_seen = 0

    def on_signal() -> None:
        nonlocal signals_seen
        signals_seen += 1
        if signals_seen > 1:
            log.warning("second signal: exiting now")
            os._exit(1)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)

    background = [
        asyncio.create_task(_write_state_periodically(pharos, config.state_file)),
        asyncio.create_task(_watch_config(pharos, config_path)),
    ]
    await stop.wait()

    grace_s = pharos.config.drain.grace.seconds
    log.info("draining: /healthz answers 503; still accepting requests for %.0fs", grace_s)
    pharos.flags.draining = True
    await asyncio.sleep(grace_s)
    log.info("draining: closed the listener; waiting up to %.0fs for %d requests in flight",
             pharos.config.drain.timeout.seconds, pharos.proxy.inflight_streams)
    await runner.cleanup()
    for task in background:
        task.cancel()
    await asyncio.gather(*background, return_exceptions=True)
    if config.state_file is not None:
        await _save(pharos, config.state_file)
    await pharos.stop()
    await session.close()
    log.info("stopped")
    return 0


async def _restore(pharos: Pharos, path: str) -> None:
    try:
        snapshot = await read_state_file_async(path)
    except StateFileError as err:
        log.error("state file not restored, starting empty: %s", err)
        return
    if snapshot is None:
        log.info("no state file at %s yet; it is written every %.0fs", path,
                 STATE_FILE_INTERVAL_S)
        return
    await pharos.restore(snapshot)
    log.info("restored %d usage cells, %d prefix entries and %d target stats from %s",
             len(snapshot.cells), len(snapshot.prefix), len(snapshot.stats), path)


async def _save(pharos: Pharos, path: str) -> None:
    try:
        await write_state_file_async(path, await pharos.snapshot())
    except OSError as err:
        log.error("could not write the state file %s: %s", path, err)


async def _write_state_periodically(pharos: Pharos, path: str | None) -> None:
    if path is None:
        return
    while True:
        await asyncio.sleep(STATE_FILE_INTERVAL_S)
        await _save(pharos, path)


async def _watch_config(pharos: Pharos, path: Path | None) -> None:
    """Hot reload (spec §10): keys, quotas and static backends apply live."""
    if path is None:
        return
    last_mtime = _mtime(path)
    while True:
        await asyncio.sleep(CONFIG_POLL_INTERVAL_S)
        mtime = _mtime(path)
        if mtime is None or mtime == last_mtime:
            continue
        last_mtime = mtime
        try:
            new = await asyncio.to_thread(load_config, path)
        except ConfigError as err:
            log.error("config reload failed; the running config stays:\n%s", err)
            continue
        pending = pharos.apply_config(new)
        log.info("config reloaded: %d keys, %d backends", len(new.keys), len(new.backends))
        for section in pending:
            log.warning("config reload: `%s` changed and needs a restart to take effect", section)


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None
