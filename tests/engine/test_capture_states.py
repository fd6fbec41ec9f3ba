"""Detection, resolve and scrape on whole engine states from capture files.

Shared captures: the copies are incomplete (MANIFEST.md): a missing body is not a
404. Each shared state below names where every body comes from; statuses come from
that version's paths.tsv (a body that exists in one state of a version is the same
in every state of it: version, props, api_tags).

Our own recordings (tests/captures/, `pharos doctor --record` / tests/live) are
complete: every state has its paths.tsv and a body for every path that answered,
so each state is served exactly as recorded.

Paths a state doesn't script answer 500 and are recorded; the tests assert none was
asked for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest
from tools.captures import OUR_CAPTURES, shared_captures

from pharos.engine import (
    BackendUnreachable,
    DetectionFailed,
    Kind,
    Load,
    Residency,
    detect,
    resolve,
    scrape,
)
from pharos.engine.captures import body_name
from tests.engine.server import NO_ANSWER, Reply, serve

ROOT = shared_captures() / "engines"
OURS = OUR_CAPTURES
needs_shared = pytest.mark.skipif(not ROOT.is_dir(), reason="no captures (set PHAROS_CAPTURES)")


def tsv(rel: str) -> dict[str, Reply]:
    """Non-200 statuses of a paths.tsv: 404/503 as themselves, 000 as no answer."""
    out: dict[str, Reply] = {}
    for line in (ROOT / rel).read_text().splitlines():
        path, status, *_ = line.split("\t")
        if status == "000":
            out[path] = NO_ANSWER
        elif status != "200":
            out[path] = Reply(status=int(status))
    return out


@dataclass(frozen=True)
class State:
    name: str
    statuses: str  # the paths.tsv the non-200 answers come from
    bodies: Mapping[str, str]  # path -> capture file relative to engines/
    kind: Kind | type[Exception]
    version: str | None = None
    loads: Mapping[str, Mapping[str, int | None]] = field(default_factory=dict)
    residency: Mapping[str, Residency] = field(default_factory=dict)

    def routes(self) -> dict[str, Reply]:
        routes = tsv(self.statuses)
        for path, rel in self.bodies.items():
            routes[path] = Reply(body=(ROOT / rel).read_bytes())
        return routes


STATES = [
    State(
        "llama-swap/v185/idle",
        "llama-swap/v185/cancelled/paths.tsv",
        {
            "/running": "llama-swap/v185/idle/running",
            "/api/version": "llama-swap/v185/idle/api_version",
            "/v1/models": "llama-swap/v185/idle/v1_models",
        },
        Kind.LLAMA_SWAP,
        "185",
        residency={"qwen2.5-0.5b": Residency.COLD},
    ),
    State(
        "llama-swap/v185/busy",
        "llama-swap/v185/cancelled/paths.tsv",
        {
            "/running": "llama-swap/v185/busy/running",
            "/api/version": "llama-swap/v185/idle/api_version",
            "/v1/models": "llama-swap/v185/busy/v1_models",
        },
        Kind.LLAMA_SWAP,
        "185",
        residency={"qwen2.5-0.5b": Residency.LOADED},
    ),
    State(
        "llama-swap/v219/saturated",
        "llama-swap/v219/loaded/paths.tsv",
        {
            "/running": "llama-swap/v219/saturated/running",
            "/api/version": "llama-swap/v219/cancelled/api_version",
            "/metrics": "llama-swap/v219/loaded/metrics",
            "/v1/models": "llama-swap/v219/saturated/v1_models",
        },
        Kind.LLAMA_SWAP,
        "219",
        residency={"qwen2.5-0.5b": Residency.LOADED},
    ),
    State(
        "llama-swap/v260/cold",
        "llama-swap/v260/idle/paths.tsv",
        {
            "/running": "llama-swap/v260/cold/running",
            "/api/version": "llama-swap/v260/cold/api_version",
            "/metrics": "llama-swap/v260/cold/metrics",
            "/models": "llama-swap/v260/idle/models",
            "/v1/models": "llama-swap/v260/cold/v1_models",
        },
        Kind.LLAMA_SWAP,
        "v260",
        residency={"qwen2.5-0.5b": Residency.COLD},
    ),
    State(
        "ollama/v0.12.4/loaded",
        "ollama/v0.12.4/cold/paths.tsv",
        {
            "/api/version": "ollama/v0.12.4/cold/api_version",
            "/api/ps": "ollama/v0.12.4/loaded/api_ps",
            "/api/tags": "ollama/v0.12.4/cancelled/api_tags",
            "/v1/models": "ollama/v0.12.4/saturated/v1_models",
        },
        Kind.OLLAMA,
        "0.12.4",
        residency={"qwen2.5:0.5b": Residency.LOADED},
    ),
    State(
        "llamacpp/b6602/busy",
        "llamacpp/b6602/busy/paths.tsv",
        {
            "/api/tags": "llamacpp/b6602/busy/api_tags",
            "/props": "llamacpp/b6602/idle/props",
            "/slots": "llamacpp/b6602/busy/slots",
            "/metrics": "llamacpp/b6602/busy/metrics",
            "/models": "llamacpp/b6602/cancelled/models",
            "/v1/models": "llamacpp/b6602/saturated/v1_models",
        },
        Kind.LLAMACPP,
        "b6602-72b24d96",
        loads={"": {"running": 2, "waiting": None, "capacity": 2}},
    ),
    State(
        "llamacpp/b6602/saturated",
        "llamacpp/b6602/saturated/paths.tsv",
        {"/v1/models": "llamacpp/b6602/saturated/v1_models"},
        DetectionFailed,
    ),
    State(
        "llamacpp/b7139/busy",
        "llamacpp/b7139/busy/paths.tsv",
        {
            "/api/tags": "llamacpp/b7139/busy/api_tags",
            "/props": "llamacpp/b7139/loaded/props",
            "/slots": "llamacpp/b7139/busy/slots",
            "/metrics": "llamacpp/b7139/busy/metrics",
            "/models": "llamacpp/b7139/saturated/v1_models",  # b7139 keeps no /models copy
            "/v1/models": "llamacpp/b7139/saturated/v1_models",
        },
        Kind.LLAMACPP,
        "b7139-923ae3c61",
        loads={"": {"running": 2, "waiting": None, "capacity": 2}},
    ),
    State(
        "llamacpp/b8772/saturated",
        "llamacpp/b8772/saturated/paths.tsv",
        {
            "/api/tags": "llamacpp/b8772/busy/api_tags",
            "/props": "llamacpp/b8772/busy/props",
            "/slots": "llamacpp/b8772/saturated/slots",
            "/metrics": "llamacpp/b8772/saturated/metrics",
            "/models": "llamacpp/b8772/idle/models",
            "/v1/models": "llamacpp/b8772/saturated/v1_models",
        },
        Kind.LLAMACPP,
        "b8772-bafae2765",
        loads={"": {"running": 2, "waiting": 6, "capacity": 2}},
    ),
    State(
        "llamacpp/v0.5.0/loaded",
        "llamacpp/v0.5.0/loaded/paths.tsv",
        {
            "/props": "llamacpp/v0.5.0/loaded/props",
            "/slots": "llamacpp/v0.5.0/loaded/slots",
            "/metrics": "llamacpp/v0.5.0/loaded/metrics",
            "/models": "llamacpp/v0.5.0/loaded/v1_models",
            "/v1/models": "llamacpp/v0.5.0/loaded/v1_models",
        },
        Kind.LLAMACPP,
        "b11146-7fe450e19",
        loads={"": {"running": 0, "waiting": 0, "capacity": 2}},
    ),
    State("llamacpp/v0.5.0/loading", "llamacpp/v0.5.0/loading/paths.tsv", {}, DetectionFailed),
    State(
        "mlx-lm/v0.31.3/loaded",
        "mlx-lm/v0.31.3/loaded/paths.tsv",
        {"/v1/models": "mlx-lm/v0.31.3/loaded/v1_models"},
        Kind.OPENAI,
        residency={"mlx-community/Qwen2.5-0.5B-Instruct-4bit": Residency.UNKNOWN},
    ),
    # SGLang v0.5.20 kept no paths.tsv: its 404s are borrowed from v0.5.8 (the closest
    # version that has one); /server_info, /get_model_info, /v1/loads come from v0.5.20.
    State(
        "sglang/v0.5.20/busy",
        "sglang/v0.5.8/loaded/paths.tsv",
        {
            "/get_server_info": "sglang/v0.5.20/busy/get_server_info",
            "/server_info": "sglang/v0.5.20/busy/get_server_info",
            "/get_model_info": "sglang/v0.5.20/loaded/get_model_info",
            "/v1/loads": "sglang/v0.5.20/busy/v1_loads",
            "/api/tags": "sglang/v0.5.20/busy/api_tags",
            "/metrics": "sglang/v0.5.20/busy/metrics",
            "/v1/models": "sglang/v0.5.20/busy/v1_models",
        },
        Kind.SGLANG,
        "0.5.20",
        loads={"": {"capacity": 2}, "qwen2.5-0.5b": {"running": 2, "waiting": 2}},
        residency={"qwen2.5-0.5b": Residency.UNKNOWN},
    ),
    # vLLM: no /version body survived in the copies, so no whole state can be assembled.
]


@needs_shared
@pytest.mark.parametrize("state", STATES, ids=[s.name for s in STATES])
async def test_detect_and_resolve_capture_state(state: State) -> None:
    assert all((ROOT / rel).is_file() for rel in state.bodies.values())
    async with serve(state.routes()) as engine, aiohttp.ClientSession() as session:
        if not isinstance(state.kind, Kind):
            with pytest.raises(state.kind):
                await detect(session, engine.base_url, timeout_s=2.0)
            return
        assert await detect(session, engine.base_url, timeout_s=2.0) is state.kind
        plan, snap = await resolve(session, engine.base_url, Kind.AUTO, timeout_s=2.0)
        assert engine.unexpected == []
    assert plan.kind is state.kind
    assert plan.version == state.version == snap.version
    for key, fields in state.loads.items():
        for name, value in fields.items():
            assert getattr(snap.loads.get(key), name, None) == value, (key, name)
    for model, residency in state.residency.items():
        assert snap.models is not None and snap.models[model].state is residency


@needs_shared
async def test_resolve_llamacpp_while_loading_is_unreachable() -> None:
    state = next(s for s in STATES if s.name == "llamacpp/v0.5.0/loading")
    async with serve(state.routes()) as engine, aiohttp.ClientSession() as session:
        with pytest.raises(BackendUnreachable, match="status 503"):
            await resolve(session, engine.base_url, Kind.LLAMACPP)


@needs_shared
async def test_resolve_saturated_b6602_keeps_what_answered() -> None:
    state = next(s for s in STATES if s.name == "llamacpp/b6602/saturated")
    async with serve(state.routes()) as engine, aiohttp.ClientSession() as session:
        plan, snap = await resolve(session, engine.base_url, Kind.LLAMACPP, timeout_s=2.0)
    assert [p.name for p in plan.active] == ["openai-models"]
    assert plan.dropped["llamacpp-props-version"].startswith("fetch error")
    assert plan.incomplete
    assert snap.loads == {}


def test_states_cover_every_engine_with_a_capture() -> None:
    engines = {Path(s.name).parts[0] for s in STATES}
    assert engines >= {"llama-swap", "ollama", "llamacpp", "mlx-lm", "sglang"}


# --- our own complete recordings (tests/captures/) ---


def recorded(state_dir: Path) -> dict[str, Reply]:
    """One recorded state served as it answered: every paths.tsv status with its own body,
    the router's per-model `?model=...&autoload=false` lines included (routed on path+query:
    a probe asking any other query, e.g. one without autoload=false, is unexpected)."""
    routes: dict[str, Reply] = {}
    for line in (state_dir / "paths.tsv").read_text().splitlines():
        path, status, content_type = line.split("\t")
        if status == "000":
            routes[path] = NO_ANSWER
            continue
        file = state_dir / body_name(path)
        assert status == "404" or file.is_file(), f"complete capture lacks {file}"
        body = file.read_bytes() if file.is_file() else b""
        mime = content_type.split(";")[0].strip()
        routes[path] = Reply(int(status), body, "application/octet-stream" if mime == "-" else mime)
    return routes


@dataclass(frozen=True)
class Recorded:
    """What one recorded state must resolve to (values read off the capture files)."""

    name: str  # <dir under tests/captures>/<state>
    kind: Kind
    version: str
    active: tuple[str, ...]  # probe names, plan order
    dropped: Mapping[str, str]  # probe name -> reason
    models: Mapping[str, Residency]
    loads: Mapping[str, Load]


SMOL, GEMMA = "smollm2", "gemma3"
LLAMACPP_ACTIVE = (
    "llamacpp-props-version",
    "openai-models",
    "llamacpp-props-capacity",
    "llamacpp-running",
    "llamacpp-waiting",  # b11312 >= b8772: the guard passes
)
LLAMACPP_DROPPED = {
    "llamacpp-router-residency": "no value",  # single-model /v1/models has no status field
    # no router list, so no per-model GET (the script would flag any ?model= query)
    "llamacpp-router-capacity": "no per-model list",
    "llamacpp-router-running": "no per-model list",
    "llamacpp-router-waiting": "no per-model list",
    "llamacpp-slots-running": "redundant",  # /metrics already gave running
}
VLLM_ACTIVE = (
    "vllm-version",
    "openai-models",
    "vllm-running",
    "vllm-waiting",
    "vllm-kv-cache-usage-perc",
)
ROUTER_ACTIVE = (
    "llamacpp-props-version",
    "openai-models",
    "llamacpp-router-residency",
    # per model, kept while every model is cold too (400 "model is not loaded", 503 loading)
    "llamacpp-router-capacity",
    "llamacpp-router-running",
    "llamacpp-router-waiting",
)
ROUTER_DROPPED = {
    # the per-model probes own these signals; the bare router paths read nothing anyway
    # (/props has no total_slots, /metrics and /slots answer 400 "model name is missing")
    "llamacpp-props-capacity": "redundant",
    "llamacpp-running": "redundant",
    "llamacpp-waiting": "redundant",
    "llamacpp-slots-running": "redundant",
}
IDLE_CHILD = Load(running=0, waiting=0, capacity=2)  # -np 2: the child's /props total_slots
ROUTER_LOADS: Mapping[str, Mapping[str, Load]] = {  # per-model /metrics and /props, per state
    "loaded": {SMOL: IDLE_CHILD},
    "busy": {SMOL: Load(running=2, waiting=2, capacity=2)},  # 4 streams on 2 slots
    "saturated": {SMOL: Load(running=2, waiting=6, capacity=2)},  # 8 streams
    "cancelled": {SMOL: IDLE_CHILD},
    "swapped": {GEMMA: IDLE_CHILD},
}
LLAMACPP_LOADS = {  # /metrics requests_processing, requests_deferred; /props total_slots
    "idle": (0, 0),
    "loaded": (0, 0),
    "busy": (2, 2),  # 4 requests on 2 slots
    "saturated": (2, 6),  # 8 requests on 2 slots
    "cancelled": (0, 0),
    "prefix": (0, 0),
}
VLLM_LOADS = {  # vllm:num_requests_running, _waiting, kv_cache_usage_perc for smollm2
    "idle": (0, 0, 0.0),
    "loaded": (0, 0, 0.0),
    "busy": (2, 2, 0.0027510316368638543),
    "saturated": (2, 6, 0.0027510316368638543),
    "cancelled": (0, 0, 0.0),
    "prefix": (0, 0, 0.0),
}
ROUTER_RESIDENCY = {  # /v1/models status.value per model (unloaded = cold)
    "idle": (Residency.COLD, Residency.COLD),
    "loading": (Residency.LOADING, Residency.COLD),
    "loaded": (Residency.LOADED, Residency.COLD),
    "busy": (Residency.LOADED, Residency.COLD),
    "saturated": (Residency.LOADED, Residency.COLD),
    "cancelled": (Residency.LOADED, Residency.COLD),
    "swapped": (Residency.COLD, Residency.LOADED),  # --models-max 1: gemma3 evicted smollm2
    "unloaded": (Residency.COLD, Residency.COLD),
}

RECORDED = [
    *(
        Recorded(
            f"engines/llamacpp/b11312/{state}",
            Kind.LLAMACPP,
            "b11312-0c1e570",
            LLAMACPP_ACTIVE,
            LLAMACPP_DROPPED,
            {SMOL: Residency.UNKNOWN},  # no probe of a single-model llama-server reads residency
            {"": Load(running=running, waiting=waiting, capacity=2)},
        )
        for state, (running, waiting) in LLAMACPP_LOADS.items()
    ),
    *(
        Recorded(
            f"engines/vllm/v0.32.0/{state}",
            Kind.VLLM,
            "0.32.0",
            VLLM_ACTIVE,
            {},
            {SMOL: Residency.UNKNOWN},
            {SMOL: Load(running=running, waiting=waiting, kv_usage=kv)},  # capacity: unknown
        )
        for state, (running, waiting, kv) in VLLM_LOADS.items()
    ),
    *(
        Recorded(
            f"llamacpp-router/b11312/{state}",
            Kind.LLAMACPP,
            "b11312-0c1e570",
            ROUTER_ACTIVE,
            ROUTER_DROPPED,
            {SMOL: smollm2, GEMMA: gemma3},  # one target per model
            ROUTER_LOADS.get(state, {}),  # a cold or loading model: unknown, never 0
        )
        for state, (smollm2, gemma3) in ROUTER_RESIDENCY.items()
    ),
]


def test_recorded_states_are_every_state_on_disk() -> None:
    """A state recorded later must get a row here (its values are read off its files)."""
    on_disk = {
        f"{rel}/{d.name}"
        for rel in ("engines/llamacpp/b11312", "engines/vllm/v0.32.0", "llamacpp-router/b11312")
        for d in (OURS / rel).iterdir()
        if (d / "paths.tsv").is_file()
    }
    assert on_disk == {r.name for r in RECORDED}


@pytest.mark.parametrize("want", RECORDED, ids=[r.name for r in RECORDED])
async def test_recorded_state_detects_and_resolves(want: Recorded) -> None:
    async with serve(recorded(OURS / want.name)) as engine, aiohttp.ClientSession() as session:
        assert await detect(session, engine.base_url, timeout_s=2.0) is want.kind
        plan, snap = await resolve(session, engine.base_url, Kind.AUTO, timeout_s=2.0)
        assert engine.unexpected == []
    assert plan.kind is want.kind
    assert plan.version == snap.version == want.version
    assert tuple(p.name for p in plan.active) == want.active
    assert dict(plan.dropped) == want.dropped
    assert not plan.incomplete  # nothing dropped for a reason that may pass
    assert snap.models is not None
    assert {name: info.state for name, info in snap.models.items()} == want.models
    assert dict(snap.loads) == want.loads


RECORDED_ENGINES = ["engines/llamacpp/b11312", "engines/vllm/v0.32.0", "llamacpp-router/b11312"]


@pytest.mark.parametrize("engine_dir", RECORDED_ENGINES)
async def test_plan_resolved_in_one_state_scrapes_every_other(engine_dir: str) -> None:
    """The plan resolved on the first recorded state reads every later state in full
    rounds, with nothing failed (so no re-resolve), exactly as resolve would read it."""
    states = [r for r in RECORDED if r.name.startswith(engine_dir + "/")]
    async with aiohttp.ClientSession() as session:
        async with serve(recorded(OURS / states[0].name)) as engine:
            plan, _ = await resolve(session, engine.base_url, Kind.AUTO, timeout_s=2.0)
        for want in states[1:]:
            async with serve(recorded(OURS / want.name)) as engine:
                result = await scrape(plan, session, engine.base_url, timeout_s=2.0)
                assert engine.unexpected == []
            assert dict(result.failed) == {}, want.name
            assert not result.needs_resolve, want.name
            snap = result.snapshot
            assert snap.models is not None
            assert {n: i.state for n, i in snap.models.items()} == want.models, want.name
            assert dict(snap.loads) == want.loads, want.name


async def test_fast_round_on_saturated_llamacpp_reads_only_load_signals() -> None:
    async with aiohttp.ClientSession() as session:
        async with serve(recorded(OURS / "engines/llamacpp/b11312/idle")) as engine:
            plan, _ = await resolve(session, engine.base_url, Kind.LLAMACPP, timeout_s=2.0)
        async with serve(recorded(OURS / "engines/llamacpp/b11312/saturated")) as engine:
            result = await scrape(plan, session, engine.base_url, fast_only=True, timeout_s=2.0)
            assert dict(engine.hits) == {"/metrics": 1}  # running + waiting share one GET
    assert dict(result.snapshot.loads) == {"": Load(running=2, waiting=6)}
    assert result.snapshot.models is None and result.snapshot.version is None
