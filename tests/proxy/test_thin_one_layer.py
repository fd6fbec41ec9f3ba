"""The access line, the body budget and the API's 404/405 pages run as one middleware layer:
the same error shapes, the same budget given back, the same access line, for every route."""

from __future__ import annotations

import logging
import re

import pytest

from pharos.fakeengine import FakeVLLM, no_sleep
from tests.proxy.rig import Backend, RigFactory

MODEL = "qwen2.5-0.5b"


def access_statuses(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    found = []
    for record in caplog.records:
        if record.name == "pharos.access":
            text = record.getMessage()
            path = re.search(r" path=(\S+)", text)
            status = re.search(r" status=(\d+)", text)
            assert path is not None and status is not None, text
            found.append((path.group(1), status.group(1)))
    return found


async def test_one_layer_keeps_error_shapes_the_budget_and_the_access_line(
    rig: RigFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pharos.access")
    r = await rig(Backend(FakeVLLM(sleep=no_sleep)))
    assert list(r.pharos.app.middlewares) == [r.pharos.access.middleware]
    # (method, path,                   body,                  status, error code)
    cases = [
        ("POST", "/v1/no/such/route", b"{}", 404, "not_found"),
        ("GET", "/v1/chat/completions", b"", 405, "method_not_allowed"),
        ("POST", "/v1/chat/completions", b'{"model": 1}', 400, None),
        ("POST", "/v1/chat/completions", b"x" * 70_000, 400, None),
    ]
    for method, path, body, status, code in cases:
        async with r.client.request(method, r.base + path, data=body) as reply:
            assert reply.status == status, (method, path)
            error = (await reply.json())["error"]
            assert isinstance(error, dict) and error["message"]
            if code is not None:
                assert error["code"] == code
            if status == 405:
                assert "POST" in reply.headers["Allow"]
    status, _ = await r.chat(MODEL, "hi")
    assert status == 200
    assert r.pharos.body_budget.held_bytes == 0  # every request gave its bytes back
    assert access_statuses(caplog) == [
        ("/v1/no/such/route", "404"),
        ("/v1/chat/completions", "405"),
        ("/v1/chat/completions", "400"),
        ("/v1/chat/completions", "400"),
        ("/v1/chat/completions", "200"),
    ]


async def test_the_budget_and_errors_hold_with_the_access_log_off(
    rig: RigFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="pharos.access")  # as --no-access-log sets it
    r = await rig(Backend(FakeVLLM(sleep=no_sleep)))
    async with r.client.post(r.base + "/v1/nothing", data=b"{}") as reply:
        assert reply.status == 404
        assert (await reply.json())["error"]["code"] == "not_found"
    status, _ = await r.chat(MODEL, "hi")
    assert status == 200
    assert r.pharos.body_budget.held_bytes == 0
    assert not [rec for rec in caplog.records if rec.name == "pharos.access"]
