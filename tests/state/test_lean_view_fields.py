"""derive.target_view builds TargetView positionally (2.4 against 4.5 µs by keyword, issue 13):
every field must still land where its name says."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

from pharos.engine.types import Kind, Load, ModelInfo, Residency, Snapshot
from pharos.state.derive import target_view
from pharos.state.records import BackendRuntime, Observed, TargetRecord
from pharos.state.spec import BackendSpec, StateOptions
from pharos.state.stats import TargetStats
from pharos.state.view import TargetView
from pharos.state.views import ViewCache

URL = "http://gpu:8000"


def _backend(residency: Residency) -> BackendRuntime:
    full = Snapshot(
        version="1",
        models=MappingProxyType({"m": ModelInfo(state=residency, vram_bytes=6, size_bytes=5)}),
        loads=MappingProxyType({"m": Load(capacity=3)}),
    )
    fast = Snapshot(
        version="1", loads=MappingProxyType({"m": Load(running=1, waiting=2, kv_usage=0.4)})
    )
    return BackendRuntime(
        spec=BackendSpec(URL, kind=Kind.VLLM, memory_bytes=8, capacity=7),
        observed=Observed(
            full=full, full_at=99.0, fast=fast, fast_at=100.0, listed=frozenset({"m"})
        ),
    )


def _record(stats: TargetStats | None = None) -> TargetRecord:
    record = TargetRecord(
        target_id=4,
        key=f"{URL} m",
        backend_url=URL,
        model="m",
        served_model="served-m",
        generation=9,
    )
    if stats is not None:
        record.stats = stats
    return record


def test_every_view_field_holds_its_own_distinct_value() -> None:
    # Each signal gets a value no other field has, so a swapped pair of arguments shows.
    backend = _backend(Residency.LOADED)
    record = _record(TargetStats(prefill_s_per_token=0.01, load_s=11.0, service_s=12.0))
    expected = TargetView(
        target_id=4,
        key=f"{URL} m",
        backend_url=URL,
        model="m",
        served_model="served-m",
        kind=Kind.VLLM,
        up=True,
        draining=False,
        residency=Residency.LOADED,
        running=1,
        waiting=2,
        capacity=3,
        kv_usage=0.4,
        size_bytes=5,
        vram_bytes=6,
        config_capacity=7,
        memory_bytes=8,
        generation=9,
        prefill_s_per_token=0.01,
        load_s=11.0,
        service_s=12.0,
        last_fast_scrape_at=100.0,
    )
    values = [getattr(expected, f.name) for f in dataclasses.fields(TargetView)]
    distinct = [v for v in values if v not in (True, False, None) and not isinstance(v, Kind)]
    assert len(set(map(repr, distinct))) == len(distinct)
    got = target_view(record, backend, StateOptions(), 101.0, None)
    assert got == expected


def test_a_view_after_a_reply_holds_every_field_where_its_name_says() -> None:
    """ViewCache patches a view after a reply's writes (stats, reply time) positionally too."""
    backend = _backend(Residency.COLD)
    record = _record()
    restored = TargetStats(prefill_s_per_token=0.02, load_s=13.0, service_s=14.0)
    cache = ViewCache(StateOptions())
    before = cache.view(record, backend, restored, 100.5)
    assert before.residency is Residency.COLD
    record.stats = TargetStats(prefill_s_per_token=0.01, load_s=11.0, service_s=12.0)
    record.reply_loaded_at = 100.6
    after = cache.view(record, backend, restored, 101.0)
    assert after == target_view(record, backend, StateOptions(), 101.0, restored)
    assert (after.residency, after.prefill_s_per_token, after.load_s, after.service_s) == (
        Residency.LOADED,
        0.01,
        11.0,
        12.0,
    )
