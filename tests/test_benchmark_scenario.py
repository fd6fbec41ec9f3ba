"""benchmarks/scenario (issue 15's real-engine scenario) still runs: on its in-process `fake`
fleet, so no engines are needed; the numbers are not checked (benchmarks report, never
assert)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _scenario(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.scenario", *args],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=100,
    )


@pytest.mark.timeout(120)
def test_the_real_engine_scenario_serves_turns_through_pharos_and_direct_on_fakes() -> None:
    """benchmarks/scenario (issue 15) on its in-process `fake` fleet: each policy prints a row
    with turns served, and through Pharos every turn's engine is known (per-engine counts add
    up to the turns). The timings are not checked."""
    done = _scenario("--fleet", "fake", "--duration", "6", "--users", "2",
                     "--policies", "pharos-cost,sticky")  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line.strip("| ").split(" | ") for line in done.stdout.splitlines()]
    rows = [r for r in rows if r[0] in ("pharos-cost", "sticky")]
    assert [r[0] for r in rows] == ["pharos-cost", "sticky"], done.stdout
    for row in rows:
        turns = int(row[4].split()[0])
        assert turns > 0, row
        assert sum(int(n) for n in row[5].split("/")) == turns, row


def test_the_scenario_without_engines_says_which_script_installs_them() -> None:
    done = _scenario("--fleet", "equal", env={"PHAROS_ENGINE_CACHE": "/nonexistent/engines"})
    assert done.returncode == 2
    assert "install-all.sh" in done.stderr and "Traceback" not in done.stderr, done.stderr
