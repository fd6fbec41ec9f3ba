"""proxy/pool.py against a real socket: what goes on the wire, and when a connection is
reused, retried or dropped."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pharos.proxy.credentials import CredentialsRef, CredentialTable
from pharos.proxy.pool import UpstreamClient
from pharos.proxy.wire import ClosedBeforeReply, ConnectFailed

REPLY = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
STREAM_HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"


class Engine:
    """A raw HTTP server: records each request's bytes and the connection it came on, and
    answers with `reply` (None: close the connection without a byte)."""

    def __init__(self) -> None:
        self.requests: list[tuple[int, bytes]] = []
        self.connections = 0
        self.reply: bytes | None = REPLY
        self.closed = asyncio.Event()
        self.received = asyncio.Event()
        self.port = 0

    def protocol(self) -> asyncio.Protocol:
        engine = self
        engine.connections += 1
        number = engine.connections

        class One(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                self.transport = transport
                self.buffer = b""

            def connection_lost(self, _exc: Exception | None) -> None:
                engine.closed.set()

            def data_received(self, data: bytes) -> None:
                self.buffer += data
                head, sep, body = self.buffer.partition(b"\r\n\r\n")
                if not sep:
                    return
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                if len(body) < length:
                    return
                engine.requests.append((number, self.buffer))
                engine.received.set()
                self.buffer = b""
                if engine.reply is None:
                    self.transport.close()
                else:
                    self.transport.write(engine.reply)  # type: ignore[attr-defined]

        return One()


@pytest.fixture
async def engine() -> AsyncIterator[Engine]:
    found = Engine()
    server = await asyncio.get_running_loop().create_server(found.protocol, "127.0.0.1", 0)
    found.port = server.sockets[0].getsockname()[1]
    yield found
    server.close()


def base(engine: Engine, path: str = "") -> str:
    return f"http://127.0.0.1:{engine.port}{path}"


async def post(client: UpstreamClient, url: str, headers: list[tuple[str, str]]) -> bytes:
    reply = await client.post(url, "/v1/chat/completions?x=1", b"{}", headers, idle_s=5.0)
    body = await reply.read()
    reply.release()
    return body


async def test_the_request_carries_host_length_the_clients_type_and_only_its_backends_keys(
    engine: Engine,
) -> None:
    table = CredentialTable({base(engine, "/proxy"): {"Authorization": "Bearer sk-up"}})
    client = UpstreamClient(CredentialsRef(table))
    await post(client, base(engine, "/proxy"), [("Content-Type", "application/json")])
    await post(client, base(engine), [("X-Request-Id", "r1")])
    await client.close()
    (_, with_key), (_, without) = engine.requests
    head = with_key.split(b"\r\n\r\n")[0].split(b"\r\n")
    assert head[0] == b"POST /proxy/v1/chat/completions?x=1 HTTP/1.1"
    assert f"Host: 127.0.0.1:{engine.port}".encode() in head
    assert b"Content-Type: application/json" in head
    assert b"Content-Length: 2" in head
    assert b"Authorization: Bearer sk-up" in head
    assert b"authorization" not in without.lower()  # another path of the same origin: no key
    assert b"Content-Type: application/octet-stream" in without  # as aiohttp sent it
    assert b"X-Request-Id: r1" in without


async def test_a_header_value_with_a_line_break_is_never_sent(engine: Engine) -> None:
    client = UpstreamClient()
    await post(client, base(engine), [("X-Evil", "a\r\nX-Injected: 1"), ("X-Fine", "ok")])
    await client.close()
    [(_, request)] = engine.requests
    assert b"X-Injected" not in request
    assert b"X-Fine: ok" in request


async def test_a_reply_read_to_its_end_leaves_its_connection_for_the_next_request(
    engine: Engine,
) -> None:
    client = UpstreamClient()
    for _ in range(3):
        assert await post(client, base(engine), []) == b"{}"
    await client.close()
    assert [number for number, _ in engine.requests] == [1, 1, 1]


async def test_a_reply_not_read_to_its_end_closes_its_connection(engine: Engine) -> None:
    engine.reply = STREAM_HEAD  # never ends
    client = UpstreamClient()
    reply = await client.post(base(engine), "/", b"{}", [], idle_s=5.0)
    assert reply.read_nowait() == b"hello"
    reply.release()
    async with asyncio.timeout(5.0):
        await engine.closed.wait()
    engine.reply = REPLY
    assert await post(client, base(engine), []) == b"{}"
    await client.close()
    assert [number for number, _ in engine.requests] == [1, 2]
    assert client.idle_connections() == 0


async def test_an_idle_connection_past_the_keepalive_is_not_reused(engine: Engine) -> None:
    client = UpstreamClient(keepalive_s=0.0)
    await post(client, base(engine), [])
    await post(client, base(engine), [])
    await client.close()
    assert [number for number, _ in engine.requests] == [1, 2]


async def test_a_connection_closed_before_the_reply_is_tried_once_more_on_a_new_one(
    engine: Engine,
) -> None:
    client = UpstreamClient()
    await post(client, base(engine), [])  # leaves connection 1 pooled
    engine.reply = None
    with pytest.raises(ClosedBeforeReply):
        await post(client, base(engine), [])
    await client.close()
    assert [number for number, _ in engine.requests] == [1, 1, 2]  # the pooled one, one new


async def test_the_client_leaving_mid_wait_closes_the_upstream_connection(engine: Engine) -> None:
    engine.reply = b""  # the engine reads the request and says nothing
    client = UpstreamClient()
    task = asyncio.create_task(client.post(base(engine), "/", b"{}", [], idle_s=60.0))
    async with asyncio.timeout(5.0):
        await engine.received.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    async with asyncio.timeout(5.0):
        await engine.closed.wait()
    await client.close()


async def test_a_refused_connection_is_connect_failed() -> None:
    client = UpstreamClient()
    with pytest.raises(ConnectFailed):
        await client.post("http://127.0.0.1:1", "/", b"{}", [], idle_s=5.0)
    with pytest.raises(ConnectFailed):
        await client.post("ftp://127.0.0.1:1", "/", b"{}", [], idle_s=5.0)
    await client.close()


@pytest.fixture
def tls(tmp_path: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(the server's context, a client context that trusts only its self-signed cert)."""
    if shutil.which("openssl") is None:
        pytest.skip("no openssl binary to make a certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    argv = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    argv += ["-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"]
    argv += ["-addext", "subjectAltName=IP:127.0.0.1"]
    subprocess.run(
        argv,
        check=True,
        capture_output=True,
    )
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert, key)
    return server, ssl.create_default_context(cafile=str(cert))


async def test_an_https_backend_is_verified_and_served(
    tls: tuple[ssl.SSLContext, ssl.SSLContext],
) -> None:
    server_context, trusting = tls
    engine = Engine()
    server = await asyncio.get_running_loop().create_server(
        engine.protocol, "127.0.0.1", 0, ssl=server_context
    )
    port = server.sockets[0].getsockname()[1]
    try:
        client = UpstreamClient(ssl_context=trusting)
        assert await post(client, f"https://127.0.0.1:{port}", []) == b"{}"
        await client.close()
        with pytest.raises(ConnectFailed):  # the system's CAs don't know this certificate
            await post(UpstreamClient(), f"https://127.0.0.1:{port}", [])
    finally:
        server.close()
    [(_, request)] = engine.requests
    assert f"Host: 127.0.0.1:{port}".encode() in request


async def test_header_bytes_outside_ascii_reach_the_engine_as_the_client_sent_them(
    engine: Engine,
) -> None:
    """aiohttp's server decodes header bytes as UTF-8 with surrogateescape: encoded back the
    same way they round-trip, undecodable bytes included (latin-1 raised on CJK text)."""
    sent = "中文 é".encode() + b" \xff"
    value = sent.decode("utf-8", "surrogateescape")
    client = UpstreamClient()
    await post(client, base(engine), [("X-Title", value)])
    await client.close()
    [(_, request)] = engine.requests
    assert b"X-Title: " + sent + b"\r\n" in request


async def test_a_reloaded_credentials_table_is_used_from_the_next_request(engine: Engine) -> None:
    ref = CredentialsRef(CredentialTable({base(engine): {"X-Api-Key": "old"}}))
    client = UpstreamClient(ref)
    await post(client, base(engine), [])
    ref.table = CredentialTable({base(engine): {"X-Api-Key": "new"}})  # what apply_config does
    await post(client, base(engine), [])
    ref.table = CredentialTable({})
    await post(client, base(engine), [])
    await client.close()
    keys = [
        request.split(b"X-Api-Key: ")[1][:3] if b"X-Api-Key" in request else b""
        for _, request in engine.requests
    ]
    assert keys == [b"old", b"new", b""]
