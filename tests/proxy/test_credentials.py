"""Upstream credentials (issue 12 Clients): a backend started with --api-key gets its key
on every request Pharos sends it (proxied and scraped: llama-server b11312 with --api-key
answers 401 on /metrics, /slots, /props and /v1/models without it, checked live), and
no other backend ever sees it; no log line holds it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
import pytest
from aiohttp import web
from yarl import URL

from pharos.cmd.runtime import Pharos, RuntimeOptions, running
from pharos.config import ConfigError
from pharos.config.load import parse_config
from pharos.fakeengine import FakeEngine, FakeLlamaCpp, FakeVLLM, no_sleep, serve
from pharos.proxy.credentials import CredentialTable
from tests.proxy.rig import FAST_STATE, add_middleware

SECRET = "upstream-secret-4f1c"
HEADER_SECRET = "header-secret-9d2e"


class Gate:
    """Like llama-server --api-key: every route but /health needs the key; records headers."""

    def __init__(self, fake: FakeEngine, key: str | None) -> None:
        self.key = key
        self.seen: list[dict[str, str]] = []
        add_middleware(fake, self._middleware)

    @web.middleware
    async def _middleware(
        self,
        request: web.Request,
        handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
    ) -> web.StreamResponse:
        self.seen.append(dict(request.headers))
        keyed = self.key is not None and request.path != "/health"
        if keyed and request.headers.get("Authorization") != f"Bearer {self.key}":
            error = {"message": "Invalid API Key", "type": "authentication_error", "code": 401}
            return web.json_response({"error": error}, status=401)
        return await handler(request)

    def anything_holds(self, secret: str) -> bool:
        return any(secret in f"{k}: {v}" for headers in self.seen for k, v in headers.items())


@contextlib.asynccontextmanager
async def pharos_with(config_text: str) -> AsyncIterator[tuple[Pharos, str]]:
    config = parse_config(config_text)
    pharos = Pharos(config, options=RuntimeOptions(state=FAST_STATE))
    async with running(pharos) as base:
        yield pharos, base


async def _until(condition: Callable[[], bool], what: str) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"timed out waiting for {what}")


async def test_the_key_goes_to_its_backend_only_and_never_into_a_log(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("LLAMA_KEY", SECRET)
    monkeypatch.setenv("VLLM_TOKEN", HEADER_SECRET)
    keyed, other = FakeLlamaCpp(sleep=no_sleep), FakeVLLM(sleep=no_sleep)
    keyed_gate, other_gate = Gate(keyed, SECRET), Gate(other, None)
    async with serve(keyed) as keyed_url, serve(other) as other_url:
        config = f"""
backends:
  - url: {keyed_url}
    kind: llamacpp
    api_key_env: LLAMA_KEY
  - url: {other_url}
    kind: vllm
    headers: {{X-Vllm-Token: "${{VLLM_TOKEN}}"}}
"""
        async with pharos_with(config) as (pharos, base), aiohttp.ClientSession() as client:
            await _until(
                lambda: (
                    all(b.up for b in pharos.state.backends()) and len(pharos.state.backends()) == 2
                ),
                "both backends up (the keyed one scraped with its key)",
            )
            for model in ("qwen2.5-0.5b",):
                body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
                headers = {"Authorization": "Bearer client-key-never-forwarded"}
                for _ in range(4):  # both backends serve the model: the router picks either
                    async with client.post(
                        base + "/v1/chat/completions", json=body, headers=headers
                    ) as reply:
                        assert reply.status == 200
            assert repr(pharos.credentials.table).count("secret") == 0
    # The keyed engine's scrapes (/metrics, /slots, /props) and chats all carried its key.
    scraped = [h for h in keyed_gate.seen if h.get("Authorization") == f"Bearer {SECRET}"]
    assert len(scraped) >= 3 and keyed.counters.by_path["/metrics"] >= 1
    assert not other_gate.anything_holds(SECRET)  # never forwarded to another backend
    assert not keyed_gate.anything_holds(HEADER_SECRET)
    assert all(h.get("X-Vllm-Token") == HEADER_SECRET for h in other_gate.seen)
    assert not keyed_gate.anything_holds("client-key-never-forwarded")
    assert not other_gate.anything_holds("client-key-never-forwarded")
    assert SECRET not in caplog.text and HEADER_SECRET not in caplog.text


async def test_without_its_key_a_keyed_engine_refuses_and_pharos_says_so() -> None:
    fake = FakeLlamaCpp(sleep=no_sleep)
    gate = Gate(fake, SECRET)
    async with serve(fake) as url:
        config = f"backends: [{{url: '{url}', kind: llamacpp}}]"
        async with pharos_with(config) as (pharos, _):
            await _until(lambda: len(gate.seen) >= 12, "several probe rounds refused with 401")
            assert pharos.state.backends() and not any(b.up for b in pharos.state.backends())


# URL sent -> which table entry's headers it gets (None = nothing)
@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://h:1/v1/chat/completions", "val-a"),
        ("http://h:1/metrics", "val-a"),
        ("http://h:2/metrics", None),  # another port is another backend
        ("https://h:1/metrics", None),
        ("http://h:3/engine/v1/models", "val-c"),  # a backend under a path prefix
        ("http://h:3/other", None),
        ("http://h:3/engine-two/x", None),
    ],
)
def test_a_request_gets_the_headers_of_the_backend_it_is_under(
    url: str, expected: str | None
) -> None:
    table = CredentialTable(
        {"http://h:1": {"A": "val-a"}, "http://h:3/engine/": {"A": "val-c"}, "http://h:9": {}}
    )
    got = table.for_url(URL(url))
    assert (got["A"] if got else None) == expected
    assert "val-" not in repr(table)


# config -> the problem it reports
@pytest.mark.parametrize(
    ("backend", "problem"),
    [
        ("api_key_env: NOT_SET_ANYWHERE", "environment variable NOT_SET_ANYWHERE is not set"),
        ("api_key_env: 'not a name'", "api_key_env: must be an environment variable's name"),
        ("headers: {Host: x}", "headers.Host: Pharos sets this header itself"),
        ("headers: {'bad name': x}", "is not a header name"),
    ],
)
def test_bad_credential_settings_name_the_field(backend: str, problem: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(f"backends:\n  - url: http://h:1\n    {backend}\n", environ={})
    assert any(problem in line and "backends[0]" in line for line in err.value.problems)
