"""The scheduler, the candidates builder and TargetView compile with the policy, as one build
(issue 13).

setup.py compiles pharos.sched (types, candidates, replies, learning, lease, scheduler) and
pharos.state.view into the policy's mypyc group.
They load all compiled or all source, never mixed, whichever module a program imports first;
tests/policy/test_build.py runs the scheduler suites on the source build as well.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import pharos.policy
from pharos.policy import _load

POLICY_DIR = Path(pharos.policy.__file__).parent
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]

WHERE_FROM = """
import json, sys
import {first}
from pharos.policy import _load
names = [f"{{package}}.{{name}}" for package, modules in _load.COMPILED.items() for name in modules]
for name in names:
    __import__(name)
print(json.dumps({{name: _load.implementation(sys.modules[name]) for name in names}}))
"""


def _implementations(first: str, *, pure: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != _load.PURE_ENV}
    if pure:
        env[_load.PURE_ENV] = "1"
    done = subprocess.run(
        [sys.executable, "-c", WHERE_FROM.format(first=first)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    found: dict[str, str] = json.loads(done.stdout)
    return found


def _layout(root: Path, source_mtime: dict[str, float]) -> Path:
    """A fake src/pharos with every compiled module and its source; returns the policy dir."""
    for package, modules in _load.COMPILED.items():
        here = root / package.rpartition(".")[2]
        here.mkdir(parents=True, exist_ok=True)
        for name in modules:
            (here / f"{name}.py").write_text("")
            (here / f"{name}{SUFFIX}").write_bytes(b"")
            os.utime(here / f"{name}{SUFFIX}", (2000, 2000))
            at = source_mtime.get(f"{package}.{name}", 1000)
            os.utime(here / f"{name}.py", (at, at))
    return root / "policy"


# first imported module              | PHAROS_PURE_PYTHON=1
CASES = [
    ("pharos.state.view", False),
    ("pharos.state.view", True),
    ("pharos.sched.candidates", False),
    ("pharos.sched.candidates", True),
    ("pharos.sched.scheduler", False),
    ("pharos.sched.scheduler", True),
]


@pytest.mark.parametrize(("first", "pure"), CASES)
def test_every_compiled_module_loads_from_one_build_whichever_is_imported_first(
    first: str, pure: bool
) -> None:
    found = _implementations(first, pure=pure)
    assert len(set(found.values())) == 1, found
    assert "pharos.sched.scheduler" in found
    if pure:
        assert set(found.values()) == {"python"}


def test_a_source_edited_in_another_package_makes_the_whole_build_stale(tmp_path: Path) -> None:
    policy_dir = _layout(tmp_path, {})
    assert _load.stale_in_build(str(policy_dir)) == []
    policy_dir = _layout(tmp_path, {"pharos.state.view": 3000})  # edited after the build
    assert _load.stale_in_build(str(policy_dir)) == ["pharos.state.view"]


def test_an_installed_wheel_is_not_stale_though_pip_writes_each_source_after_its_module(
    tmp_path: Path,
) -> None:
    """pip extracts a wheel's .py a fraction of a millisecond after its .so (0.22-0.26 ms
    measured): read as an edit, every wheel and Docker install ran the source build."""
    # source mtime against its compiled module's (2000 s) | stale
    cases = [
        (2000.0003, False),  # pip's extraction order
        (2001.5, False),  # still the same install
        (2005.0, True),  # edited after the build
    ]
    for source_mtime, stale in cases:
        policy_dir = _layout(tmp_path, {"pharos.policy.cost": source_mtime})
        expected = ["pharos.policy.cost"] if stale else []
        assert _load.stale_in_build(str(policy_dir)) == expected, source_mtime


def test_the_compiled_target_view_still_copies_with_dataclasses_replace() -> None:
    import dataclasses

    from pharos.engine.types import Kind, Residency
    from pharos.state.view import TargetView

    view = TargetView(
        target_id=3,
        key="http://a:1 m",
        backend_url="http://a:1",
        model="m",
        served_model="m",
        kind=Kind.VLLM,
        up=True,
        draining=False,
        residency=Residency.UNKNOWN,
        running=None,
        waiting=None,
        capacity=None,
        kv_usage=None,
        size_bytes=None,
        vram_bytes=None,
        config_capacity=None,
        memory_bytes=None,
        generation=1,
        prefill_s_per_token=None,
        load_s=None,
        service_s=None,
        last_fast_scrape_at=None,
    )
    down = dataclasses.replace(view, up=False)
    assert (down.up, down.target_id, view.up) == (False, 3, True)
    assert down != view
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.up = False  # type: ignore[misc]


def test_every_module_setup_py_compiles_is_one_the_loader_knows() -> None:
    # a compiled module the loader doesn't list loads compiled under PHAROS_PURE_PYTHON=1 beside
    # a source scheduler, and its stale source goes unnoticed (engine_joins and leases_on did)
    setup_py = (POLICY_DIR.parents[2] / "setup.py").read_text()
    listed = setup_py.split("COMPILED = [", 1)[1].split("]", 1)[0]
    compiled = {
        line.strip().strip('",').removeprefix("src/").removesuffix(".py").replace("/", ".")
        for line in listed.splitlines()
        if line.strip().startswith('"src/')
    }
    known = {f"{package}.{name}" for package, names in _load.COMPILED.items() for name in names}
    assert compiled == known
