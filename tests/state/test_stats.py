"""EWMA speed estimates, restore and export."""

from __future__ import annotations

import math

import pytest

from pharos.engine.types import Residency
from pharos.state import StatRecord
from pharos.state.stats import TargetStats, ewma
from tests.state.fakes import URL, make_state, snap, spec


def test_ewma_first_sample_then_alpha() -> None:
    assert ewma(None, 2.0) == 2.0
    assert ewma(2.0, 1.0) == pytest.approx(0.3 * 1.0 + 0.7 * 2.0)


def test_stats_unknown_without_samples_and_per_stat() -> None:
    stats = TargetStats()
    assert stats.prefill_s_per_token is None
    stats = stats.observed(load_s=3.0).observed(load_s=1.0, service_s=0.0)
    assert stats.load_s == pytest.approx(0.3 + 2.1)
    assert stats.service_s == 0.0  # a zero sample is a known zero
    assert stats.prefill_s_per_token is None


async def _state_with_target():
    h = make_state()
    h.engine.snapshots[URL] = snap(models={"m": Residency.LOADED})
    h.state.set_backends([spec()])
    await h.state.run_round(URL)
    return h, h.state.target_id_of(f"{URL} m")


async def test_observe_updates_view_and_ignores_bad_samples() -> None:
    h, target_id = await _state_with_target()
    h.state.observe(target_id, prefill_s_per_token=0.002)
    h.state.observe(target_id, prefill_s_per_token=0.001, load_s=-1.0, service_s=math.nan)
    view = h.state.target(target_id, h.clock.now())
    assert view is not None
    assert view.prefill_s_per_token == pytest.approx(0.3 * 0.001 + 0.7 * 0.002)
    assert view.load_s is None
    assert view.service_s is None
    h.state.observe(12345, load_s=1.0)  # an unknown target is ignored


async def test_restored_stats_only_fill_stats_without_local_samples() -> None:
    h, target_id = await _state_with_target()
    key = f"{URL} m"
    h.state.restore_stats(
        [
            StatRecord(key=key, prefill_s_per_token=0.01, load_s=5.0, service_s=None),
            StatRecord(key="http://elsewhere:1 x", load_s=9.0),
        ]
    )
    h.state.observe(target_id, load_s=2.0)
    view = h.state.target(target_id, h.clock.now())
    assert view is not None
    assert view.load_s == 2.0  # local wins (the first local sample is the estimate)
    assert view.prefill_s_per_token == 0.01
    assert view.service_s is None
    exported = {record.key: record for record in h.state.export_stats()}
    assert exported[key] == StatRecord(key=key, prefill_s_per_token=0.01, load_s=2.0)
    assert exported["http://elsewhere:1 x"].load_s == 9.0  # passed on for peers


async def test_export_leaves_out_targets_that_know_nothing() -> None:
    h, _ = await _state_with_target()
    assert h.state.export_stats() == []
