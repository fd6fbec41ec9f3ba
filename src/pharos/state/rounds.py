"""Folding a round's snapshot into a backend: registration and generation bumps (spec §5).

Snapshots arrive with aliases applied and `at` stamped. Generations are bumped when a model
goes cold (from a scrape or a log line), leaves the backend's list, or the engine version
changes; each bump is reported as a ("generation", reason) decision.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from pharos.engine.types import Snapshot
from pharos.state.derive import accumulate_log
from pharos.state.records import BackendRuntime, Observed, TargetRecord
from pharos.state.registry import TargetRegistry, target_key

Decide = Callable[[str, str, str], None]  # (backend url, stage, outcome)


def records_of(registry: TargetRegistry, backend: BackendRuntime) -> list[TargetRecord]:
    records = (registry.get(target_id) for target_id in backend.target_ids)
    return [record for record in records if record is not None]


def _record_of(registry: TargetRegistry, backend_url: str, model: str) -> TargetRecord | None:
    target_id = registry.id_of(target_key(backend_url, model))
    return None if target_id is None else registry.get(target_id)


def _note_residencies(
    registry: TargetRegistry, url: str, snapshot: Snapshot, at: float, decide: Decide
) -> None:
    for model, info in (snapshot.models or {}).items():
        record = _record_of(registry, url, model)
        if record is not None and registry.note_residency(record, info.state, at):
            decide(url, "generation", "unloaded")


def apply_round(
    registry: TargetRegistry,
    backend: BackendRuntime,
    snapshot: Snapshot,
    at: float,
    *,
    full: bool,
    decide: Decide,
) -> None:
    """A fast round refreshes the load signals only; a full round (or resolve) has the last
    word on the model list, residency, capacity and version."""
    before = backend.observed
    if not full:
        backend.observed = replace(before, fast=snapshot, fast_at=at)
        return
    listed = before.listed if snapshot.models is None else frozenset(snapshot.models)
    version = before.version if snapshot.version is None else snapshot.version
    backend.observed = Observed(
        full=snapshot, full_at=at, fast=snapshot, fast_at=at, listed=listed, version=version
    )
    url = backend.spec.url
    served_of = {client: served for served, client in backend.spec.aliases.items()}
    for model in sorted(listed - before.listed):
        record = registry.register(url, model, served_of.get(model, model))
        if record.target_id not in backend.target_ids:
            backend.target_ids.append(record.target_id)
    for record in records_of(registry, backend):
        if record.model in before.listed and record.model not in listed:
            registry.bump(record)
            record.last_residency = None
            decide(url, "generation", "unlisted")
    if before.version is not None and version is not None and version != before.version:
        for record in records_of(registry, backend):
            registry.bump(record)
        decide(url, "generation", "new_version")
    _note_residencies(registry, url, snapshot, at, decide)


def apply_log_line(
    registry: TargetRegistry,
    backend: BackendRuntime,
    snapshot: Snapshot,
    at: float,
    *,
    decide: Decide,
) -> None:
    """One log line's values join the feed's own snapshot, apart from the scraped view."""
    backend.log_snapshot = accumulate_log(backend.log_snapshot, snapshot)
    _note_residencies(registry, backend.spec.url, snapshot, at, decide)
