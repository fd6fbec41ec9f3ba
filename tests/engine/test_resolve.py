"""resolve / scrape against scripted engines: plans, drop reasons, one GET per path."""

from __future__ import annotations

from dataclasses import replace

import aiohttp
import pytest

from pharos.engine import (
    BackendUnreachable,
    Kind,
    Residency,
    Signal,
    log_line,
    prom,
    resolve,
    scrape,
)
from pharos.engine.types import Feed, Probe, Snapshot
from tests.engine.server import NO_ANSWER, Reply, json_reply, serve, text_reply

PROPS_B8772 = '{"build_info":"b8772-bafae2765","total_slots":2}'
PROPS_B6602 = '{"build_info":"b6602-72b24d96","total_slots":2}'
MODELS = '{"object":"list","data":[{"id":"qwen"}]}'
METRICS = "llamacpp:requests_processing 2\nllamacpp:requests_deferred 3\n"
SLOTS = '[{"is_processing":true},{"is_processing":true}]'


def llamacpp(props: str = PROPS_B8772, metrics: Reply | None = None) -> dict[str, Reply]:
    return {
        "/props": json_reply(props),
        "/v1/models": json_reply(MODELS),
        "/metrics": metrics if metrics is not None else text_reply(METRICS),
        "/slots": json_reply(SLOTS),
    }


async def test_resolve_llamacpp_plan_and_snapshot() -> None:
    async with serve(llamacpp()) as engine, aiohttp.ClientSession() as session:
        plan, snap = await resolve(session, engine.base_url, Kind.LLAMACPP)
        assert engine.hits == {"/props": 1, "/v1/models": 1, "/metrics": 1, "/slots": 1}
    assert plan.kind is Kind.LLAMACPP
    assert plan.version == "b8772-bafae2765"
    assert [p.name for p in plan.active] == [
        "llamacpp-props-version",
        "openai-models",
        "llamacpp-props-capacity",
        "llamacpp-running",
        "llamacpp-waiting",
    ]
    assert plan.dropped == {
        "llamacpp-router-residency": "no value",  # single-model mode: no status field
        # no router listed models, so no per-model probe runs (none asks ?model=X)
        "llamacpp-router-capacity": "no per-model list",
        "llamacpp-router-running": "no per-model list",
        "llamacpp-router-waiting": "no per-model list",
        "llamacpp-slots-running": "redundant",
    }
    assert snap.loads[""].running == 2 and snap.loads[""].waiting == 3
    assert snap.loads[""].capacity == 2
    assert snap.models is not None and snap.models["qwen"].state is Residency.UNKNOWN
    assert snap.sources[Signal.WAITING] == "llamacpp-waiting"


async def test_version_guard_drops_waiting_before_b8772() -> None:
    async with serve(llamacpp(PROPS_B6602)) as engine, aiohttp.ClientSession() as session:
        plan, snap = await resolve(session, engine.base_url, Kind.LLAMACPP)
    assert plan.dropped["llamacpp-waiting"] == "version guard"
    assert snap.loads[""].waiting is None


async def test_unknown_version_fails_the_guard() -> None:
    routes = llamacpp('{"total_slots":2}')
    async with serve(routes) as engine, aiohttp.ClientSession() as session:
        plan, snap = await resolve(session, engine.base_url, Kind.LLAMACPP)
    assert plan.version is None
    assert plan.dropped["llamacpp-waiting"] == "version guard"
    assert snap.loads[""].waiting is None


async def test_metrics_off_falls_back_to_slots() -> None:
    routes = llamacpp(metrics=Reply(status=501, body=b'{"error":"metrics disabled"}'))
    async with serve(routes) as engine, aiohttp.ClientSession() as session:
        plan, snap = await resolve(session, engine.base_url, Kind.LLAMACPP)
    assert plan.dropped["llamacpp-running"] == "status 501"
    assert plan.dropped["llamacpp-waiting"] == "status 501"
    assert snap.sources[Signal.RUNNING] == "llamacpp-slots-running"
    assert snap.loads[""].running == 2


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (Reply(status=404), "404"),
        (Reply(status=503), "status 503"),
        (NO_ANSWER, "fetch error: "),
        (json_reply('{"build_info": 7}'), "parse error: "),
        (json_reply("{}"), "no value"),
    ],
)
async def test_drop_reasons(reply: Reply, reason: str) -> None:
    routes = llamacpp()
    routes["/props"] = reply
    async with serve(routes) as engine, aiohttp.ClientSession() as session:
        plan, _ = await resolve(session, engine.base_url, Kind.LLAMACPP)
    assert plan.dropped["llamacpp-props-version"].startswith(reason)
    assert plan.incomplete is reason.startswith(("status 5", "fetch error"))


async def test_own_probes_go_first_and_win_their_signal() -> None:
    own = prom("my-running", "/metrics", Signal.RUNNING, "llamacpp:requests_deferred", own=True)
    async with serve(llamacpp()) as engine, aiohttp.ClientSession() as session:
        plan, snap = await resolve(session, engine.base_url, Kind.LLAMACPP, own=[own])
        assert engine.hits["/metrics"] == 1
    assert plan.active[0].name == "my-running"
    assert plan.dropped["llamacpp-running"] == "redundant"
    assert snap.sources[Signal.RUNNING] == "my-running"
    assert snap.loads[""].running == 3


async def test_log_probes_need_a_feed_and_yield_to_scraped_probes() -> None:
    own_cap = log_line("my-cap", Signal.CAPACITY, r"slots=(?P<value>\d+)", own=True)
    async with (
        serve(
            {
                "/api/version": json_reply('{"version":"0.34.4"}'),
                "/v1/models": json_reply(MODELS),
                "/api/ps": json_reply('{"models":[]}'),
                "/api/tags": json_reply('{"models":[{"name":"qwen","size":5}]}'),
            }
        ) as engine,
        aiohttp.ClientSession() as session,
    ):
        no_feed, _ = await resolve(session, engine.base_url, Kind.OLLAMA)
        fed, snap = await resolve(session, engine.base_url, Kind.OLLAMA, has_log_feed=True)
        plan_l, _ = await resolve(session, engine.base_url, Kind.LLAMACPP, own=[own_cap])
    assert no_feed.dropped["ollama-log-num-parallel"] == "no log feed"
    assert [p.name for p in fed.log_probes] == ["ollama-log-num-parallel"]
    assert snap.models is not None and snap.models["qwen"].state is Residency.COLD
    assert snap.models["qwen"].size_bytes == 5
    assert plan_l.dropped["my-cap"] == "no log feed"


async def test_scrape_one_get_per_path_and_fast_rounds() -> None:
    async with serve(llamacpp()) as engine, aiohttp.ClientSession() as session:
        plan, _ = await resolve(session, engine.base_url, Kind.LLAMACPP)
        engine.hits.clear()
        full = await scrape(plan, session, engine.base_url)
        assert engine.hits == {"/props": 1, "/v1/models": 1, "/metrics": 1}
        engine.hits.clear()
        fast = await scrape(plan, session, engine.base_url, fast_only=True)
        assert engine.hits == {"/metrics": 1}
    assert plan.paths(fast_only=True) == ("/metrics",)
    assert full.failed == {} and full.answered and not full.needs_resolve
    assert full.snapshot.version == "b8772-bafae2765"
    assert fast.snapshot.version is None and not fast.needs_resolve
    assert fast.snapshot.loads[""].running == 2 and fast.snapshot.loads[""].capacity is None


async def test_scrape_failure_and_version_change_ask_for_resolve() -> None:
    routes = llamacpp()
    async with serve(routes) as engine, aiohttp.ClientSession() as session:
        plan, _ = await resolve(session, engine.base_url, Kind.LLAMACPP)
        routes["/metrics"] = Reply(status=404)
        failed = await scrape(plan, session, engine.base_url)
        routes["/metrics"] = text_reply(METRICS)
        routes["/props"] = json_reply('{"build_info":"b9000-1","total_slots":2}')
        upgraded = await scrape(plan, session, engine.base_url)
    assert failed.failed == {"llamacpp-running": "404", "llamacpp-waiting": "404"}
    assert failed.snapshot.loads[""].running is None
    assert failed.needs_resolve and failed.answered
    assert upgraded.failed == {} and upgraded.needs_resolve


async def test_scrape_unreachable_backend() -> None:
    async with serve(llamacpp()) as engine, aiohttp.ClientSession() as session:
        plan, _ = await resolve(session, engine.base_url, Kind.LLAMACPP)
        base = engine.base_url
    async with aiohttp.ClientSession() as session:
        result = await scrape(plan, session, base, timeout_s=2.0)
    assert not result.answered
    assert set(result.failed) == {p.name for p in plan.http_probes}
    assert all(r.startswith("fetch error") for r in result.failed.values())


async def test_resolve_raises_when_nothing_answers() -> None:
    every_path_503 = {p: Reply(status=503) for p in ("/props", "/v1/models", "/metrics", "/slots")}
    async with serve(every_path_503) as engine, aiohttp.ClientSession() as session:
        with pytest.raises(BackendUnreachable, match="status 503"):
            await resolve(session, engine.base_url, Kind.LLAMACPP)
    async with aiohttp.ClientSession() as session:
        with pytest.raises(BackendUnreachable):
            await resolve(session, engine.base_url, Kind.OPENAI, timeout_s=2.0)


async def test_single_model_engine_keeps_residency_unknown() -> None:
    metrics = (
        'vllm:num_requests_running{engine="0",model_name="qwen"} 1.0\n'
        'vllm:num_requests_waiting{engine="0",model_name="qwen"} 0.0\n'
        'vllm:kv_cache_usage_perc{engine="0",model_name="qwen"} 0.5\n'
    )
    routes = {
        "/version": json_reply('{"version":"0.32.0"}'),  # shape per vLLM docs; no capture body
        "/v1/models": json_reply(MODELS),
        "/metrics": text_reply(metrics),
    }
    async with serve(routes) as engine, aiohttp.ClientSession() as session:
        plan, snap = await resolve(session, engine.base_url, Kind.VLLM)
    assert plan.dropped == {}
    assert snap.models is not None and snap.models["qwen"].state is Residency.UNKNOWN
    assert snap.loads["qwen"].running == 1 and snap.loads["qwen"].kv_usage == 0.5


async def test_capacity_past_float_range_drops_only_that_probe() -> None:
    routes = llamacpp('{"build_info":"b8772-bafae2765","total_slots":' + "9" * 400 + "}")
    async with serve(routes) as engine, aiohttp.ClientSession() as session:
        plan, snap = await resolve(session, engine.base_url, Kind.LLAMACPP)
    assert plan.dropped["llamacpp-props-capacity"].startswith("parse error: capacity:")
    assert snap.loads[""].capacity is None
    assert snap.loads[""].running == 2


async def test_a_probe_that_raises_an_unexpected_error_is_dropped_not_fatal() -> None:
    def broken(_body: bytes) -> Snapshot:
        raise KeyError("a bug in an own probe")

    own = Probe("my-broken", Signal.RUNNING, Feed(path="/metrics"), broken, own=True)
    async with serve(llamacpp()) as engine, aiohttp.ClientSession() as session:
        plan, snap = await resolve(session, engine.base_url, Kind.LLAMACPP, own=[own])
        result = await scrape(replace(plan, active=(own, *plan.active)), session, engine.base_url)
    assert plan.dropped["my-broken"] == "parse error: KeyError"
    assert snap.loads[""].running == 2
    assert result.failed["my-broken"] == "parse error: KeyError"
    assert result.answered
