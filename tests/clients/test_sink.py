"""The recording sink (scripts/clients/sink.py) keeps what a client sent, byte for byte, and no
secret: the captures in tests/captures/clients are committed as it wrote them."""

from __future__ import annotations

import base64
import importlib.util
import json
from pathlib import Path
from types import ModuleType

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

SINK_PY = Path(__file__).resolve().parents[2] / "scripts" / "clients" / "sink.py"


def sink_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pharos_clients_sink", SINK_PY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# header             value sent          recorded
# Authorization      Bearer sk-...       <redacted>
# Cookie             token=...           <redacted>
# x-api-key          sk-ant-...          <redacted>
# X-Session-Id       s-1                 <redacted> (a session names a user)
# User-Agent         OpenAI/Python 3.57  kept
# X-Stainless-Lang   python              kept
def test_secret_bearing_headers_are_redacted_and_the_rest_kept() -> None:
    scrubbed = sink_module().scrub_headers(
        {
            "Authorization": "Bearer sk-secret",
            "Cookie": "token=abc",
            "x-api-key": "sk-ant-secret",
            "X-Session-Id": "s-1",
            "User-Agent": "OpenAI/Python 3.57.0",
            "X-Stainless-Lang": "python",
        }
    )
    assert scrubbed == {
        "Authorization": "<redacted>",
        "Cookie": "<redacted>",
        "x-api-key": "<redacted>",
        "X-Session-Id": "<redacted>",
        "User-Agent": "OpenAI/Python 3.57.0",
        "X-Stainless-Lang": "python",
    }


async def test_the_sink_records_requests_as_sent_and_passes_replies_through(
    tmp_path: Path,
) -> None:
    seen: list[tuple[str, bytes, str | None]] = []

    async def upstream_handler(request: web.Request) -> web.StreamResponse:
        seen.append((request.path_qs, await request.read(), request.headers.get("Authorization")))
        reply = web.StreamResponse(status=201, headers={"Content-Type": "text/event-stream"})
        await reply.prepare(request)
        for chunk in (b"data: 1\n\n", b"data: [DONE]\n\n"):
            await reply.write(chunk)
        return reply

    upstream_app = web.Application()
    upstream_app.router.add_route("*", "/{tail:.*}", upstream_handler)
    sink = sink_module().Sink("", tmp_path / "out")
    async with TestServer(upstream_app) as upstream:
        sink.upstream = str(upstream.make_url("")).rstrip("/")
        async with TestServer(sink.app()) as front, aiohttp.ClientSession() as client:
            text_body = '{"messages":[{"content":"Привет \\u4f60"}]}'.encode()
            binary_body = b"\xff\xfe not utf-8"
            for path, body in (("/v1/chat/completions?x=1", text_body), ("/upload", binary_body)):
                async with client.post(
                    front.make_url(path),
                    data=body,
                    headers={"Authorization": "Bearer sk-secret", "Cookie": "a=b"},
                ) as reply:
                    assert reply.status == 201
                    assert await reply.read() == b"data: 1\n\ndata: [DONE]\n\n"
    # The engine side got the request untouched, key included: the sink only watches.
    assert seen == [
        ("/v1/chat/completions?x=1", text_body, "Bearer sk-secret"),
        ("/upload", binary_body, "Bearer sk-secret"),
    ]
    first, second = (json.loads(p.read_text()) for p in sorted((tmp_path / "out").glob("*.json")))
    assert (first["seq"], first["method"], first["path"], first["status"]) == (
        1,
        "POST",
        "/v1/chat/completions?x=1",
        201,
    )
    assert first["body"].encode() == text_body  # escapes kept as the client wrote them
    assert first["headers"]["Authorization"] == first["headers"]["Cookie"] == "<redacted>"
    assert 0 <= first["at_s"] <= first["done_s"] <= second["at_s"] <= second["done_s"]
    assert second["body"] == "" and base64.b64decode(second["body_base64"]) == binary_body
    written = "".join(p.read_text() for p in (tmp_path / "out").glob("*.json"))
    assert "sk-secret" not in written and "a=b" not in written


def test_no_committed_client_capture_holds_a_secret() -> None:
    captures = sorted((Path(__file__).resolve().parents[1] / "captures" / "clients").rglob("*"))
    records = [p for p in captures if p.suffix == ".json"]
    assert len(records) >= 40  # open-webui x2 and three SDKs
    secret = sink_module().SECRET_HEADER
    for path in records:
        record = json.loads(path.read_text())
        for name, value in record["headers"].items():
            if secret.search(name):
                assert value == "<redacted>", (path, name)
        assert "pharos-rec-" not in path.read_text(), path  # the recording's own key
    assert not [p for p in captures if p.name == ".inflight"]  # the sink's scratch file
