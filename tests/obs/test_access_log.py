"""The access log, X-Request-Id, startup lines and change-only background logging."""

from __future__ import annotations

import logging
import re

import pytest

from pharos.engine.types import Kind
from pharos.fakeengine import FakeLlamaCpp, FakeOllama, no_sleep
from pharos.obs.startup import startup_lines
from pharos.proxy.auth import KeyEntry, KeyTable, hash_key
from pharos.state import BackendStatus
from tests.obs.rig import MODEL, SECRET_PROMPT, BackendSpecYaml, KeySpec, Router, StartRouter

USER = KeySpec("alice", "sk-alice-access-1234")
LLAMA_MODEL = "qwen2.5-0.5b"


def request_id(headers: dict[str, str]) -> str | None:
    """Header names are case-insensitive (aiohttp sends X-Request-ID)."""
    return {name.lower(): value for name, value in headers.items()}.get("x-request-id")


def logfmt(line: str) -> dict[str, str]:
    return {m[0]: m[1].strip('"') for m in re.findall(r'(\w+)=("[^"]*"|\S+)', line)}


def access_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, str]]:
    return [
        logfmt(record.getMessage())
        for record in caplog.records
        if record.name == "pharos.access" and record.levelno == logging.INFO
    ]


@pytest.fixture
async def router(start_router: StartRouter) -> Router:
    return await start_router(
        [
            BackendSpecYaml(FakeOllama(sleep=no_sleep), "ollama"),
            BackendSpecYaml(FakeLlamaCpp(sleep=no_sleep), "llamacpp"),
        ],
        keys=[USER],
    )


async def test_one_info_access_line_per_request_with_who_what_where_and_how_long(
    router: Router, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    status, headers, _ = await router.chat(
        USER.secret, LLAMA_MODEL, content=SECRET_PROMPT, request_id="req-7"
    )
    assert status == 200 and request_id(headers) == "req-7"
    status, _, _ = await router.chat("sk-wrong", MODEL)
    assert status == 401
    status, _, _ = await router.get("/v1/models", USER.secret)
    assert status == 200
    await router.get("/metrics")  # polled by Prometheus: no line
    await router.get("/healthz")

    served, refused, models = access_lines(caplog)
    assert served["method"] == "POST" and served["path"] == "/v1/chat/completions"
    assert (served["route"], served["key"], served["model"]) == ("chat", "alice", LLAMA_MODEL)
    assert served["target"] == f"{router.urls[1]} {LLAMA_MODEL}"
    assert served["status"] == "200" and served["id"] == "req-7"
    assert float(served["ttft"]) >= 0 and float(served["duration"]) >= float(served["ttft"])
    assert (refused["status"], refused["key"], refused["target"]) == ("401", "-", "-")
    assert refused["ttft"] == "-"
    assert (models["method"], models["path"], models["status"]) == ("GET", "/v1/models", "200")
    text = caplog.text
    for secret in (SECRET_PROMPT, USER.secret, hash_key(USER.secret)):
        assert secret not in text


async def test_a_request_id_is_made_when_absent_or_unusable_and_echoed_on_every_response(
    router: Router,
) -> None:
    # (what the client sends,              kept?)
    cases = [
        (None, False),
        ("0f8fad5b-d9cb-469f-a165-70867728950e", True),
        ("x" * 129, False),  # over 128 characters
        ("two words", False),  # a space: not one token
    ]
    seen: set[str] = set()
    for sent, kept in cases:
        status, headers, _ = await router.chat(USER.secret, LLAMA_MODEL, request_id=sent)
        assert status == 200
        echoed = request_id(headers)
        assert echoed is not None
        assert (echoed == sent) is kept
        assert re.fullmatch(r"[\x21-\x7e]{1,128}", echoed)
        seen.add(echoed)
    assert len(seen) == len(cases)
    for path in ("/v1/models", "/healthz", "/metrics", "/no/such/route"):
        _, headers, _ = await router.get(path, USER.secret)
        assert request_id(headers), path
    _, headers, _ = await router.chat(USER.secret, LLAMA_MODEL, stream=True)
    assert request_id(headers)  # a streamed reply's headers go out before it ends


async def test_a_routine_round_logs_nothing_and_a_new_plan_says_kind_version_and_probes(
    router: Router, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    router.pharos.obs.on_decision(router.urls[0], "scrape", "ok")
    router.pharos.obs.on_decision(router.urls[0], "resolve", "same_plan")
    router.pharos.obs.on_decision(router.urls[0], "scrape", "new_version")
    decisions = [r.getMessage() for r in caplog.records if r.name == "pharos.decision"]
    assert decisions == [f"decision backend={router.urls[0]} scrape=new_version"]


async def test_the_first_plan_is_logged_at_info_once(
    start_router: StartRouter, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pharos.state")
    router = await start_router([BackendSpecYaml(FakeOllama(sleep=no_sleep), "auto")])
    for _ in range(3):
        await router.chat(None, MODEL)
    plans = [r.getMessage() for r in caplog.records if "plan:" in r.getMessage()]
    assert len(plans) == 1, plans
    assert plans[0].startswith(f"backend {router.urls[0]}: ollama 0.34.4; plan: ")
    assert "probes active (" in plans[0]


def backend(url: str, *, up: bool, version: str | None) -> BackendStatus:
    return BackendStatus(
        url=url,
        kind=Kind.OLLAMA,
        version=version,
        active_probes=("a", "b"),
        dropped_probes={},
        full_round_age_s=None,
        fast_round_age_s=None,
        up=up,
        reachable=up,
        down_reason=None if up else "unreachable",
        ejected=None,
        log_feed=None,
        log_feed_up=None,
        draining=False,
        target_ids=(1,),
    )


def test_startup_lines_name_every_backend_the_keys_and_the_policy() -> None:
    keys = KeyTable.from_entries(
        [
            KeyEntry(name="alice", sha256=hash_key("k1")),
            KeyEntry(name="ops", sha256=hash_key("k2"), admin=True),
        ]
    )
    lines = startup_lines(
        [
            backend("http://a:11434", up=True, version="0.34.4"),
            backend("http://b", up=False, version=None),
        ],
        keys,
        "cost",
    )
    assert lines == [
        "ready: 2 backends, policy cost, 2 keys (1 admin)",
        "backend http://a:11434: ollama 0.34.4, up, 1 models, 2 probes",
        "backend http://b: ollama version unknown, down (unreachable), 1 models, 2 probes",
    ]
    assert "anonymous" in startup_lines([], KeyTable.open(), "least-load")[0]


async def test_a_huge_model_name_or_path_keeps_the_access_line_short(
    router: Router, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    status, _, _ = await router.chat(USER.secret, "m" * 10_000)
    assert status == 404
    await router.get("/v1/" + "p" * 5_000, USER.secret)
    assert (await router.chat(USER.secret, 'x" key=forged\nstatus=1'))[0] == 404
    lines = [r.getMessage() for r in caplog.records if r.name == "pharos.access"]
    assert len(lines) == 3
    assert all(len(line) < 800 and "\n" not in line for line in lines)
    assert ' model="x\\" key=forged\\nstatus=1" ' in lines[2]  # one quoted value
    assert " key=alice " in lines[2]
