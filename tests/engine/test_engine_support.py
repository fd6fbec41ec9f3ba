"""SUPPORT.md is generated from the expectation tables and must not be stale."""

from __future__ import annotations

import pytest

from pharos.engine.captures import version_dirs
from pharos.engine.support import SUPPORT_MD, cells, generate, load_tables
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
