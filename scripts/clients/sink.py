"""A recording sink: an HTTP pass-through that writes every request a client sends, as sent,
to DIR/NNN.json before forwarding it (issue 16, spec §14 client captures).

Requests only: the reply is streamed back untouched and only its status is kept. Header values
that carry a secret (Authorization, cookies, API keys, anything named *key*, *token*, *secret*,
*auth*, *session*, *password*) are replaced by "<redacted>"; bodies are kept byte for byte (as
UTF-8 text, or base64 when they are not UTF-8), so a replay sends exactly what the client sent.
The record format is the one of shared/captures/clients/open-webui/v0.11.4-openai, plus when
each request arrived and when its reply ended (`at_s`, `done_s`: seconds since the sink's first
request), so a replay can send side requests that overlapped a turn while the turn still runs.
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

REDACTED = "<redacted>"
INFLIGHT_FILE = ".inflight"  # removed by the recorder before the capture is committed
SECRET_HEADER = re.compile(r"authorization|cookie|key|token|secret|auth|session|password", re.I)
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)


def scrub_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The headers as the client sent them, every secret-bearing value redacted."""
    return {k: (REDACTED if SECRET_HEADER.search(k) else v) for k, v in headers.items()}


def record_of(
    seq: int, method: str, path_qs: str, headers: Mapping[str, str], body: bytes
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "seq": seq,
        "method": method,
        "path": path_qs,
        "headers": scrub_headers(headers),
    }
    try:
        record["body"] = body.decode("utf-8")
    except UnicodeDecodeError:
        record["body"] = ""
        record["body_base64"] = base64.b64encode(body).decode("ascii")
    return record


class Sink:
    """State: the sequence number and the output directory. Forwards to `upstream`."""

    def __init__(self, upstream: str, out_dir: Path, *, skip_paths: tuple[str, ...] = ()) -> None:
        self.upstream = upstream.rstrip("/")
        self.out_dir = out_dir
        self.skip_paths = skip_paths  # not recorded (still forwarded): e.g. health polls
        self.seq = 0
        self.first_s: float | None = None
        self.inflight = 0  # also in out_dir/INFLIGHT_FILE, for a driver waiting for quiet
        self.session: aiohttp.ClientSession | None = None

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        app.on_startup.append(self._open)
        app.on_cleanup.append(self._close)
        return app

    async def _open(self, _app: web.Application) -> None:
        timeout = aiohttp.ClientTimeout(total=None, sock_read=600)
        self.session = aiohttp.ClientSession(timeout=timeout, auto_decompress=False)

    async def _close(self, _app: web.Application) -> None:
        if self.session is not None:
            await self.session.close()

    def _count_inflight(self, delta: int) -> None:
        self.inflight += delta
        self.out_dir.mkdir(parents=True, exist_ok=True)
        (self.out_dir / INFLIGHT_FILE).write_text(str(self.inflight))

    async def handle(self, request: web.Request) -> web.StreamResponse:
        assert self.session is not None
        body = await request.read()
        record: dict[str, Any] | None = None
        if not request.path.startswith(self.skip_paths):
            self.seq += 1
            now_s = time.monotonic()
            self.first_s = now_s if self.first_s is None else self.first_s
            record = record_of(self.seq, request.method, request.path_qs, request.headers, body)
            record["at_s"] = round(now_s - self.first_s, 3)
            self._count_inflight(+1)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        async with self.session.request(
            request.method,
            self.upstream + request.path_qs,
            headers=headers,
            data=body if body else None,
            allow_redirects=False,
        ) as upstream:
            reply = web.StreamResponse(status=upstream.status)
            for k, v in upstream.headers.items():
                if k.lower() not in HOP_BY_HOP:
                    reply.headers[k] = v
            await reply.prepare(request)
            async for chunk in upstream.content.iter_any():
                await reply.write(chunk)
            await reply.write_eof()
        if record is not None:
            self._count_inflight(-1)
            record["status"] = upstream.status
            assert self.first_s is not None
            record["done_s"] = round(time.monotonic() - self.first_s, 3)
            self.out_dir.mkdir(parents=True, exist_ok=True)
            path = self.out_dir / f"{record['seq']:03d}.json"
            path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
        return reply
