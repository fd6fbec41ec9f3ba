"""The pieces of one exchange with an engine: routes, headers, refusals, feedback without usage."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import msgspec
from aiohttp import web

from pharos.proxy.errors import ClientError
from pharos.sched import Feedback, NeverFits, QueueTimeout

_HOP_HEADERS = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "content-encoding",
        "host",
        "authorization",
        "x-api-key",
        "accept-encoding",
    }
)
_IDENTIFIER = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


@dataclass(frozen=True, slots=True)
class Route:
    name: str  # chat, completion, embeddings, messages, responses, ollama-chat, ...
    parse_as: str  # the body shape parse_request reads
    ollama_native: bool = False  # /api/*: Ollama backends only, Ollama error shape
    coding_agent: bool = False  # /v1/messages, /v1/responses: 404 means the route is missing


@dataclass(frozen=True, slots=True)
class Refusal:
    status: int
    body: bytes
    content_type: str
    backend_url: str


class ReplyHead(web.StreamResponse):
    """A streamed reply whose head waits for its first write, so it leaves with the first
    bytes in one socket write (aiohttp sends a StreamResponse's head at prepare(), alone).
    The forwarder writes right after prepare(): what the engine sent with its own head, or
    nothing, which sends the head alone then. One write syscall fewer before the first
    byte; aiohttp before 3.12 ignores the attribute and sends the head at prepare()."""

    _send_headers_immediately = False


class UpstreamDied(Exception):
    """The engine's connection broke after the reply had started."""


class UpstreamIdle(Exception):
    """The engine sent nothing for limits.upstream_idle after the reply had started."""


def waited_in_vain(failure: NeverFits | QueueTimeout) -> ClientError:
    """503 with the scheduler's reason: the queue bound passed, or the model fits no host."""
    never = isinstance(failure, NeverFits)
    return ClientError(
        503,
        f"Pharos could not place this request: {failure}.",
        "server_error",
        "model_too_large" if never else "queue_timeout",
        None if never else 30.0,
        ("route", failure.outcome),
    )


def upstream_idle(idle_s: float) -> ClientError:
    return ClientError(
        504,
        f"The backend sent nothing for {idle_s:g}s (limits.upstream_idle).",
        "server_error",
        "upstream_timeout",
        None,
        ("upstream", "idle_timeout"),
    )


def forward_header_pairs(pairs: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The client's headers minus hop-by-hop ones, its Authorization and Accept-Encoding."""
    return [(k, v) for k, v in pairs if k.lower() not in _HOP_HEADERS]


def refusal_message(body: bytes) -> str:
    """`type=... code=...` of the engine's error, for a warning log line. Never its message:
    an engine that quotes the input would put prompt text in the log (issue 11)."""
    try:
        decoded = msgspec.json.decode(body)
    except (msgspec.DecodeError, RecursionError):
        return f"not JSON, {len(body)} bytes"
    error = decoded.get("error") if isinstance(decoded, dict) else None
    if not isinstance(error, dict):
        return "type=- code=-"
    return f"type={_token(error.get('type'))} code={_token(error.get('code'))}"


def _token(value: object) -> str:
    """A short identifier as the engine sent it; anything else (free text) as `-`."""
    if isinstance(value, bool) or value is None:
        return "-"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and _IDENTIFIER.fullmatch(value):
        return value
    return "-"


def no_usage(
    status: int | None,
    ttft_s: float | None = None,
    duration_s: float | None = None,
    *,
    died_mid_reply: bool = False,
    client_left: bool = False,
) -> Feedback:
    """Feedback of a reply whose usage Pharos never saw (refused, cut, or never sent)."""
    return Feedback(
        status, ttft_s, duration_s, died_mid_reply=died_mid_reply, client_left=client_left
    )


NO_REPLY = no_usage(None)
CLIENT_LEFT = no_usage(None, client_left=True)


def not_on_ollama(model: str) -> ClientError:
    return ClientError(
        404,
        f"model '{model}' is not served by any Ollama backend "
        "(Pharos does not translate /api/* to other engines)",
        "invalid_request_error",
        "model_not_found",
        None,
        ("route", "unknown_model"),
    )
