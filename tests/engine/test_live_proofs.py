"""tests/live/proofs.py: a live test's proof reaches the results file only if it passed."""

from __future__ import annotations

from pathlib import Path

import pytest
from tools import live_results

from pharos.engine import Signal
from tests.live.proofs import SessionProofs, finish, prover


def _report(nodeid: str, when: str, outcome: str) -> pytest.TestReport:
    return pytest.TestReport(nodeid, ("x", 0, "x"), {}, outcome, None, when)  # type: ignore[arg-type]


def test_rows_of_a_failed_test_are_dropped_and_skipped_tests_keep_their_old_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = tmp_path / "live-results.tsv"
    kept = live_results.Proof("vllm", "v0.32.0", "running", "vllm-running", "t::skipped")
    gone = live_results.Proof("llamacpp", "b11312", "waiting", "llamacpp-waiting", "t::failed")
    live_results.write(results, [kept, gone])
    proofs = SessionProofs()
    prover(proofs, "t::passed")("llamacpp", "b11312", Signal.RUNNING, "llamacpp-running")
    prover(proofs, "t::failed")("llamacpp", "b11312", Signal.WAITING, "llamacpp-waiting")
    for nodeid, when, outcome in [
        ("t::passed", "setup", "passed"),
        ("t::passed", "call", "passed"),
        ("t::passed", "teardown", "passed"),
        ("t::failed", "setup", "passed"),
        ("t::failed", "call", "failed"),
        ("t::skipped", "setup", "skipped"),
    ]:
        proofs.report(_report(nodeid, when, outcome))
    monkeypatch.setenv("PHAROS_LIVE_RESULTS", str(results))
    assert finish(proofs) == str(results)
    assert live_results.read(results) == sorted(
        [kept, live_results.Proof("llamacpp", "b11312", "running", "llamacpp-running", "t::passed")]
    )


def test_a_run_that_records_nothing_writes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PHAROS_LIVE_RESULTS", raising=False)
    monkeypatch.delenv("PHAROS_RECORD", raising=False)
    assert finish(SessionProofs()) is None
