"""SUPPORT.md is generated from the expectation tables and the live results, never stale."""

from __future__ import annotations

from pathlib import Path

import pytest
from tools import live_results
from tools.captures import version_dirs
from tools.live_results import Proof
from tools.support import SUPPORT_MD, cells, generate, load_tables, render

from pharos.engine.types import Signal

DIRS = version_dirs()
needs_captures = pytest.mark.skipif(not DIRS, reason="no captures found (set PHAROS_CAPTURES)")


@needs_captures
def test_support_md_is_fresh() -> None:
    assert SUPPORT_MD.is_file(), "run: make support"
    assert SUPPORT_MD.read_text(encoding="utf-8") == generate(), (
        "SUPPORT.md is stale: run `make support` (python -m tools.support)"
    )


@needs_captures
def test_cells_follow_guards_fixtures_and_live_results() -> None:
    table, _ = load_tables()
    live = {
        ("llamacpp", "b8772", "running"): "llamacpp-running",
        ("llamacpp", "b11312", "waiting"): "llamacpp-waiting",
    }
    rows = cells(table, live, DIRS)
    assert rows[("llamacpp", "b6602")][Signal.WAITING] == "unknown"  # guarded before b8772
    assert rows[("llamacpp", "b8772")][Signal.WAITING] == "`llamacpp-waiting` (fixture)"
    assert rows[("llamacpp", "b8772")][Signal.RUNNING] == "`llamacpp-running` (live)"
    assert rows[("llamacpp", "b11312")][Signal.WAITING] == "`llamacpp-waiting` (live)"
    assert rows[("llama-swap", "v185")][Signal.VERSION] == "`llamaswap-version` (fixture)"
    assert rows[("ollama", "v0.34.4")][Signal.CAPACITY] == "`ollama-log-num-parallel` (fixture)"
    assert rows[("vllm", "v0.30.0")][Signal.CAPACITY] == "unknown"
    # our own recordings, credited as fixtures when no live result names them
    assert rows[("llamacpp", "b11312")][Signal.CAPACITY] == "`llamacpp-props-capacity` (fixture)"
    assert rows[("vllm", "v0.32.0")][Signal.KV_USAGE] == "`vllm-kv-cache-usage-perc` (fixture)"
    assert rows[("vllm", "v0.32.0")][Signal.CAPACITY] == "unknown"  # vLLM reports none


def _results(path: Path, *rows: tuple[str, str, str, str]) -> Path:
    live_results.write(
        path, [Proof(*row, test=f"tests/live/t.py::t{i}") for i, row in enumerate(rows)]
    )
    return path


@needs_captures
def test_a_live_mark_exists_only_where_the_results_file_has_a_row(tmp_path: Path) -> None:
    results = _results(
        tmp_path / "live-results.tsv",
        ("vllm", "v0.32.0", "running", "vllm-running"),
        ("openai", "v0.3.36", "models", "openai-models"),  # a live-only release: no capture
    )
    table, live = load_tables(results)
    rows = cells(table, live, DIRS)
    assert rows[("vllm", "v0.32.0")][Signal.RUNNING] == "`vllm-running` (live)"
    assert rows[("vllm", "v0.32.0")][Signal.WAITING] == "`vllm-waiting` (fixture)"
    assert rows[("openai", "v0.3.36")][Signal.MODELS] == "`openai-models` (live)"
    assert rows[("openai", "v0.3.36")][Signal.RUNNING] == "unknown"
    empty_table, nothing = load_tables(tmp_path / "missing.tsv")
    assert nothing == {}
    table_rows = [
        line for line in render(empty_table, nothing, DIRS).splitlines() if line.startswith("| ")
    ]
    assert table_rows and not any("(live)" in line for line in table_rows)


@needs_captures
def test_a_live_result_must_credit_a_probe_of_the_recipe(tmp_path: Path) -> None:
    results = _results(tmp_path / "r.tsv", ("vllm", "v0.32.0", "running", "llamacpp-running"))
    table, live = load_tables(results)
    with pytest.raises(ValueError, match="not in the recipe"):
        cells(table, live, DIRS)


def test_two_probes_credited_for_one_cell_is_an_error(tmp_path: Path) -> None:
    results = _results(
        tmp_path / "r.tsv",
        ("llamacpp", "b11312", "running", "llamacpp-running"),
        ("llamacpp", "b11312", "running", "llamacpp-slots-running"),
    )
    with pytest.raises(ValueError, match="both"):
        live_results.by_cell(live_results.read(results))


def test_a_malformed_results_line_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "r.tsv"
    path.write_text(f"{live_results.HEADER}\nvllm\tv0.32.0\trunning\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"r\.tsv:2: want 5"):
        live_results.read(path)


def test_a_run_replaces_the_rows_of_the_tests_it_ran_and_keeps_the_others() -> None:
    kept = Proof("vllm", "v0.32.0", "running", "vllm-running", "tests/live/a.py::other")
    stale = Proof("llamacpp", "b11312", "waiting", "llamacpp-waiting", "tests/live/a.py::ran")
    fresh = Proof("llamacpp", "b11312", "running", "llamacpp-running", "tests/live/a.py::ran")
    # the test that ran this time proved running but no longer waiting: its old row goes
    assert live_results.merged([kept, stale], ["tests/live/a.py::ran"], [fresh]) == sorted(
        [kept, fresh]
    )


@needs_captures
def test_rendered_table_explains_columns_and_shows_reported_versions() -> None:
    table, live = load_tables()
    text = render(table, live, DIRS)
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
