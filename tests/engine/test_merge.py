"""Merge rules: first known value wins, model lists, residency lists, aliases, log lines."""

from __future__ import annotations

from types import MappingProxyType

from pharos.engine import (
    Kind,
    Load,
    ModelInfo,
    Plan,
    Residency,
    Signal,
    Snapshot,
    apply_aliases,
    follow_line,
    log_line,
    merge_snapshots,
    prom,
)
from pharos.engine.library import (
    llamacpp_props_capacity,
    ollama_log_num_parallel,
    ollama_ps_residency,
    openai_models,
)
from pharos.engine.snapshots import assemble


def models(*names: str) -> Snapshot:
    return Snapshot(models=MappingProxyType({n: ModelInfo() for n in names}))


def resident(**states: Residency) -> Snapshot:
    return Snapshot(models=MappingProxyType({n: ModelInfo(state=s) for n, s in states.items()}))


def whole(**fields: int) -> Snapshot:
    return Snapshot(loads=MappingProxyType({"": Load(**fields)}))


RUN_A = prom("run-a", "/a", Signal.RUNNING, "a")
RUN_B = prom("run-b", "/b", Signal.RUNNING, "b")


def test_first_known_value_in_plan_order_wins() -> None:
    snap = assemble([(RUN_A, Snapshot()), (RUN_B, whole(running=4)), (RUN_A, whole(running=1))])
    assert snap.loads[""].running == 4
    assert snap.sources[Signal.RUNNING] == "run-b"


def test_zero_is_a_known_value_that_wins() -> None:
    snap = assemble([(RUN_A, whole(running=0)), (RUN_B, whole(running=4))])
    assert snap.loads[""].running == 0
    assert snap.sources[Signal.RUNNING] == "run-a"


def test_unknown_signals_stay_unknown() -> None:
    snap = assemble([(openai_models, models("a"))])
    assert snap.version is None
    assert snap.loads == {}
    assert snap.models is not None and snap.models["a"] == ModelInfo()
    assert Signal.RUNNING not in snap.sources


def test_empty_model_list_is_known() -> None:
    snap = assemble([(openai_models, models())])
    assert snap.models == {}
    assert snap.sources[Signal.MODELS] == "openai-models"


def test_no_model_probe_means_models_unknown() -> None:
    assert assemble([(llamacpp_props_capacity, whole(capacity=2))]).models is None


def test_model_absent_from_residency_list_is_cold() -> None:
    snap = assemble(
        [
            (openai_models, models("a", "b", "c")),
            (ollama_ps_residency, resident(a=Residency.LOADED, c=Residency.UNKNOWN)),
        ]
    )
    assert snap.models is not None
    assert snap.models["a"].state is Residency.LOADED
    assert snap.models["b"].state is Residency.COLD
    assert snap.models["c"].state is Residency.UNKNOWN  # listed in a state no capture showed


def test_empty_residency_list_means_all_cold() -> None:
    snap = assemble([(openai_models, models("a", "b")), (ollama_ps_residency, resident())])
    assert snap.models is not None
    assert {m.state for m in snap.models.values()} == {Residency.COLD}


def test_no_residency_probe_leaves_residency_unknown() -> None:
    # vLLM/SGLang: one model from /v1/models, no residency probe
    snap = assemble([(openai_models, models("qwen"))])
    assert snap.models is not None and snap.models["qwen"].state is Residency.UNKNOWN


def test_merge_snapshots_primary_wins_per_signal() -> None:
    primary = Snapshot(
        version="1",
        models=MappingProxyType({"a": ModelInfo(state=Residency.LOADED)}),
        loads=MappingProxyType({"": Load(running=0)}),
        sources=MappingProxyType({Signal.RUNNING: "p"}),
    )
    fallback = Snapshot(
        version="2",
        models=MappingProxyType(
            {"a": ModelInfo(state=Residency.COLD, size_bytes=9), "zz": ModelInfo()}
        ),
        loads=MappingProxyType({"": Load(running=5, capacity=2), "a": Load(waiting=1)}),
        sources=MappingProxyType({Signal.RUNNING: "f", Signal.CAPACITY: "f-cap"}),
        at=3.0,
    )
    merged = merge_snapshots(primary, fallback)
    assert merged.version == "1"
    assert merged.models is not None and set(merged.models) == {"a"}
    assert merged.models["a"] == ModelInfo(state=Residency.LOADED, size_bytes=9)
    assert merged.loads[""] == Load(running=0, capacity=2)
    assert merged.loads["a"].waiting == 1
    assert merged.sources == {Signal.RUNNING: "p", Signal.CAPACITY: "f-cap"}
    assert merged.at == 3.0


def test_merge_with_unknown_primary_models_takes_fallback() -> None:
    merged = merge_snapshots(Snapshot(), models("x"))
    assert merged.models is not None and set(merged.models) == {"x"}
    assert merge_snapshots(Snapshot(), Snapshot()).models is None


def test_apply_aliases_renames_models_and_loads() -> None:
    snap = Snapshot(
        models=MappingProxyType(
            {"qwen2.5:0.5b": ModelInfo(state=Residency.LOADED), "b": ModelInfo()}
        ),
        loads=MappingProxyType({"qwen2.5:0.5b": Load(running=1), "": Load(capacity=2)}),
    )
    renamed = apply_aliases(snap, {"qwen2.5:0.5b": "qwen-small"})
    assert renamed.models is not None and set(renamed.models) == {"qwen-small", "b"}
    assert renamed.models["qwen-small"].state is Residency.LOADED
    assert set(renamed.loads) == {"qwen-small", ""}
    assert apply_aliases(snap, {}) is snap
    assert apply_aliases(Snapshot(), {"a": "b"}).models is None


def test_follow_line_runs_only_log_probes_and_keeps_the_lines_signals() -> None:
    unload = log_line(
        "swap-unload", Signal.RESIDENCY, r"<(?P<model>[^>]+)> Unloading", value="cold"
    )
    plan = Plan(Kind.OLLAMA, None, (openai_models, ollama_log_num_parallel, unload), {})
    assert follow_line(plan, b"nothing to see") is None
    out = follow_line(plan, b'msg="server config" env="map[OLLAMA_NUM_PARALLEL:3]"')
    assert out is not None
    assert out.loads[""].capacity == 3
    assert out.models is None
    assert out.sources == {Signal.CAPACITY: "ollama-log-num-parallel"}
    cold = follow_line(plan, b"[INFO] <m1> Unloading model, TTL of 15s reached")
    assert cold is not None and cold.models is not None
    assert dict(cold.models) == {"m1": ModelInfo(state=Residency.COLD)}
