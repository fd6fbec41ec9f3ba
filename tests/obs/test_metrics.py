"""/metrics (spec §13), unmetered requests and the per-request debug line: layer 3 with fakes."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

import pharos.policy.cost
from pharos.fakeengine import FakeLlamaCpp, FakeOllama, no_sleep
from pharos.fakeengine.ledger import Ledger
from pharos.obs.service import request_line
from pharos.policy._load import implementation
from pharos.prefix import chain, links
from pharos.proxy.auth import hash_key
from pharos.proxy.done import RequestDone
from tests.obs.rig import (
    MODEL,
    SECRET_PROMPT,
    BackendSpecYaml,
    KeySpec,
    Router,
    StartRouter,
    wait_for,
)
from tests.obs.status_html import parse_status

LLAMA_MODEL = "qwen2.5-0.5b"
ADMIN = KeySpec("ops", "sk-ops-admin-9999", admin=True)
USER = KeySpec("user", "sk-user-secret-1234")

SPEC_DECISIONS = {
    "admission": [
        "ok",
        "unauthorized",
        "bad_request",
        "too_large",
        "model_not_allowed",
        "rate_limited",
        "quota_exceeded",
        "too_busy",
        "body_timeout",
    ],
    "usage": ["pharos_asked", "client_asked"],
    "route": [
        "only_choice",
        "least_loaded",
        "cache",
        "warm",
        "unknown_model",
        "unavailable",
        "queue_full",
        "queue_timeout",
        "never_fits",
        "client_left",
    ],
    "queue": ["immediate", "waited", "engine_queue"],
    "load": ["cold_start", "unexpected_load", "control"],
    "prefix": ["predicted_hit", "wrong_prediction", "unpredicted_hit", "miss", "unknown"],
    "upstream": [
        "ok",
        "error_status",
        "connect_failed",
        "busy_retried",
        "error_retried",
        "died_mid_reply",
        "idle_timeout",
        "client_left",
        "pharos_error",
    ],
    "resolve": ["new_plan", "same_plan", "failed"],
    "scrape": ["ok", "probe_failed", "new_version", "unreachable"],
    "generation": ["unloaded", "unlisted", "new_version"],
    "log_feed": ["connected", "ended", "open_failed"],
}
"""Copied from the spec's §13 table, so a drift in obs's own table shows here."""

OLLAMA_LOG = (
    'time=2026-09-27T08:38:03.846Z level=INFO source=routes.go:2005 msg="server config" '
    'env="map[OLLAMA_CONTEXT_LENGTH:0 OLLAMA_NUM_PARALLEL:1 OLLAMA_KEEP_ALIVE:5m0s]"\n'
)
LONG_PROMPT = SECRET_PROMPT + " " + "the same long system prompt, " * 80


def samples(exposition: str) -> list[Sample]:
    return [s for family in text_string_to_metric_families(exposition) for s in family.samples]


def value(exposition: str, name: str, **labels: str) -> float | None:
    for sample in samples(exposition):
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
            return sample.value
    return None


async def metrics(router: Router) -> str:
    status, headers, body = await router.get("/metrics", ADMIN.secret)
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain")
    return body.decode()


@pytest.fixture
async def router(start_router: StartRouter, tmp_path: Path) -> Router:
    log_file = tmp_path / "ollama.log"
    log_file.write_text(OLLAMA_LOG)
    return await start_router(
        [
            BackendSpecYaml(FakeOllama(sleep=no_sleep), "ollama", {"logs": f"file://{log_file}"}),
            BackendSpecYaml(FakeLlamaCpp(sleep=no_sleep), "llamacpp"),
        ],
        keys=[ADMIN, USER],
    )


async def test_every_series_without_peers(router: Router) -> None:
    await wait_for(
        lambda: any(b.log_feed_up for b in router.pharos.state.backends()),
        "the log feed never connected",
    )
    assert (await router.chat(USER.secret, MODEL, stream=True, content=SECRET_PROMPT))[0] == 200
    for _ in range(2):  # the second is predicted from the first's prefix on llama.cpp
        status, _, _ = await router.chat(USER.secret, LLAMA_MODEL, content=LONG_PROMPT)
        assert status == 200
    assert (await router.chat("sk-wrong"))[0] == 401

    text = await metrics(router)
    assert value(text, "pharos_requests_total", key="user", model=MODEL, status="200") == 1
    assert value(text, "pharos_requests_total", key="user", model=LLAMA_MODEL, status="200") == 2
    assert value(text, "pharos_requests_total", key="-", status="401") == 1
    for kind in ("prompt", "cached", "completion"):
        assert (
            value(text, "pharos_tokens_total", key="user", model=LLAMA_MODEL, type=kind) is not None
        ), kind
    assert (
        value(text, "pharos_tokens_total", key="user", model=LLAMA_MODEL, type="cached") or 0
    ) > 0
    assert "# TYPE pharos_unmetered_requests_total counter" in text
    assert value(text, "pharos_ttft_seconds_count", model=LLAMA_MODEL) == 2
    assert value(text, "pharos_overhead_seconds_count") == 3
    assert value(text, "pharos_queue_wait_seconds_count", key="user") == 3
    for stage, outcomes in SPEC_DECISIONS.items():
        for outcome in outcomes:
            assert (
                value(text, "pharos_decisions_total", stage=stage, outcome=outcome) is not None
            ), f"{stage}={outcome} is not pre-initialized"
    assert value(text, "pharos_decisions_total", stage="admission", outcome="ok") == 3
    assert value(text, "pharos_decisions_total", stage="usage", outcome="pharos_asked") == 1
    assert (value(text, "pharos_decisions_total", stage="resolve", outcome="new_plan") or 0) >= 2
    assert (value(text, "pharos_decisions_total", stage="log_feed", outcome="connected") or 0) >= 1
    assert (
        value(text, "pharos_prefix_predictions_total", source="local", outcome="predicted_hit") == 1
    )

    ollama, llama = router.urls
    assert value(text, "pharos_backend_up", backend=ollama) == 1
    assert value(text, "pharos_backend_up", backend=llama) == 1
    assert not any(
        "version" in s.labels for s in samples(text) if s.name == "pharos_backend_up"
    )  # an upgrade must not break `pharos_backend_up == 0` alerts
    assert value(text, "pharos_backend_info", backend=ollama, kind="ollama", version="0.34.4") == 1
    assert value(text, "pharos_backend_info", backend=llama, kind="llamacpp") == 1
    assert value(text, "pharos_backend_log_feed_up", backend=ollama) == 1
    assert value(text, "pharos_backend_log_feed_up", backend=llama) is None  # no feed: absent
    assert (value(text, "pharos_backend_probes_active", backend=ollama) or 0) > 0
    target = {"backend": llama, "model": LLAMA_MODEL}
    assert value(text, "pharos_target_inflight", **target) == 0
    assert value(text, "pharos_target_inflight_cluster", **target) == 0
    assert value(text, "pharos_target_signals_unknown", **target) is not None
    assert value(text, "pharos_queue_waiting") == 0
    assert value(text, "pharos_requests_total", backend=llama, route="chat", status="200") == 2
    assert value(text, "pharos_requests_total", backend="", key="-", status="401") == 1
    assert value(text, "pharos_ttft_seconds_count", backend=llama, route="chat") == 2
    assert value(text, "pharos_request_duration_seconds_count", route="chat", status="200") == 3
    assert value(text, "pharos_request_duration_seconds_count", route="chat", status="401") == 1
    build = [s for s in samples(text) if s.name == "pharos_build_info"]
    assert len(build) == 1 and build[0].value == 1 and build[0].labels["version"]
    # which build runs: PHAROS_PURE_PYTHON=1 (the tests run both builds) says python for both
    assert build[0].labels["policy"] == implementation(pharos.policy.cost) in {"mypyc", "python"}
    assert build[0].labels["chain"] == chain.IMPLEMENTATION in {"c", "python"}
    assert build[0].labels["index"] == links.IMPLEMENTATION in {"c", "python"}
    assert not [s.name for s in samples(text) if s.name.endswith("_created")]
    assert "part of prompt" in text  # cached tokens' HELP says they are not extra
    assert "pharos_peer_" not in text  # no peers in this build


async def test_no_prompt_text_or_key_material_in_metrics(router: Router) -> None:
    await router.chat(USER.secret, MODEL, content=SECRET_PROMPT)
    await router.chat(USER.secret, SECRET_PROMPT, content=SECRET_PROMPT)  # an unknown model
    text = await metrics(router)
    assert value(text, "pharos_requests_total", key="user", model=MODEL, status="200") == 1
    for secret in (
        SECRET_PROMPT,
        USER.secret,
        hash_key(USER.secret),
        ADMIN.secret,
        hash_key(ADMIN.secret),
    ):
        assert secret not in text


async def test_inflight_and_queue_gauges_while_held(start_router: StartRouter) -> None:
    engine = FakeOllama(sleep=no_sleep)
    router = await start_router([BackendSpecYaml(engine, "ollama", {"capacity": 1})])
    engine.hold()
    tasks = [asyncio.create_task(router.chat(None, MODEL)) for _ in range(3)]
    await wait_for(lambda: router.pharos.sched.waiting_count() == 2, "requests never queued")
    text = await metrics(router)
    target = f"{router.urls[0]} {MODEL}"
    labels = {"backend": router.urls[0], "model": MODEL}
    assert value(text, "pharos_target_inflight", **labels) == 1
    assert value(text, "pharos_target_inflight_cluster", **labels) == 1
    assert value(text, "pharos_target_capacity", **labels) == 1  # from config
    assert value(text, "pharos_queue_waiting") == 2
    _, _, html = await router.get("/status")
    page = parse_status(html.decode())
    [row] = [row for row in page.rows if row.attrs.get("data-target") == target]
    assert row.cell("in flight here / cluster") == "1 / 1"
    assert row.cell("capacity") == "1 (config)"
    assert "waiting in queue2" in " ".join(page.text_by_section["summary"].split())
    engine.release()
    await asyncio.gather(*tasks)
    text = await metrics(router)
    assert value(text, "pharos_queue_waiting") == 0
    assert value(text, "pharos_decisions_total", stage="queue", outcome="waited") == 2


# ---- unmetered: shown as unmetered, never as 0 tokens ------------------------------------


async def test_overlong_reply_is_unmetered_everywhere(start_router: StartRouter) -> None:
    long_replies = FakeOllama(sleep=no_sleep, ledger=Ledger(natural_stop=False))
    router = await start_router([BackendSpecYaml(long_replies, "ollama")], keys=[ADMIN, USER])
    # A non-streamed reply on one line over 64 KiB: the tap cannot read its usage (spec §9).
    status, _, body = await router.chat(USER.secret, MODEL, max_tokens=25_000)
    assert status == 200 and len(body) > 64 * 1024
    await assert_unmetered(router, usage_too=True)


async def test_engine_killed_mid_stream_is_unmetered(start_router: StartRouter) -> None:
    engine = FakeOllama(sleep=no_sleep)
    router = await start_router([BackendSpecYaml(engine, "ollama")], keys=[ADMIN, USER])
    await kill_mid_stream(router, engine)
    await assert_unmetered(router, usage_too=False)


async def test_engine_killed_mid_stream_counts_in_usage(start_router: StartRouter) -> None:
    engine = FakeOllama(sleep=no_sleep)
    router = await start_router([BackendSpecYaml(engine, "ollama")], keys=[ADMIN, USER])
    await kill_mid_stream(router, engine)
    status, _, body = await router.get("/usage", ADMIN.secret)
    assert status == 200
    rows = json.loads(body)["rows"]
    assert [(row["key"], row.get("unmetered")) for row in rows] == [("user", 1)]


async def kill_mid_stream(router: Router, engine: FakeOllama) -> None:
    engine.hold(after_tokens=2)
    body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    async with router.session.post(
        f"{router.base}/v1/chat/completions", json=body, headers=router.headers(USER.secret)
    ) as resp:
        assert resp.status == 200
        first = await resp.content.readline()
        assert first.startswith(b"data:")
        await engine.kill()
        with pytest.raises(aiohttp.ClientPayloadError):
            await resp.read()
    await wait_for(
        lambda: len(router.pharos.obs.recent) == 1 if router.pharos.obs else False,
        "the cut request never finished",
    )


async def assert_unmetered(router: Router, *, usage_too: bool) -> None:
    text = await metrics(router)
    assert value(text, "pharos_unmetered_requests_total", key="user", model=MODEL) == 1
    for kind in ("prompt", "cached", "completion"):
        assert value(text, "pharos_tokens_total", key="user", model=MODEL, type=kind) is None

    status, _, html = await router.get("/status", ADMIN.secret)
    assert status == 200
    page = parse_status(html.decode())
    [request] = page.rows_in("recent", "request")
    assert "unmetered" in request.cells[0]
    assert request.cell("prompt") == "unknown"  # unknown, never 0
    assert request.cell("completion") == "unknown"
    if not usage_too:
        return
    [today] = page.rows_in("usage", "usage-key")
    assert today.attrs["data-key"] == "user"
    assert today.cell("unmetered requests") == "1"
    status, _, body = await router.get("/usage", ADMIN.secret)
    rows = json.loads(body)["rows"]
    assert [(row["key"], row["requests"], row["unmetered"]) for row in rows] == [("user", 1, 1)]


# ---- the debug line -----------------------------------------------------------------------


async def test_debug_line_per_request_without_prompt_text(
    router: Router, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    status, _, _ = await router.chat(
        USER.secret, LLAMA_MODEL, content=SECRET_PROMPT, request_id="req-42"
    )
    assert status == 200
    lines = [r.getMessage() for r in caplog.records if r.name == "pharos.request"]
    assert len(lines) == 1
    assert all(r.levelno == logging.DEBUG for r in caplog.records if r.name == "pharos.request")
    fields = logfmt(lines[0])
    assert fields["id"] == "req-42"
    assert fields["key"] == "user"
    assert fields["model"] == LLAMA_MODEL
    assert fields["target"] == f"{router.urls[1]} {LLAMA_MODEL}"
    assert fields["status"] == "200"
    assert fields["reason"] not in ("", "-")
    decisions = dict(pair.split("=", 1) for pair in fields["decisions"].split())
    assert decisions["admission"] == "ok"
    assert decisions["route"] == "only_choice"
    assert decisions["upstream"] == "ok"
    for timing in ("ttft", "overhead", "duration"):
        assert float(fields[timing]) >= 0, timing
    assert SECRET_PROMPT not in caplog.text
    assert USER.secret not in caplog.text


def test_debug_line_quotes_client_strings_onto_one_line() -> None:
    done = RequestDone(
        route="chat",
        request_id='id with "quotes"',
        key="user",
        model="evil\nmodel=x",
        status=404,
        decisions=(("admission", "ok"), ("route", "unknown_model")),
        target_key=None,
        backend_url=None,
        decision=None,
        queued_by=None,
        overhead_s=None,
        queue_wait_s=None,
        ttft_s=None,
        duration_s=0.25,
        prompt_tokens=None,
        cached_tokens=None,
        completion_tokens=None,
        metered=None,
        prefix_source=None,
        finished_wall_s=0.0,
    )
    line = request_line(done)
    assert "\n" not in line
    fields = logfmt(line)
    assert fields["id"] == 'id with "quotes"'
    assert fields["model"] == "evil\nmodel=x"
    assert fields["ttft"] == "-"  # unknown, not 0
    assert fields["duration"] == "0.2500"


def logfmt(line: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for match in re.finditer(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)', line):
        raw = match.group(2)
        fields[match.group(1)] = json.loads(raw) if raw.startswith('"') else raw
    return fields
