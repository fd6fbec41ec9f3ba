"""/status: every section of spec §13 rendered server-side with no JS, and who may read it."""

from __future__ import annotations

from pathlib import Path

import pytest

from pharos.fakeengine import FakeOllama, no_sleep
from tests.obs.rig import MODEL, SECRET_PROMPT, BackendSpecYaml, KeySpec, Router, StartRouter
from tests.obs.status_html import StatusPage, parse_status
from tests.obs.traffic import HISTORY_KEYS, make_traffic, rich_router, seed_history

ADMIN = KeySpec("ops", "sk-ops-admin-1", admin=True)
USER = KeySpec("alice", "sk-alice-2")


@pytest.fixture
async def router(start_router: StartRouter, tmp_path: Path) -> Router:
    router = await rich_router(start_router, tmp_path, keys=[ADMIN, USER])
    await make_traffic(router, [USER.secret, ADMIN.secret])
    seed_history(router)
    return router


async def status_page(router: Router) -> tuple[str, StatusPage]:
    status, headers, body = await router.get("/status", ADMIN.secret)
    assert status == 200
    assert headers["Content-Type"].startswith("text/html")
    html = body.decode()
    return html, parse_status(html)


async def test_status_renders_every_section_without_js(router: Router) -> None:
    html, page = await status_page(router)
    assert page.scripts == 0
    assert 'http-equiv="refresh" content="10"' in html
    for section in ("summary", "backends", "targets", "recent", "usage", "peers"):
        assert section in page.sections, section
    assert SECRET_PROMPT not in html
    assert USER.secret not in html and ADMIN.secret not in html


async def test_backends_show_kind_version_plan_and_rounds(router: Router) -> None:
    _, page = await status_page(router)
    text = page.text_by_section["backends"]
    ollama, llama, vllm = router.urls
    for url, kind, version in (
        (ollama, "ollama", "0.34.4"),
        (llama, "llamacpp", None),
        (vllm, "vllm", None),
    ):
        assert url in text
        assert kind in text
        if version is not None:
            assert version in text
    assert "full round" in text and "load round" in text and "s ago" in text
    assert "log feed connected" in " ".join(text.split())
    probes = page.rows_in("backends", "probe")
    assert len(probes) >= 6
    by_name = {row.cells[0].removesuffix(" own").strip(): row for row in probes}
    assert "ollama-version" in by_name
    assert by_name["ollama-version"].cells[1:] == ["version", "0.34.4", "/api/version"]
    assert by_name["ollama-log-num-parallel"].cells[1:] == ["capacity", "2", "log"]
    own = [row for row in probes if "own" in row.attrs["class"].split()]
    assert [row.cells[0] for row in own] == ["my-deferred own"]
    assert own[0].cells[3] == "own /metrics"
    dropped = page.rows_in("backends", "dropped")
    assert any(
        row.cells[0] == "my-kv" and row.cells[1].startswith("dropped: ") for row in dropped
    ), [row.cells for row in dropped]


async def test_targets_show_residency_load_signals_and_estimates(router: Router) -> None:
    _, page = await status_page(router)
    rows = {row.attrs["data-target"]: row for row in page.rows if "data-target" in row.attrs}
    ollama, llama, vllm = router.urls
    assert set(rows) == {
        f"{ollama} {MODEL}",
        f"{ollama} all-minilm:22m",
        f"{llama} {MODEL}",
        f"{vllm} {MODEL}",
    }
    ollama_row = rows[f"{ollama} {MODEL}"]
    expected = "loaded" if router.fakes[0].runners else "cold"
    assert ollama_row.cell("residency") == expected
    assert ollama_row.cell("running") == "unknown"  # Ollama does not report it: not 0
    assert ollama_row.cell("KV cache") == "unknown"
    assert ollama_row.cell("capacity") == "2"  # from its log line
    llama_row = rows[f"{llama} {MODEL}"]
    assert llama_row.cell("running") == "0"
    assert llama_row.cell("in flight here / cluster") == "0 / 0"
    vllm_row = rows[f"{vllm} {MODEL}"]
    assert vllm_row.cell("KV cache").endswith("%")
    estimated = [row for row in rows.values() if row.cell("request s") != "unknown"]
    assert estimated, "no target learned a request time from the traffic"


async def test_recent_requests_show_key_status_target_reason_tokens(router: Router) -> None:
    _, page = await status_page(router)
    requests = page.rows_in("recent", "request")
    assert len(requests) == 11  # 5 per key and the unknown model
    newest = requests[0]
    assert newest.attrs["data-status"] == "404"
    assert newest.cell("model") == "no-such-model"
    assert newest.cell("target") == "—"
    assert newest.cell("prompt") == "—"  # never reached an engine: no counts, not unknown ones
    served = [row for row in requests if row.attrs["data-status"] == "200"]
    assert {row.attrs["data-key"] for row in served} == {"alice", "ops"}
    assert all(row.cell("target") in router.urls for row in served)
    assert all(row.cells[5] for row in served), "every served request has a reason"
    assert all(row.cell("prompt").isdigit() and row.cell("completion").isdigit() for row in served)
    assert any(row.cell("cached") not in ("0", "unknown") for row in served)
    assert {row.attrs.get("data-request-id") for row in requests} >= {"req-0", "req-1"}


async def test_recent_keeps_the_last_50(router: Router) -> None:
    for _ in range(45):
        await router.chat(USER.secret, MODEL)
    _, page = await status_page(router)
    assert len(page.rows_in("recent", "request")) == 50


async def test_usage_today_and_30_days_with_chart(router: Router) -> None:
    _, page = await status_page(router)
    rows = {row.attrs["data-key"]: row for row in page.rows_in("usage", "usage-key")}
    assert set(rows) == {"alice", "ops", *HISTORY_KEYS}
    alice = rows["alice"]
    assert alice.cell("requests today") == "5"
    assert number(alice.cell("prompt tokens")) > 0
    assert number(alice.cell("tokens, 30 days")) == number(alice.cell("prompt tokens")) + number(
        alice.cell("completion tokens")
    )
    history = rows["ci-bot"]
    assert history.cell("requests today") == "0"
    assert number(history.cell("requests, 30 days")) > 100
    assert "," in history.cell("tokens, 30 days")  # grouped digits
    assert "Asia" not in page.text_by_section["usage"]  # the fixture's zone is UTC
    assert "UTC" in page.text_by_section["usage"]
    assert len(page.bars) == 30
    assert all(int(bar["data-tokens"]) > 0 for bar in page.bars)
    assert max(float(bar["height"]) for bar in page.bars) == 120.0


async def test_status_needs_an_admin_key(router: Router) -> None:
    assert (await router.get("/status"))[0] == 401
    status, _, body = await router.get("/status", USER.secret)
    assert status == 403
    assert b'"code":"insufficient_permissions"' in body


async def test_status_is_open_without_keys(start_router: StartRouter) -> None:
    router = await start_router([BackendSpecYaml(FakeOllama(sleep=no_sleep), "ollama")])
    status, _, body = await router.get("/status")
    assert status == 200
    page = parse_status(body.decode())
    assert page.rows_in("recent", "request") == []
    assert "No requests yet." in page.text_by_section["recent"]


def number(text: str) -> int:
    return int(text.replace(",", ""))
