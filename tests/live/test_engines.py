"""Behavior of real engines as Pharos reads them (spec §14 layer 4 checklist).

Each engine is started from the engine cache, driven through idle, loaded, busy (4 slow
streams on 2 slots), saturated (8), cancelled and a repeated ~600-token prefix, and
recorded (conftest.py). Pharos's resolve + scrape ran against the live engine in every
state; these tests assert what they read, and what the recorded replies report.
"""

from __future__ import annotations

import pytest

from pharos.engine import Kind, Residency, Signal
from tests.live.checks import LiveCapture, load_value, reply_usage
from tests.live.engines import LLAMACPP_BUILD, VLLM_VERSION
from tests.live.proofs import Prove, source

pytestmark = pytest.mark.live

ENGINES = ["llamacpp", "vllm"]

EXPECTED_VERSION = {"llamacpp": f"b{LLAMACPP_BUILD}", "vllm": f"v{VLLM_VERSION}"}
EXPECTED_KIND = {"llamacpp": Kind.LLAMACPP, "vllm": Kind.VLLM}
EMBEDDINGS_SERVED = {"llamacpp": False, "vllm": False}
"""Both run as chat servers: llama-server without --embeddings, vLLM with the generate runner."""


@pytest.fixture(params=ENGINES)
def live(request: pytest.FixtureRequest) -> LiveCapture:
    capture: LiveCapture = request.getfixturevalue(request.param)
    return capture


def test_detects_the_engine_and_its_version(live: LiveCapture, prove: Prove) -> None:
    observed = live.observed("idle")
    assert live.capture.version == EXPECTED_VERSION[live.engine.name]
    assert observed.plan.kind == EXPECTED_KIND[live.engine.name]
    assert observed.resolved.version is not None
    assert observed.resolved.version.lstrip("v").startswith(
        EXPECTED_VERSION[live.engine.name].lstrip("v")
    ), observed.resolved.version
    assert observed.resolved.models is not None
    assert live.engine.model in observed.resolved.models
    for signal in (Signal.VERSION, Signal.MODELS):
        prove(live.engine.name, live.capture.version, signal, source(observed.resolved, signal))


def test_idle_reads_known_zeros(live: LiveCapture) -> None:
    snapshot = live.observed("idle").scraped.snapshot
    assert load_value(snapshot, live.engine.model, "running") == 0
    assert load_value(snapshot, live.engine.model, "waiting") == 0


@pytest.mark.parametrize(
    ("state", "running", "waiting"),
    [("busy", 2, 2), ("saturated", 2, 6), ("cancelled", 0, 0)],
)
def test_running_and_waiting_follow_the_load(
    live: LiveCapture, state: str, running: int, waiting: int, prove: Prove
) -> None:
    observed = live.observed(state)
    assert not observed.scraped.failed, observed.scraped.failed
    snapshot = observed.scraped.snapshot
    assert load_value(snapshot, live.engine.model, "running") == running
    assert load_value(snapshot, live.engine.model, "waiting") == waiting
    assert live.capture.gauges[state] == (running, waiting), "the driver's own reading agrees"
    if state == "saturated":  # the state that tells waiting apart from running
        for signal in (Signal.RUNNING, Signal.WAITING):
            prove(live.engine.name, live.capture.version, signal, source(snapshot, signal))


def test_llamacpp_reports_capacity_2_and_no_kv_usage(llamacpp: LiveCapture, prove: Prove) -> None:
    for state in ("idle", "busy", "saturated"):
        snapshot = llamacpp.observed(state).scraped.snapshot
        assert load_value(snapshot, llamacpp.engine.model, "capacity") == 2
        # b11312's /metrics has no KV cache gauge and the library has no llama.cpp KV probe.
        assert load_value(snapshot, llamacpp.engine.model, "kv_usage") is None
    idle = llamacpp.observed("idle").scraped.snapshot
    prove("llamacpp", llamacpp.capture.version, Signal.CAPACITY, source(idle, Signal.CAPACITY))


def test_vllm_reports_kv_usage_and_no_capacity(vllm: LiveCapture, prove: Prove) -> None:
    busy = vllm.observed("busy").scraped.snapshot
    kv = load_value(busy, vllm.engine.model, "kv_usage")
    assert kv is not None and 0 < kv <= 1
    for state in ("idle", "busy", "saturated"):
        # vLLM serves no capacity signal anywhere (--max-num-seqs is not exposed): unknown.
        snapshot = vllm.observed(state).scraped.snapshot
        assert load_value(snapshot, vllm.engine.model, "capacity") is None
    prove("vllm", vllm.capture.version, Signal.KV_USAGE, source(busy, Signal.KV_USAGE))


def test_the_single_model_reads_loaded(live: LiveCapture) -> None:
    models = live.observed("loaded").resolved.models
    assert models is not None
    state = models[live.engine.model].state
    # Neither engine has a residency probe for its one model: it serves only while loaded.
    assert state in (Residency.LOADED, Residency.UNKNOWN), state


def test_repeated_long_prefix_reports_cached_tokens(live: LiveCapture) -> None:
    first = reply_usage(live.capture.replies["openai-chat.1.sse"].body)
    second = reply_usage(live.capture.replies["openai-chat.2.sse"].body)
    assert first is not None and second is not None
    assert first.prompt_tokens is not None and first.prompt_tokens >= 500
    assert second.prompt_tokens == first.prompt_tokens
    assert second.cached_tokens is not None and second.cached_tokens > 0
    assert second.cached_tokens >= second.prompt_tokens // 2, second
    assert first.cached_tokens is None or first.cached_tokens < second.cached_tokens


@pytest.mark.parametrize(
    "reply", ["openai-chat.1.sse", "openai-chat.json", "openai-completion.json"]
)
def test_every_served_reply_reports_prompt_tokens(live: LiveCapture, reply: str) -> None:
    recorded = live.capture.replies[reply]
    assert recorded.status == 200, recorded.body[:200]
    usage = reply_usage(recorded.body)
    assert usage is not None, f"{reply} carries no usage"
    assert usage.prompt_tokens is not None and usage.prompt_tokens > 0
    assert usage.completion_tokens is not None and usage.completion_tokens > 0


def test_embeddings_are_served_or_refused_as_recorded(live: LiveCapture) -> None:
    recorded = live.capture.replies["openai-embeddings.json"]
    if EMBEDDINGS_SERVED[live.engine.name]:
        assert recorded.status == 200
        usage = reply_usage(recorded.body)
        assert usage is not None and usage.prompt_tokens is not None and usage.prompt_tokens > 0
    else:
        assert 400 <= recorded.status < 600, recorded.status


UNKNOWN_MODEL_STATUS = {"llamacpp": 200, "vllm": 404}
"""A single-model llama-server ignores the request's model name (as b8772 did in the Go
captures); vLLM refuses a name it does not serve."""


def test_unknown_model_status(live: LiveCapture) -> None:
    recorded = live.capture.replies["unknown-model.txt"]
    assert recorded.status == UNKNOWN_MODEL_STATUS[live.engine.name], recorded.body[:200]
