"""The peer listener: its own aiohttp server on peers.listen, never the public one, and the
node built from the `peers:` config section."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp
from aiohttp import web

from pharos.clock import Clock
from pharos.config import Config, Peers
from pharos.peer.fingerprint import fingerprint
from pharos.peer.members import Members, Resolve, system_resolve
from pharos.peer.node import Node, NodeOptions
from pharos.peer.restore import Shared
from pharos.peer.table import PeerTable
from pharos.peer.transport import ORIGIN_HEADER, HttpTransport, Reply, new_peer_session

log = logging.getLogger("pharos.peer")


class PeerSetupError(Exception):
    """peers: can't start (no secret, or the listener can't bind); the text says why."""


def read_secret(path: str) -> bytes:
    """The shared secret, whitespace around it stripped; refused when missing or empty."""
    try:
        secret = Path(path).read_bytes().strip()
    except OSError as err:
        raise PeerSetupError(
            f"peers.secret_file: can't read {path} ({err.strerror or err}); "
            "peers refuse to start without the shared secret"
        ) from err
    if not secret:
        raise PeerSetupError(f"peers.secret_file: {path} is empty; peers need a shared secret")
    try:
        secret.decode("ascii")
    except UnicodeDecodeError as err:
        raise PeerSetupError(
            f"peers.secret_file: {path} must hold printable ASCII (it is sent as a bearer token)"
        ) from err
    if any(c < 0x21 or c > 0x7E for c in secret):
        raise PeerSetupError(
            f"peers.secret_file: {path} must hold one token with no spaces or control characters"
        )
    return secret


def build_node(
    *,
    peers: Peers,
    shared: Shared,
    table: PeerTable,
    session: aiohttp.ClientSession,
    clock: Clock,
    config_now: Callable[[], Config],
    secret: bytes,
    resolve: Resolve = system_resolve,
    options: NodeOptions | None = None,
) -> Node:
    zone = str(shared.usage.zone)
    cache: dict[int, int] = {}

    def current_fingerprint() -> int:
        current = config_now()
        key = id(current)
        if key not in cache:
            cache.clear()
            cache[key] = fingerprint(current, zone)
        return cache[key]

    options = options if options is not None else NodeOptions()
    return Node(
        shared=shared,
        table=table,
        transport=HttpTransport(session, options.max_body_bytes),
        members=Members(
            members=peers.members,
            dns=peers.dns,
            default_port=peers.listen.port,
            resolve=resolve,
        ),
        secret=secret,
        clock=clock,
        fingerprint=current_fingerprint,
        options=options,
    )


async def _stream_parts(request: web.Request, reply: Reply, origin: int) -> web.StreamResponse:
    """A snapshot part by part: one 17 MB write made the loop copy it into the socket
    buffer in one step; each part is a slice of ~40 KB."""
    response = web.StreamResponse(
        status=reply.status,
        headers={ORIGIN_HEADER: str(origin), "Content-Type": "application/msgpack"},
    )
    response.content_length = sum(len(part) for part in reply.parts)
    await response.prepare(request)
    for part in reply.parts:
        await response.write(part)
    await response.write_eof()
    return response


def peer_app(node: Node) -> web.Application:
    async def handler(request: web.Request) -> web.StreamResponse:
        try:
            body = await request.read() if request.can_read_body else b""
        except web.HTTPException as exc:  # 413 from aiohttp's body limit
            return web.Response(status=exc.status, headers={ORIGIN_HEADER: str(node.origin)})
        reply = await node.handle(request.method, request.path, request.headers, body)
        if reply.parts:
            return await _stream_parts(request, reply, node.origin)
        return web.Response(
            status=reply.status,
            body=reply.body,
            headers={ORIGIN_HEADER: str(node.origin)},
            content_type="application/msgpack" if reply.status == 200 else "application/json",
        )

    app = web.Application(client_max_size=node.options.max_request_bytes)
    app.router.add_route("*", "/{tail:.*}", handler)
    return app


@contextlib.asynccontextmanager
async def peer_listener(node: Node, host: str, port: int) -> AsyncIterator[list[str]]:
    """Serve the peer endpoints on host:port; yields the bound addresses."""
    runner = web.AppRunner(
        peer_app(node), handle_signals=False, access_log=None, shutdown_timeout=1.0
    )
    await runner.setup()
    try:
        site = web.TCPSite(runner, host or None, port)
        try:
            await site.start()
        except OSError as err:
            raise PeerSetupError(f"peers.listen: cannot listen on {host}:{port}: {err}") from err
        yield [f"{a[0]}:{a[1]}" for a in runner.addresses]
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def running_peers(
    *,
    peers: Peers,
    shared: Shared,
    table: PeerTable,
    clock: Clock,
    config_now: Callable[[], Config],
    resolve: Resolve = system_resolve,
    options: NodeOptions | None = None,
) -> AsyncIterator[Node]:
    """The peer plane for `serve`: secret read (PeerSetupError without one), listener open on
    peers.listen; the caller pulls snapshots, starts the senders and finally calls leave()."""
    secret = read_secret(peers.secret_file)
    session = new_peer_session()
    node = build_node(
        peers=peers,
        shared=shared,
        table=table,
        session=session,
        clock=clock,
        config_now=config_now,
        secret=secret,
        resolve=resolve,
        options=options,
    )
    try:
        async with peer_listener(node, peers.listen.host, peers.listen.port) as addresses:
            log.info("peers: listening on %s (origin %016x)", ", ".join(addresses), node.origin)
            yield node
    finally:
        await node.stop()
        await session.close()
