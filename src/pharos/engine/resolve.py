"""Resolve (which probes answer on a backend) and scrape (one round of a plan)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

import aiohttp

from pharos.engine.detect import detect_fetched
from pharos.engine.errors import BackendUnreachable
from pharos.engine.fetch import Fetched, fetch_all
from pharos.engine.plan import Plan, ScrapeResult
from pharos.engine.recipes import RECIPES
from pharos.engine.snapshots import assemble, known
from pharos.engine.types import Kind, Probe, ProbeError, Signal, Snapshot


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
    fetched = await fetch_all(session, base_url, (_path(p) for p in http), timeout_s, prefetched)
    mine = [fetched[_path(p)] for p in http]
    if not any(f.ok for f in mine):
        reasons = sorted({f.reason() or "" for f in mine})
        raise BackendUnreachable(f"{base_url}: no path answered ({'; '.join(reasons)})")

    version = _version_of(candidates, fetched)
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
    )
    return plan, snapshot


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
        output, reason = run_probe(probe, fetched[_path(probe)])
        if output is None:
            failed[probe.name] = reason or "no value"
        else:
            outputs.append((probe, output))
    return ScrapeResult(
        snapshot=assemble(outputs),
        failed=MappingProxyType(failed),
        answered=any(f.ok for f in fetched.values()),
        plan_version=plan.version,
    )
