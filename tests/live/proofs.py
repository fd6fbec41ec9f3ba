"""Live tests say what they proved; the session writes it to the live results file.

A test calls `prove(engine, release, signal, probe)` after its assertions: a row names the
engine and release, the signal and the recipe probe whose value the test asserted, and the
test. Rows of a test that fails in any phase are dropped at the end of the session, so the
file (tools/live_results.py) gains a row only where a live test passed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from tools import live_results
from tools.live_results import Proof

from pharos.engine import Signal, Snapshot

Prove = Callable[[str, str, Signal, str], None]


@dataclass
class SessionProofs:
    """State of one pytest session: the rows offered, and which tests ran and failed."""

    rows: list[Proof] = field(default_factory=list)
    ran: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)

    def report(self, report: pytest.TestReport) -> None:
        if report.skipped and report.when != "call":
            return
        self.ran.add(report.nodeid)
        if report.failed:
            self.failed.add(report.nodeid)

    def passed(self) -> list[Proof]:
        return [row for row in self.rows if row.test not in self.failed and row.test in self.ran]


def prover(proofs: SessionProofs, test: str) -> Prove:
    def prove(engine: str, release: str, signal: Signal, probe: str) -> None:
        proofs.rows.append(Proof(engine, release, signal.value, probe, test))

    return prove


def source(snapshot: Snapshot, signal: Signal) -> str:
    """The probe that filled a signal in a scraped snapshot (asserted present)."""
    probe = snapshot.sources.get(signal)
    assert probe is not None, f"no probe filled {signal.value}"
    return probe


def finish(proofs: SessionProofs) -> str | None:
    """Writes the results where this run records them; returns the path written."""
    path = live_results.target()
    if path is None:
        return None
    old = live_results.read(path)
    live_results.write(path, live_results.merged(old, proofs.ran, proofs.passed()))
    return str(path)
