"""Combining probe outputs into one Snapshot, merging snapshots, renaming models.

A probe's output holds only its own signal; `known` says whether it holds a
value for it. Per spec §4: a model list present but empty is known; a size or
VRAM list whose entries are all unknown is not (an empty one is); a residency
probe lists the models in memory, so a model the Models signal knows but the
residency list leaves out is COLD.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from types import MappingProxyType

from pharos.engine.types import (
    WHOLE_BACKEND,
    Load,
    ModelInfo,
    Probe,
    Residency,
    Signal,
    Snapshot,
)

_LOAD_FIELD = {
    Signal.RUNNING: "running",
    Signal.WAITING: "waiting",
    Signal.CAPACITY: "capacity",
    Signal.KV_USAGE: "kv_usage",
}
_MODEL_FIELD = {Signal.VRAM_BYTES: "vram_bytes", Signal.SIZE_BYTES: "size_bytes"}


def load_value(snapshot: Snapshot | None, model: str, name: str) -> int | float | None:
    """A load field (`running`, ...) as routing sees it for one model: the model's own value,
    else the whole backend's; None when neither is known."""
    if snapshot is None:
        return None
    for key in (model, WHOLE_BACKEND):
        load = snapshot.loads.get(key)
        if load is not None:
            value: int | float | None = getattr(load, name)
            if value is not None:
                return value
    return None


def known(output: Snapshot, signal: Signal) -> bool:
    """Whether a probe's output holds a known value for `signal`."""
    if signal is Signal.VERSION:
        return output.version is not None
    if signal in (Signal.MODELS, Signal.RESIDENCY):
        return output.models is not None
    if signal in _MODEL_FIELD:
        if output.models is None:
            return False
        attr = _MODEL_FIELD[signal]
        return not output.models or any(
            getattr(info, attr) is not None for info in output.models.values()
        )
    attr = _LOAD_FIELD[signal]
    return any(getattr(load, attr) is not None for load in output.loads.values())


def assemble(
    outputs: Iterable[tuple[Probe, Snapshot]], *, residency_lists: bool = True
) -> Snapshot:
    """One snapshot from probe outputs in plan order: per signal, the first known value wins.

    `residency_lists` is True for HTTP rounds (a residency probe lists what is in
    memory); log lines name one model each, so there a missing model stays as it was.
    """
    winners: dict[Signal, tuple[Probe, Snapshot]] = {}
    for probe, output in outputs:
        if probe.signal not in winners and known(output, probe.signal):
            winners[probe.signal] = (probe, output)

    version = winners[Signal.VERSION][1].version if Signal.VERSION in winners else None

    models: dict[str, ModelInfo] | None = None
    if Signal.MODELS in winners:
        listed = winners[Signal.MODELS][1].models or {}
        models = {name: ModelInfo() for name in listed}
    elif not residency_lists and any(s in winners for s in (Signal.RESIDENCY, *_MODEL_FIELD)):
        models = {}
    if models is not None:
        if Signal.RESIDENCY in winners:
            in_memory = winners[Signal.RESIDENCY][1].models or {}
            if residency_lists:
                for name in models:
                    state = in_memory[name].state if name in in_memory else Residency.COLD
                    models[name] = replace(models[name], state=state)
            else:
                for name, info in in_memory.items():
                    models[name] = replace(models.get(name, ModelInfo()), state=info.state)
        for signal, attr in _MODEL_FIELD.items():
            if signal not in winners:
                continue
            for name, info in (winners[signal][1].models or {}).items():
                if name in models or not residency_lists:
                    base = models.get(name, ModelInfo())
                    models[name] = replace(base, **{attr: getattr(info, attr)})

    loads: dict[str, Load] = {}
    for signal, attr in _LOAD_FIELD.items():
        if signal not in winners:
            continue
        for key, load in winners[signal][1].loads.items():
            value = getattr(load, attr)
            if value is not None:
                loads[key] = replace(loads.get(key, Load()), **{attr: value})

    return Snapshot(
        version=version,
        models=None if models is None else MappingProxyType(models),
        loads=MappingProxyType(loads),
        sources=MappingProxyType({signal: probe.name for signal, (probe, _) in winners.items()}),
    )


def _merge_info(primary: ModelInfo | None, fallback: ModelInfo | None) -> ModelInfo:
    p = primary or ModelInfo()
    f = fallback or ModelInfo()
    return ModelInfo(
        state=p.state if p.state is not Residency.UNKNOWN else f.state,
        vram_bytes=p.vram_bytes if p.vram_bytes is not None else f.vram_bytes,
        size_bytes=p.size_bytes if p.size_bytes is not None else f.size_bytes,
    )


def _merge_load(p: Load, f: Load) -> Load:
    return Load(
        running=p.running if p.running is not None else f.running,
        waiting=p.waiting if p.waiting is not None else f.waiting,
        capacity=p.capacity if p.capacity is not None else f.capacity,
        kv_usage=p.kv_usage if p.kv_usage is not None else f.kv_usage,
    )


def merge_snapshots(primary: Snapshot, fallback: Snapshot) -> Snapshot:
    """Primary wins per signal (and per model); fallback fills what primary doesn't know.

    The model set is primary's list when it knows one: a fallback (e.g. log)
    value for a model the primary list leaves out is dropped.
    """
    if primary.models is not None:
        fb = fallback.models or {}
        models: Mapping[str, ModelInfo] | None = {
            name: _merge_info(info, fb.get(name)) for name, info in primary.models.items()
        }
    else:
        models = None if fallback.models is None else dict(fallback.models)
    keys = list(primary.loads) + [k for k in fallback.loads if k not in primary.loads]
    loads = {
        key: _merge_load(primary.loads.get(key, Load()), fallback.loads.get(key, Load()))
        for key in keys
    }
    return Snapshot(
        version=primary.version if primary.version is not None else fallback.version,
        models=None if models is None else MappingProxyType(dict(models)),
        loads=MappingProxyType(loads),
        sources=MappingProxyType({**fallback.sources, **primary.sources}),
        at=primary.at if primary.at is not None else fallback.at,
    )


def apply_aliases(snapshot: Snapshot, aliases: Mapping[str, str]) -> Snapshot:
    """Renames engine model names to the names clients use (models and per-model loads).

    Config rejects two engine names with one client name; were it to happen, the
    later entry in the engine's order wins.
    """
    if not aliases:
        return snapshot
    models = (
        None
        if snapshot.models is None
        else MappingProxyType({aliases.get(n, n): i for n, i in snapshot.models.items()})
    )
    loads = MappingProxyType(
        {(aliases.get(k, k) if k else k): v for k, v in snapshot.loads.items()}
    )
    return replace(snapshot, models=models, loads=loads)
