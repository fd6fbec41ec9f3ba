"""Every benchmark still runs (issue 13: benchmarks report, never assert; CI keeps them from
rotting). Each runs with PHAROS_BENCH_SMOKE=1 (tiny counts) and must print its lines; the
numbers are not checked."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
LINE = re.compile(r"^(bench|mem|info) [a-z0-9-]+( [a-z0-9_]+=[^ ]+)+$")

# file, the line names it must print
EXPECTED = [
    ("bench_policy.py", ["pick-cost-64", "pick-least-load-64"]),
    ("bench_sched.py", ["acquire-release-64"]),
    ("bench_prefix.py", ["prefix-chain-50", "prefix-lookup-50", "prefix-record-50", "prefix-200k"]),
    ("bench_memory.py", ["pharos-full", "pharos-full-after-save", "pharos-restored"]),
    ("bench_proxy.py", ["overhead-32k", "ttft-direct-32k", "ttft-pharos-32k", "loop-lag"]),
    ("bench_peer.py", ["peer-push"]),
    ("compare.py", ["compare-bare", "compare-pharos", "compare-pharos-vs-bare"]),
]


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("script", "names"), EXPECTED)
def test_each_benchmark_prints_its_lines_in_smoke_mode(script: str, names: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script)],
        env={**os.environ, "PHAROS_BENCH_SMOKE": "1"},
        capture_output=True,
        text=True,
        timeout=220,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stdout.splitlines() if line]
    assert all(LINE.match(line) for line in lines), lines
    printed = {line.split()[1] for line in lines}
    assert set(names) <= printed, (names, lines)


def test_every_benchmark_file_is_smoke_tested() -> None:
    scripts = {p.name for p in BENCHMARKS.glob("bench_*.py")} | {"compare.py"}
    assert scripts == {s for s, _ in EXPECTED}
