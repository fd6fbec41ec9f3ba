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
    assert rows[0][4] == rows[1][4]  # the same planned turns under both policies


@pytest.mark.timeout(120)
def test_with_a_key_per_user_every_turn_through_pharos_is_authenticated_and_served() -> None:
    """--key-per-user: Pharos gets one key per user and each user sends theirs. A turn whose
    key Pharos refused would fail and end its conversation, so through Pharos the same turns
    are served as straight to the engines (sticky, no keys), none failed."""
    done = _scenario("--fleet", "fake", "--duration", "6", "--users", "3", "--key-per-user",
                     "--policies", "pharos-cost,sticky")  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "a key per user" in done.stdout
    rows = [line.strip("| ").split(" | ") for line in done.stdout.splitlines()]
    rows = [r for r in rows if r[0] in ("pharos-cost", "sticky")]
    assert [r[0] for r in rows] == ["pharos-cost", "sticky"], done.stdout
    assert int(rows[0][4].split()[0]) > 0 and rows[0][4] == rows[1][4], rows
    assert "failed" not in rows[0][4] and "HTTP" not in done.stderr, (rows, done.stderr[-2000:])


def test_the_scenario_without_engines_says_which_script_installs_them() -> None:
    done = _scenario("--fleet", "equal", env={"PHAROS_ENGINE_CACHE": "/nonexistent/engines"})
    assert done.returncode == 2
    assert "install-all.sh" in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_every_policy_is_given_the_turns_an_instant_fleet_would_see_sent_in_the_duration() -> None:
    from benchmarks.scenario.conversations import conversations

    duration_s = 60.0
    convs = conversations(
        users=3, bypass=True, models=("m",), duration_s=duration_s, seed=2, think_scale=0.5
    )
    by_user: dict[str, list[float]] = {}
    for conv in convs:
        sent_s = by_user.setdefault(conv.user, [0.0])
        if conv.start_s is not None:
            sent_s[0] = max(sent_s[0], conv.start_s)
        for turn in conv.turns:
            sent_s[0] += turn.think_s
            assert sent_s[0] < duration_s, (conv.user, conv.index)
    assert set(by_user) == {"user0", "user1", "user2", "noise3"}  # noise numbered after the users
    assert all(conv.turns for conv in convs)
    longer = conversations(
        users=3, bypass=True, models=("m",), duration_s=2 * duration_s, seed=2, think_scale=0.5
    )
    assert sum(len(c.turns) for c in longer) > sum(len(c.turns) for c in convs)


def test_a_duration_too_short_for_any_turn_says_so_instead_of_a_traceback() -> None:
    """Found writing the pooled test: `--duration 3 --users 1` plans no turn (the user's
    first think time is longer), and the fleet's header line raised on max() of nothing."""
    done = _scenario("--fleet", "fake", "--duration", "0.5", "--users", "1")
    assert done.returncode == 2, done.stdout[-2000:]
    assert "--duration" in done.stderr and "Traceback" not in done.stderr, done.stderr
