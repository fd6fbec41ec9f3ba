"""The compiled and the Python-source policy are the same policy (issue 13): the tests run both.

The default import loads mypyc's build when setup.py compiled it; PHAROS_PURE_PYTHON=1 loads the
source. Each test here says which one ran, and the decisions of both are compared one by one.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pharos.policy
from pharos.policy import IMPLEMENTATION, PURE_REASON, _load, cost

POLICY_DIR = Path(pharos.policy.__file__).parent
COMPILED_BUILT = any(
    (POLICY_DIR / f"cost{suffix}").is_file() for suffix in importlib.machinery.EXTENSION_SUFFIXES
)


def needs_compiled_build() -> None:
    """Skips without a compiled build, except in CI on a machine with a C compiler: there the
    build fell back to source by mistake (setup.py says why under `pip install -v`)."""
    if COMPILED_BUILT:
        return
    if os.environ.get("CI") and (shutil.which("cc") or shutil.which("gcc")):
        pytest.fail("CI has a C compiler but no compiled build: setup.py fell back to source")
    pytest.skip("no compiled policy here (no C compiler at install)")


DECISIONS = """
import json, random, sys
import pharos.policy as p
from pharos.policy import DEFAULT_CONFIG, POLICIES, Candidate, RouteReq
rng = random.Random(11)
out = {"implementation": p.IMPLEMENTATION, "decisions": []}
for round_ in range(300):
    cands = [
        Candidate(
            target_id=i, capacity=rng.choice((0, 1, 2, 4)), free_slots=rng.randint(0, 4),
            queue_ahead=rng.randint(0, 3), warm=rng.choice((True, False, None)),
            kv_usage=rng.choice((None, 0.5, 0.95)), matched_tokens=rng.choice((0, 300, 5000)),
            prefill_s_per_token=rng.choice((None, 0.001, 0.003)),
            load_s=rng.choice((None, 2.0, 9.0)), service_s=rng.choice((None, 1.0, 4.0)),
            fits_if_cold=rng.choice((None, True, False)), loading=rng.random() < 0.2,
        )
        for i in range(rng.randint(1, 20))
    ]
    for name, pick in sorted(POLICIES.items()):
        d = pick(RouteReq(rng.randint(0, 6000), rng.getrandbits(64)), cands, DEFAULT_CONFIG)
        out["decisions"].append(
            [name, d.target_id, d.enqueue, d.why, d.reason, [list(s) for s in d.scores]]
        )
json.dump(out, sys.stdout)
"""


def _decisions(pure: bool) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != _load.PURE_ENV}
    if pure:
        env[_load.PURE_ENV] = "1"
    done = subprocess.run(
        [sys.executable, "-c", DECISIONS], env=env, capture_output=True, text=True, check=True
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_the_running_build_is_named_by_where_its_modules_came_from() -> None:
    suffix = Path(cost.__file__ or "").suffix
    assert ("mypyc" if suffix == ".so" else "python") == IMPLEMENTATION
    if os.environ.get(_load.PURE_ENV) == "1":
        assert IMPLEMENTATION == "python"
        assert PURE_REASON == "PHAROS_PURE_PYTHON=1"
    elif COMPILED_BUILT and not _load.stale_compiled(str(POLICY_DIR)):
        assert IMPLEMENTATION == "mypyc"


def test_the_source_build_loads_when_asked_even_beside_a_compiled_one() -> None:
    pure = _decisions(pure=True)
    assert pure["implementation"] == "python"


def test_compiled_and_source_builds_decide_alike() -> None:
    needs_compiled_build()
    compiled, pure = _decisions(pure=False), _decisions(pure=True)
    assert (compiled["implementation"], pure["implementation"]) == ("mypyc", "python")
    assert compiled["decisions"] == pure["decisions"]


def test_the_policy_scheduler_and_state_tests_pass_on_the_source_build() -> None:
    needs_compiled_build()
    # This run used the default build; the same suites run again on the Python source.
    if os.environ.get(_load.PURE_ENV) == "1":
        pytest.skip("this run is the source build already")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, _load.PURE_ENV: "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-x",
            "tests/policy",
            "tests/sched",
            "tests/state",  # state/view.py is compiled too
            "-p",
            "no:randomly",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-2000:]


def test_a_source_newer_than_its_compiled_module_is_stale(tmp_path: Path) -> None:
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    for name in _load.MODULES:
        (tmp_path / f"{name}.py").write_text("")
        (tmp_path / f"{name}{suffix}").write_bytes(b"")
        os.utime(tmp_path / f"{name}.py", (1000, 1000))
        os.utime(tmp_path / f"{name}{suffix}", (2000, 2000))
    assert _load.stale_compiled(str(tmp_path)) == []
    os.utime(tmp_path / "cost.py", (3000, 3000))  # edited after the build
    assert _load.stale_compiled(str(tmp_path)) == ["cost"]


def test_no_compiled_module_is_never_stale(tmp_path: Path) -> None:
    (tmp_path / "cost.py").write_text("")
    assert _load.stale_compiled(str(tmp_path)) == []
