"""SUPPORT.md is generated from the expectation tables and must not be stale."""

from __future__ import annotations

import pytest

from pharos.engine.captures import version_dirs
from pharos.engine.support import SUPPORT_MD, cells, generate, load_tables, render
from pharos.engine.types import Signal


@pytest.mark.skipif(not version_dirs(), reason="no captures found (set PHAROS_CAPTURES)")
def test_support_md_is_fresh() -> None:
    assert SUPPORT_MD.is_file(), "run: python -m pharos.engine.support"
    assert SUPPORT_MD.read_text(encoding="utf-8") == generate(), (
        "SUPPORT.md is stale: run `python -m pharos.engine.support`"
    )


def test_cells_follow_guards_fixtures_and_live_proofs() -> None:
    table, _ = load_tables()
    dirs = version_dirs()
    if not dirs:
        pytest.skip("no captures")
    live = {
        ("llamacpp", "b8772", "running"): "live",
        ("llamacpp", "b11312", "waiting"): "llamacpp-waiting",
    }
    rows = cells(table, live, dirs)
    assert rows[("llamacpp", "b6602")][Signal.WAITING] == "unknown"  # guarded before b8772
    assert rows[("llamacpp", "b8772")][Signal.WAITING] == "`llamacpp-waiting` (fixture)"
    assert rows[("llamacpp", "b8772")][Signal.RUNNING] == "`llamacpp-running` (live)"
    assert rows[("llamacpp", "b11312")][Signal.WAITING] == "`llamacpp-waiting` (live)"
    assert rows[("llama-swap", "v185")][Signal.VERSION] == "`llamaswap-version` (fixture)"
    assert rows[("ollama", "v0.34.4")][Signal.CAPACITY] == "`ollama-log-num-parallel` (fixture)"
    assert rows[("vllm", "v0.30.0")][Signal.CAPACITY] == "unknown"
    # our own recordings: live proofs, with the probe each one credits
    assert rows[("llamacpp", "b11312")][Signal.CAPACITY] == "`llamacpp-props-capacity` (fixture)"
    assert rows[("vllm", "v0.32.0")][Signal.KV_USAGE] == "`vllm-kv-cache-usage-perc` (fixture)"
    assert rows[("vllm", "v0.32.0")][Signal.CAPACITY] == "unknown"  # vLLM reports none
    router = rows[("llamacpp-router", "b11312")]
    assert router[Signal.RESIDENCY] == "`llamacpp-router-residency` (fixture)"
    # the router's own /props has no total_slots and its bare /metrics, /slots answer 400
    assert [router[s] for s in (Signal.CAPACITY, Signal.RUNNING, Signal.WAITING)] == ["unknown"] * 3


def test_every_generated_cell_names_a_probe_or_says_unknown() -> None:
    table, live = load_tables()
    dirs = version_dirs()
    if not dirs:
        pytest.skip("no captures")
    rows = cells(table, live, dirs)
    for key in live:
        engine, version, signal = key
        assert rows[(engine, version)][Signal(signal)].endswith("` (live)"), key
    for row in rows.values():
        for cell in row.values():
            assert cell == "unknown" or cell.startswith("`"), cell


def test_a_live_proof_must_credit_a_probe_of_the_recipe() -> None:
    table, _ = load_tables()
    dirs = [vd for vd in version_dirs() if vd.engine == "vllm"]
    if not dirs:
        pytest.skip("no captures")
    # no capture names a vLLM capacity probe, so a bare "live" cannot say which probe read it
    with pytest.raises(ValueError, match="names no probe"):
        cells(table, {("vllm", "v0.32.0", "capacity"): "live"}, dirs)
    with pytest.raises(ValueError, match="not in the recipe"):
        cells(table, {("vllm", "v0.32.0", "running"): "llamacpp-running"}, dirs)


def test_rendered_table_explains_columns_and_shows_reported_versions() -> None:
    table, live = load_tables()
    dirs = version_dirs()
    if not dirs:
        pytest.skip("no captures")
    text = render(table, live, dirs)
    for signal in Signal:
        assert f"- **{signal.value}**:" in text
    assert "| llamacpp | v0.5.0 | `b11146-7fe450e19` |" in text
    assert "| vllm | v0.32.0 | `0.32.0` |" in text
    header = next(line for line in text.splitlines() if line.startswith("| engine |"))
    columns = header.count("|") - 1
    for line in text.splitlines():
        if line.startswith("| ") and not line.startswith("| engine"):
            cells_of_line = [c.strip() for c in line.strip("|").split("|")]
            assert len(cells_of_line) == columns and all(cells_of_line), line
