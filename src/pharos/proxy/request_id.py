"""X-Request-Id: the client's, or one made here, on every response and in every log line.

A client id is kept when it is 1-128 visible ASCII characters (UUIDs, trace ids); anything
else is replaced, so a log line or a header never carries what a client smuggled in.
"""

from __future__ import annotations

import os
import re

from aiohttp import web

HEADER = "X-Request-Id"
_STORED = web.RequestKey("pharos_request_id", str)
_ACCEPTED = re.compile(r"[\x21-\x7e]{1,128}")


def new_request_id() -> str:
    """32 lowercase hex, as `uuid4().hex` gave, from the same random source at a quarter of
    the cost (0.47 against 2.0 µs measured): a request id needs no UUID version bits."""
    return os.urandom(16).hex()


def request_id_of(request: web.BaseRequest) -> str:
    """The request's id, made once per request: the client's when acceptable, else a new one."""
    stored: str | None = request.get(_STORED)
    if stored is not None:
        return stored
    sent = request.headers.get(HEADER)
    made = sent if sent is not None and _ACCEPTED.fullmatch(sent) else new_request_id()
    request[_STORED] = made
    return made


async def _echo(request: web.Request, response: web.StreamResponse) -> None:
    response.headers[HEADER] = request_id_of(request)


def echo_request_ids(app: web.Application) -> None:
    """Every response the app prepares, streamed or not, errors included, carries the id."""
    app.on_response_prepare.append(_echo)
