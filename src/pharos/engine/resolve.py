"""Resolve (which probes answer on a backend) and scrape (one round of a plan)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import aiohttp

from pharos.engine.detect import detect_fetched
from pharos.engine.errors import BackendUnreachable
from pharos.engine.fetch import Fetched, all_silent, fetch_all
from pharos.engine.plan import Plan, ScrapeResult
from pharos.engine.recipes import RECIPES
from pharos.engine.router_mode import per_model_path
from pharos.engine.snapshots import assemble, known
from pharos.engine.types import WHOLE_BACKEND, Kind, Load, Probe, ProbeError, Signal, Snapshot


def run_probe(probe: Probe, fetched: Fetched) -> tuple[Snapshot | None, str | None]:
    """A probe's output on one fetched path, or the reason it has none."""
    reason = fetched.reason()
    if reason is not None:
        return None, reason
    try:
        output = probe.parse(fetched.body)
    except ProbeError as err:
        return None, f"parse error: {err}"
    except Exception as err:  # a probe's bug must cost its signal only, not the whole backend
        return None, f"parse error: {type(err).__name__}"
    if not known(output, probe.signal):
        return None, "no value"
    return output, None


def _path(probe: Probe) -> str:
    assert probe.feed.path is not None
    return probe.feed.path


@dataclass(frozen=True, slots=True)
class PerModelRead:
    """A per-model probe over every listed model: what it read, and whether it is broken."""

    output: Snapshot | None  # loads keyed by model; None = no model gave a value
    failure: str | None  # no answer, a 404 or a body it cannot read: the probe itself fails


def read_per_model(
    probe: Probe, models: Sequence[str], fetched: Mapping[str, Fetched]
) -> PerModelRead:
    """Runs a per-model probe on each model's answer; its whole-backend value is the model's.

    An HTTP answer other than 2xx or 404 (400 "model is not loaded", 503 while loading)
    leaves that model's signal unknown and is not a failure.
    """
    loads: dict[str, Load] = {}
    failure: str | None = None
    for model in models:
        got = fetched[per_model_path(_path(probe), model)]
        if got.status is None or got.status == 404:
            failure = failure or got.reason()
            continue
        if not got.ok:
            continue
        output, reason = run_probe(probe, got)
        if output is None:
            if reason != "no value":
                failure = failure or reason
            continue
        load = output.loads.get(WHOLE_BACKEND)
        if load is not None:
            loads[model] = load
    output = Snapshot(loads=MappingProxyType(loads)) if loads else None
    return PerModelRead(output, failure)


def _per_model_paths(probes: Sequence[Probe], models: Sequence[str]) -> list[str]:
    return [per_model_path(_path(p), m) for p in probes if p.feed.per_model for m in models]


def _listed_models(probes: Sequence[Probe], fetched: Mapping[str, Fetched]) -> tuple[str, ...]:
    """The models the first answering residency probe lists: what per-model probes run over."""
    if not any(p.feed.per_model for p in probes):
        return ()
    for probe in probes:
        if probe.signal is Signal.RESIDENCY and not probe.feed.log and not probe.feed.per_model:
            output, _ = run_probe(probe, fetched[_path(probe)])
            if output is not None and output.models is not None:
                return tuple(output.models)
    return ()


def _version_of(probes: Sequence[Probe], fetched: Mapping[str, Fetched]) -> str | None:
    for probe in probes:
        if probe.signal is Signal.VERSION and not probe.feed.log and probe.when is None:
            output, _ = run_probe(probe, fetched[_path(probe)])
            if output is not None:
                return output.version
    return None


async def resolve(
    session: aiohttp.ClientSession,
    base_url: str,
    kind: Kind,
    *,
    own: Sequence[Probe] = (),
    has_log_feed: bool = False,
    timeout_s: float = 3.0,
) -> tuple[Plan, Snapshot]:
    """Runs the whole recipe (plus own probes) once and keeps one probe per signal.

    Kind AUTO detects first. Raises DetectionFailed, or BackendUnreachable when
    no path answered with a 2xx.
    """
    prefetched: Mapping[str, Fetched] = {}
    if kind is Kind.AUTO:
        kind, prefetched = await detect_fetched(session, base_url, timeout_s=timeout_s)
    candidates = (*own, *RECIPES[kind])
    http = [p for p in candidates if not p.feed.log and p.feed.path is not None]
    per_model = [p for p in http if p.feed.per_model]
    http = [p for p in http if not p.feed.per_model]
    fetched = await fetch_all(session, base_url, (_path(p) for p in http), timeout_s, prefetched)
    mine = [fetched[_path(p)] for p in http]
    if not any(f.ok for f in mine):
        reasons = sorted({f.reason() or "" for f in mine})
        raise BackendUnreachable(
            f"{base_url}: no path answered ({'; '.join(reasons)})", silent=all_silent(mine)
        )

    version = _version_of(candidates, fetched)
    listed = _listed_models(candidates, fetched)
    if listed:
        more = _per_model_paths(per_model, listed)
        fetched.update(await fetch_all(session, base_url, more, timeout_s))
    active: list[Probe] = []
    dropped: dict[str, str] = {}
    outputs: list[tuple[Probe, Snapshot]] = []
    read: set[Signal] = set()
    for probe in candidates:
        if probe.feed.log:
            if not has_log_feed:
                dropped[probe.name] = "no log feed"
            elif probe.signal in read:
                dropped[probe.name] = "redundant"
            elif probe.when is not None and not probe.when(version):
                dropped[probe.name] = "version guard"
            else:
                active.append(probe)
            continue
        if probe.signal in read:
            dropped[probe.name] = "redundant"
            continue
        if probe.when is not None and not probe.when(version):
            dropped[probe.name] = "version guard"
            continue
        if probe.feed.per_model:
            if not listed:
                dropped[probe.name] = "no per-model list"
                continue
            got = read_per_model(probe, listed, fetched)
            if got.failure is not None and got.output is None:
                dropped[probe.name] = got.failure
                continue
            read.add(probe.signal)  # also while every model is cold: the router owns the signal
            active.append(probe)
            if got.output is not None:
                outputs.append((probe, got.output))
            continue
        output, reason = run_probe(probe, fetched[_path(probe)])
        if output is None:
            dropped[probe.name] = reason or "no value"
            continue
        read.add(probe.signal)
        active.append(probe)
        outputs.append((probe, output))

    snapshot = assemble(outputs)
    plan = Plan(
        kind=kind,
        version=snapshot.version,
        active=tuple(active),
        dropped=MappingProxyType(dropped),
        per_model=listed if any(p.feed.per_model for p in active) else (),
    )
    return plan, snapshot


def _list_changed(plan: Plan, probe: Probe, output: Snapshot) -> str | None:
    """A residency list that differs from the per-model list: re-resolve to probe the new set."""
    if not plan.per_model or probe.signal is not Signal.RESIDENCY or output.models is None:
        return None
    return None if set(output.models) == set(plan.per_model) else "model list changed"


async def scrape(
    plan: Plan,
    session: aiohttp.ClientSession,
    base_url: str,
    *,
    fast_only: bool = False,
    timeout_s: float = 0.8,
) -> ScrapeResult:
    """One round of the plan's HTTP probes (one GET per path).

    A planned probe that fails leaves its signal unknown this round and is
    reported in `failed`, so the caller re-resolves (its fallback was dropped as
    redundant). Version guards were settled by resolve.
    """
    probes = plan.probes(fast_only=fast_only)
    if not probes:
        return ScrapeResult(Snapshot(), MappingProxyType({}), True, plan.version)
    fetched = await fetch_all(session, base_url, plan.paths(fast_only=fast_only), timeout_s)
    failed: dict[str, str] = {}
    outputs: list[tuple[Probe, Snapshot]] = []
    for probe in probes:
        if probe.feed.per_model:
            got = read_per_model(probe, plan.per_model, fetched)
            if got.failure is not None:
                failed[probe.name] = got.failure
            if got.output is not None:
                outputs.append((probe, got.output))
            continue
        output, reason = run_probe(probe, fetched[_path(probe)])
        if output is None:
            failed[probe.name] = reason or "no value"
        else:
            outputs.append((probe, output))
            changed = _list_changed(plan, probe, output)
            if changed is not None:
                failed[probe.name] = changed
    return ScrapeResult(
        snapshot=assemble(outputs),
        failed=MappingProxyType(failed),
        answered=any(f.ok for f in fetched.values()),
        plan_version=plan.version,
        silent=all_silent(fetched.values()),
    )
