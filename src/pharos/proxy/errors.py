"""Client-facing errors in the shape each API's SDKs parse.

OpenAI routes get `{"error": {"message", "type", "code"}}` (the SDKs read `code`);
Ollama routes get `{"error": "..."}`, which the ollama CLI prints as is;
Anthropic's /v1/messages gets `{"type": "error", "error": {"type", "message"}}`, the
shape the anthropic SDK (and so Claude Code) raises its typed errors from.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
from aiohttp import web


@dataclass(frozen=True, slots=True)
class ClientError(Exception):
    """An error to send to the client instead of a reply."""

    status: int
    message: str
    type: str
    code: str
    retry_after_s: float | None = None
    outcome: tuple[str, str] | None = None  # the (stage, outcome) decision this error records

    def __str__(self) -> str:
        return f"{self.status} {self.code}: {self.message}"


def bad_request(message: str, code: str = "invalid_request_error") -> ClientError:
    return ClientError(
        400, message, "invalid_request_error", code, None, ("admission", "bad_request")
    )


def model_not_found(model: str) -> ClientError:
    return ClientError(
        404,
        f"The model `{model}` does not exist or you do not have access to it.",
        "invalid_request_error",
        "model_not_found",
        None,
        ("route", "unknown_model"),
    )


def unavailable(model: str) -> ClientError:
    return ClientError(
        503,
        f"No backend serving `{model}` is up right now.",
        "server_error",
        "backend_unavailable",
        None,
        ("route", "unavailable"),
    )


def queue_full() -> ClientError:
    return ClientError(
        429,
        "Pharos's queue is full; retry shortly.",
        "rate_limit_error",
        "queue_full",
        1.0,
        ("route", "queue_full"),
    )


def too_large(limit_bytes: int) -> ClientError:
    return ClientError(
        413,
        f"Request body is larger than {limit_bytes} bytes.",
        "invalid_request_error",
        "request_too_large",
        None,
        ("admission", "too_large"),
    )


def unauthorized(header: str) -> ClientError:
    """A 401 that names the header the client sent its key in (or should send it in)."""
    how = "`x-api-key: <key>`" if header == "x-api-key" else "`Authorization: Bearer <key>`"
    return ClientError(
        401,
        f"Incorrect API key provided in `{header}`. Send it as {how}.",
        "invalid_request_error",
        "invalid_api_key",
        None,
        ("admission", "unauthorized"),
    )


ANTHROPIC_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "overloaded_error",
    504: "api_error",
    529: "overloaded_error",
}
"""HTTP status -> Anthropic's error.type (docs.anthropic.com "Errors"); the SDK maps by status."""


def error_body_anthropic(err: ClientError) -> bytes:
    kind = ANTHROPIC_TYPES.get(
        err.status, "api_error" if err.status >= 500 else "invalid_request_error"
    )
    return msgspec.json.encode({"type": "error", "error": {"type": kind, "message": err.message}})


def is_anthropic_path(path: str) -> bool:
    return path == "/v1/messages" or path.startswith("/v1/messages/")


def error_body_openai(err: ClientError) -> bytes:
    return msgspec.json.encode(
        {"error": {"message": err.message, "type": err.type, "code": err.code, "param": None}}
    )


def error_body_ollama(err: ClientError) -> bytes:
    return msgspec.json.encode({"error": err.message})


def error_response(
    err: ClientError, *, ollama: bool = False, anthropic: bool = False
) -> web.Response:
    headers = {}
    if err.retry_after_s is not None:
        headers["Retry-After"] = str(max(1, int(err.retry_after_s + 0.999)))
    if anthropic:
        body = error_body_anthropic(err)
    else:
        body = error_body_ollama(err) if ollama else error_body_openai(err)
    return web.Response(
        status=err.status, body=body, content_type="application/json", headers=headers
    )


def error_body_for(err: ClientError, path: str) -> bytes:
    """The error's body in the shape of the API `path` belongs to (the front's replies)."""
    if is_anthropic_path(path):
        return error_body_anthropic(err)
    return error_body_ollama(err) if path.startswith("/api/") else error_body_openai(err)


def error_response_for(err: ClientError, path: str) -> web.Response:
    """The error in the shape of the API `path` belongs to."""
    return error_response(err, ollama=path.startswith("/api/"), anthropic=is_anthropic_path(path))
