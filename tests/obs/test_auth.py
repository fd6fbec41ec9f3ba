"""Auth and admission as clients' SDKs see them (spec §9 Auth, §11): layer 3, fake engines."""

from __future__ import annotations

import datetime as dt
import json
import zoneinfo

import anthropic
import openai
import pytest

from pharos.clock import FakeClock
from pharos.fakeengine import FakeModel, FakeOllama, no_sleep
from tests.obs.rig import MODEL, BackendSpecYaml, KeySpec, Router, StartRouter

ZONE = "Asia/Bangkok"  # +07:00, no DST
# 2026-09-28 22:00:30 in Bangkok: 30 s into a minute, 2 h less 30 s before midnight.
START_WALL = dt.datetime(2026, 9, 28, 22, 0, 30, tzinfo=zoneinfo.ZoneInfo(ZONE)).timestamp()
OTHER_MODEL = "llama3.2:1b"

ALICE = KeySpec("alice", "sk-alice-0001", models=(MODEL,))
BOB = KeySpec("bob", "sk-bob-0002", rpm=2)
CAROL = KeySpec("carol", "sk-carol-0003", tokens_per_day=5)
DAVE = KeySpec("dave", "sk-dave-0004")
PROMETHEUS = KeySpec("prometheus", "sk-prom-0005", metrics=True)


def two_model_ollama() -> FakeOllama:
    return FakeOllama(
        [FakeModel(MODEL), FakeModel(OTHER_MODEL, 1_321_098_329, 2_019_000_000)], sleep=no_sleep
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start_wall=START_WALL)


@pytest.fixture
async def router(start_router: StartRouter, clock: FakeClock) -> Router:
    return await start_router(
        [BackendSpecYaml(two_model_ollama(), "ollama")],
        keys=[ALICE, BOB, CAROL, DAVE, PROMETHEUS],
        clock=clock,
        timezone=ZONE,
    )


def sdk(router: Router, secret: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=f"{router.base}/v1", api_key=secret, max_retries=0, http_client=None
    )


async def ask(router: Router, secret: str, model: str = MODEL) -> None:
    async with sdk(router, secret) as client:
        await client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=3
        )


async def test_missing_key_is_401_invalid_api_key(router: Router) -> None:
    status, _, body = await router.chat(None)
    assert status == 401
    error = json.loads(body)["error"]
    assert error["code"] == "invalid_api_key"
    assert error["type"] == "invalid_request_error"
    assert error["message"]


async def test_wrong_key_is_an_authentication_error(router: Router) -> None:
    with pytest.raises(openai.AuthenticationError) as caught:
        await ask(router, "sk-nobody")
    assert caught.value.status_code == 401
    assert caught.value.code == "invalid_api_key"
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["type"] == "invalid_request_error"


async def test_model_outside_allow_list_is_not_found(router: Router) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        await ask(router, ALICE.secret, OTHER_MODEL)
    assert caught.value.code == "model_not_found"
    await ask(router, ALICE.secret, MODEL)  # the allowed model is served
    await ask(router, DAVE.secret, OTHER_MODEL)  # a key without an allow-list gets any model


async def test_model_list_shows_only_allowed_models(router: Router) -> None:
    async with sdk(router, ALICE.secret) as client:
        alice = sorted([m.id async for m in client.models.list()])
    async with sdk(router, DAVE.secret) as client:
        dave = sorted([m.id async for m in client.models.list()])
    assert alice == [MODEL]
    assert dave == sorted([MODEL, OTHER_MODEL])


async def test_rpm_limit_is_429_with_retry_after_next_minute(router: Router) -> None:
    await ask(router, BOB.secret)
    await ask(router, BOB.secret)
    with pytest.raises(openai.RateLimitError) as caught:
        await ask(router, BOB.secret)
    err = caught.value
    assert err.code == "rate_limit_exceeded"
    assert isinstance(err.body, dict) and err.body["type"] == "rate_limit_error"
    # START_WALL is 30 s into its minute; in the next one the 2 requests of this one
    # still count in full, and half-way through it 2 × 0.5 + 1 ≤ 2.
    assert err.response.headers["retry-after"] == "60"
    await ask(router, DAVE.secret)  # another key is served meanwhile


async def test_quota_is_429_until_midnight_in_the_zone(router: Router, clock: FakeClock) -> None:
    await ask(router, CAROL.secret)  # admitted with 0 used; its reply spends more than 5 tokens
    with pytest.raises(openai.RateLimitError) as caught:
        await ask(router, CAROL.secret)
    err = caught.value
    assert err.code == "insufficient_quota"
    assert isinstance(err.body, dict) and err.body["type"] == "insufficient_quota"
    assert err.response.headers["retry-after"] == str(2 * 3600 - 30)
    await ask(router, DAVE.secret)  # a key over its quota is refused while another is served
    clock.advance(2 * 3600 - 31)
    with pytest.raises(openai.RateLimitError):
        await ask(router, CAROL.secret)  # one second before midnight: still out
    clock.advance(1)
    await ask(router, CAROL.secret)  # a new day in Bangkok: the quota is fresh


async def test_refused_requests_are_decisions(router: Router) -> None:
    await router.chat("sk-nobody")
    await router.chat(ALICE.secret, OTHER_MODEL)
    exposition = (await router.get("/metrics", PROMETHEUS.secret))[2].decode()
    assert 'pharos_decisions_total{outcome="unauthorized",stage="admission"} 1.0' in exposition
    assert 'pharos_decisions_total{outcome="model_not_allowed",stage="admission"} 1.0' in (
        exposition
    )


async def test_ollama_probes_need_no_key(router: Router) -> None:
    async with router.session.head(f"{router.base}/") as resp:
        assert resp.status == 200
    status, _, body = await router.get("/api/version")
    assert status == 200
    assert json.loads(body)["version"] == "0.34.4"
    status, _, _ = await router.get("/metrics")
    assert status == 401  # /metrics names every key: it needs one (issue 11)


async def test_anthropic_sdk_key_header_is_a_key(router: Router) -> None:
    async with router.session.get(
        f"{router.base}/v1/models", headers={"x-api-key": DAVE.secret}
    ) as resp:
        assert resp.status == 200
    wrong = anthropic.AsyncAnthropic(base_url=router.base, api_key="sk-nobody", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        await wrong.messages.create(
            model=MODEL, max_tokens=3, messages=[{"role": "user", "content": "hi"}]
        )
    right = anthropic.AsyncAnthropic(base_url=router.base, api_key=DAVE.secret, max_retries=0)
    try:
        await right.messages.create(
            model=MODEL, max_tokens=3, messages=[{"role": "user", "content": "hi"}]
        )
    except anthropic.APIStatusError as err:  # the fake may not serve /v1/messages: not a 401
        assert err.status_code != 401, err


async def test_waiting_retry_after_admits_the_rpm_key(router: Router, clock: FakeClock) -> None:
    await ask(router, BOB.secret)
    await ask(router, BOB.secret)
    with pytest.raises(openai.RateLimitError) as caught:
        await ask(router, BOB.secret)
    clock.advance(float(caught.value.response.headers["retry-after"]))
    await ask(router, BOB.secret)
