"""/status sessions over plain HTTP (the browser test drives the same flow in Chromium),
and the page's queue table, refusal reasons and request columns."""

from __future__ import annotations

import asyncio

import aiohttp

from pharos.clock import FakeClock
from pharos.config import parse_config
from pharos.fakeengine import FakeModel, FakeOllama, Ledger, no_sleep
from pharos.obs.sessions import COOKIE, Sessions
from pharos.obs.status_text import human_value
from tests.obs.rig import (
    MODEL,
    BackendSpecYaml,
    KeySpec,
    Router,
    StartRouter,
    config_text,
    wait_for,
)
from tests.obs.status_html import parse_status

ADMIN = KeySpec("ops", "sk-ops-session-7777", admin=True)
USER = KeySpec("user", "sk-user-session-8888")
BROWSER = {"Accept": "text/html,application/xhtml+xml"}


async def sign_in(router: Router, secret: str) -> tuple[int, aiohttp.CookieJar]:
    jar = aiohttp.CookieJar(unsafe=True)  # 127.0.0.1 is an IP: keep its cookies
    async with (
        aiohttp.ClientSession(cookie_jar=jar) as session,
        session.post(
            f"{router.base}/status/login", data={"key": secret}, allow_redirects=False
        ) as reply,
    ):
        return reply.status, jar


async def get_status(router: Router, jar: aiohttp.CookieJar) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession(cookie_jar=jar) as session,
        session.get(f"{router.base}/status", headers=BROWSER) as reply,
    ):
        return reply.status, await reply.text()


async def test_a_session_ends_when_a_reload_removes_its_key(start_router: StartRouter) -> None:
    router = await start_router(
        [BackendSpecYaml(FakeOllama(sleep=no_sleep), "ollama")], keys=[ADMIN, USER]
    )
    status, jar = await sign_in(router, ADMIN.secret)
    assert status == 303
    assert [c.key for c in jar] == [COOKIE]
    status, html = await get_status(router, jar)
    assert status == 200 and "signed in as ops" in html
    router.pharos.apply_config(
        parse_config(config_text([(router.urls[0], "ollama", {})], [USER], "UTC"), "test")
    )
    status, html = await get_status(router, jar)
    assert status == 401 and 'id="login"' in html
    assert len(router.pharos.obs.sessions) == 0


async def test_without_a_session_a_browser_gets_the_form_and_a_script_gets_json(
    start_router: StartRouter,
) -> None:
    router = await start_router(
        [BackendSpecYaml(FakeOllama(sleep=no_sleep), "ollama")], keys=[ADMIN]
    )
    status, html = await get_status(router, aiohttp.CookieJar(unsafe=True))
    assert status == 401 and 'action="/status/login"' in html
    status, _, body = await router.get("/status")
    assert status == 401 and b'"invalid_api_key"' in body
    status, _, body = await router.get("/status", ADMIN.secret)
    assert status == 200 and b'id="summary"' in body
    status, _ = await sign_in(router, "")
    assert status == 401


def test_sessions_expire_and_the_oldest_go_past_the_cap() -> None:
    clock = FakeClock()
    sessions = Sessions(clock, ttl_s=60.0, cap=2)
    first = sessions.open("ops", "a" * 64)
    assert sessions.get(first) is not None
    clock.advance(59.0)
    assert sessions.get(first) is not None
    clock.advance(1.0)
    assert sessions.get(first) is None  # expired
    ids = [sessions.open("ops", "a" * 64) for _ in range(3)]
    assert sessions.get(ids[0]) is None and len(sessions) == 2
    assert sessions.get("guessed") is None and sessions.get(None) is None


async def test_the_queue_table_shows_who_waits_for_what_and_why(start_router: StartRouter) -> None:
    engine = FakeOllama(sleep=no_sleep)
    router = await start_router([BackendSpecYaml(engine, "ollama", {"capacity": 1})])
    engine.hold()
    tasks = [asyncio.create_task(router.chat(None, MODEL)) for _ in range(3)]
    await wait_for(lambda: router.pharos.sched.waiting_count() == 2, "requests never queued")
    _, _, html = await router.get("/status")
    page = parse_status(html.decode())
    waiters = page.rows_in("queue", "waiter")
    assert len(waiters) == 2
    assert all(row.attrs["data-model"] == MODEL for row in waiters)
    assert [row.cell("why") for row in waiters] == ["no free slot"] * 2
    assert all(row.cell("waiting for").endswith(" s") for row in waiters)
    engine.release()
    await asyncio.gather(*tasks)
    _, _, html = await router.get("/status")
    assert parse_status(html.decode()).rows_in("queue", "waiter") == []


async def test_refused_rows_say_why_and_every_row_has_route_id_and_duration(
    start_router: StartRouter,
) -> None:
    router = await start_router(
        [BackendSpecYaml(FakeOllama(sleep=no_sleep), "ollama")],
        keys=[ADMIN, KeySpec("user", "sk-user-q", models=(MODEL,))],
    )
    assert (await router.chat("sk-wrong", MODEL))[0] == 401
    assert (await router.chat("sk-user-q", "not-allowed-model"))[0] == 404
    assert (await router.chat("sk-user-q", MODEL, request_id="rid-1"))[0] == 200
    _, _, html = await router.get("/status", ADMIN.secret)
    served, not_allowed, unauthorized = parse_status(html.decode()).rows_in("recent", "request")
    assert any("outside this key's allow-list" in c for c in not_allowed.cells)
    assert any("no key, or a key this config does not hold" in c for c in unauthorized.cells)
    assert served.cell("route") == "chat"
    assert served.cell("request id") == "rid-1"
    assert served.cell("duration").endswith(" s")
    assert "not built" not in html.decode()


async def test_the_backend_card_and_the_targets_table_agree_and_sizes_read_in_binary_units(
    start_router: StartRouter,
) -> None:
    models = [FakeModel(MODEL), FakeModel("llama3.2:1b", 1_321_098_329, 2_019_000_000)]
    engine = FakeOllama(models, ledger=Ledger(memory_bytes=int(2.5 * 2**30)), sleep=no_sleep)
    router = await start_router([BackendSpecYaml(engine, "ollama", {"memory_gb": 2.5})])
    for model in (MODEL, "llama3.2:1b"):  # the second load unloads the first
        assert (await router.chat(None, model))[0] == 200
    _, _, html = await router.get("/status")
    page = parse_status(html.decode())
    probes = {row.cells[1]: row.cells[2] for row in page.rows_in("backends", "probe")}
    targets = sorted(
        (row.attrs["data-target"].split(" ", 1)[1], row.cell("residency"))
        for row in page.rows
        if "data-target" in row.attrs
    )
    # the page shows each model=value in its own span; the parser joins the spans' text
    assert probes["residency"] == "".join(f"{model}={state}" for model, state in targets)
    assert probes["size_bytes"] == "llama3.2:1b=1.2 GiBqwen2.5:0.5b=379.4 MiB"


def test_byte_values_read_in_binary_units_and_others_stay() -> None:
    # (signal,       value as read,                 shown)
    cases = [
        ("size_bytes", "m=397821319", "m=379.4 MiB"),
        ("vram_bytes", "a:1b=0, b=2048", "a:1b=0 B, b=2.0 KiB"),
        ("vram_bytes", None, None),
        ("running", "m=3", "m=3"),
        ("size_bytes", "qwen2.5:0.5b=1024", "qwen2.5:0.5b=1.0 KiB"),
    ]
    for signal, value, shown in cases:
        assert human_value(signal, value) == shown, (signal, value)
