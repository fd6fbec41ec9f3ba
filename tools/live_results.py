"""What live tests proved: the file SUPPORT.md's "(live)" cells come from.

One row per (engine, release, signal, probe, test): a live test (tests/live/, marker
`live`) adds a row only after its assertions on a real engine passed, naming the probe
whose value it asserted. `PHAROS_RECORD=1` live runs rewrite the committed file
(tests/captures/live-results.tsv, beside the captures the same run records): rows of the
tests that ran are replaced by what they proved this time, rows of tests that did not run
are kept, so a partial run never erases another engine's proof and a test that failed
drops its own. `PHAROS_LIVE_RESULTS=PATH` writes elsewhere (`make live-latest`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from tools.captures import OUR_CAPTURES

RESULTS_FILE = OUR_CAPTURES / "live-results.tsv"
HEADER = "engine\trelease\tsignal\tprobe\ttest"


@dataclass(frozen=True, order=True)
class Proof:
    engine: str  # the capture directory name: llamacpp, llamacpp-router, vllm, openai, ...
    release: str  # the version directory name: b11312, v0.32.0, ...
    signal: str  # a Signal value
    probe: str  # the recipe probe whose value the test asserted
    test: str  # the pytest node id that asserted it


def read(path: Path = RESULTS_FILE) -> list[Proof]:
    """The rows of a results file; a missing file proves nothing."""
    if not path.is_file():
        return []
    proofs: list[Proof] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line == HEADER or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 5 or not all(fields):
            raise ValueError(f"{path}:{number}: want 5 tab-separated fields, got {len(fields)}")
        proofs.append(Proof(*fields))
    return proofs


def merged(old: Iterable[Proof], ran: Iterable[str], new: Iterable[Proof]) -> list[Proof]:
    """Old rows of tests that did not run this time, plus this run's rows."""
    ran_now = set(ran)
    return sorted({p for p in old if p.test not in ran_now} | set(new))


def write(path: Path, proofs: Iterable[Proof]) -> None:
    lines = [HEADER, *("\t".join(_fields(p)) for p in sorted(set(proofs)))]
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(path)


def _fields(proof: Proof) -> tuple[str, str, str, str, str]:
    return (proof.engine, proof.release, proof.signal, proof.probe, proof.test)


def by_cell(proofs: Iterable[Proof]) -> Mapping[tuple[str, str, str], str]:
    """(engine, release, signal) -> the probe credited; two probes for one cell is an error."""
    cells: dict[tuple[str, str, str], str] = {}
    for proof in proofs:
        key = (proof.engine, proof.release, proof.signal)
        if cells.setdefault(key, proof.probe) != proof.probe:
            raise ValueError(f"live results credit {key} to both {cells[key]} and {proof.probe}")
    return cells


def target(environ: Mapping[str, str] = os.environ) -> Path | None:
    """Where this live run writes its results, or None (not recorded)."""
    configured = environ.get("PHAROS_LIVE_RESULTS")
    if configured:
        return Path(configured)
    return RESULTS_FILE if environ.get("PHAROS_RECORD") == "1" else None
