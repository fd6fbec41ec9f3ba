"""Layer-2 replay: every library probe on every capture body of its path (spec §14).

Capture dirs are found by walking $PHAROS_CAPTURES/engines, tests/captures/engines and
tests/captures (a version directory is one holding a meta.yaml), so a version recorded
later is replayed with no code change. Expected values are in expectations.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tools import captures as repo_captures
from tools.support import reported_version

from pharos.engine import LIBRARY, Probe, ProbeError
from pharos.engine.captures import VersionDir, engine_roots, expected, observed, version_dirs
from pharos.engine.router_mode import llamacpp_router_residency, per_model_path
from pharos.engine.snapshots import known
from tests.engine.expectations import EXPECTED

DIRS = repo_captures.version_dirs()
pytestmark = pytest.mark.skipif(not DIRS, reason="no captures found (set PHAROS_CAPTURES)")
HTTP = [p for p in LIBRARY.values() if not p.feed.log]
LOG = [p for p in LIBRARY.values() if p.feed.log]


def read(probe: Probe, body: bytes) -> object:
    """What the probe reads: plain data, or None for nothing known (an error counts as nothing)."""
    try:
        output = probe.parse(body)
    except ProbeError:
        return None
    return observed(probe, output) if known(output, probe.signal) else None


def want(vd: VersionDir, state: str | None, probe: Probe) -> tuple[str | None, object]:
    found, value = expected(EXPECTED, vd.engine, vd.version, state, probe.name)
    if probe.when is not None and not probe.when(reported_version(EXPECTED, vd)):
        return "guarded", None
    return ("row" if found else None), value


def routed_models(vd: VersionDir, state: str) -> tuple[str, ...]:
    """The models a router lists in this state: what resolve runs per-model probes over."""
    body = vd.body(state, "/v1/models")
    if body is None:
        return ()
    snapshot = llamacpp_router_residency.parse(body)
    return () if snapshot.models is None else tuple(sorted(snapshot.models))


def cases() -> list[tuple[VersionDir, str, Probe, str | None]]:
    """(capture, state, probe, model): a per-model probe once per model the router lists."""
    out: list[tuple[VersionDir, str, Probe, str | None]] = []
    for vd in DIRS:
        for state in vd.states:
            for probe in HTTP:
                assert probe.feed.path is not None
                if not probe.feed.per_model:
                    if vd.body(state, probe.feed.path) is not None:
                        out.append((vd, state, probe, None))
                    continue
                for model in routed_models(vd, state):
                    if vd.body(state, per_model_path(probe.feed.path, model)) is not None:
                        out.append((vd, state, probe, model))
    return out


CASES = cases()


@pytest.mark.parametrize(
    ("vd", "state", "probe", "model"),
    CASES,
    ids=[f"{vd.engine}/{vd.version}/{s}:{p.name}{'@' + m if m else ''}" for vd, s, p, m in CASES],
)
def test_probe_reads_body(vd: VersionDir, state: str, probe: Probe, model: str | None) -> None:
    assert probe.feed.path is not None
    path = probe.feed.path if model is None else per_model_path(probe.feed.path, model)
    body = vd.body(state, path)
    assert body is not None
    how, value = want(vd, state, probe)
    # a guarded-out probe never runs on this version (resolve drops it): it reads nothing
    actual = None if how == "guarded" else read(probe, body)
    if model is not None:
        # resolve keys a per-model probe's whole-backend value by the model it asked about
        actual = None if not isinstance(actual, dict) else {model: actual[""]}
        value = {model: value[model]} if isinstance(value, dict) and model in value else None
    assert actual == value


@pytest.mark.parametrize("vd", DIRS, ids=[f"{vd.engine}/{vd.version}" for vd in DIRS])
def test_log_probes_over_engine_log(vd: VersionDir) -> None:
    lines = vd.log_lines()
    if lines is None:
        pytest.skip("no engine.log in this capture")
    for probe in LOG:
        seen = [v for line in lines if (v := read(probe, line)) is not None]
        how, value = want(vd, None, probe)
        seen = [] if how == "guarded" else seen
        assert seen == ([] if value is None else [value]), probe.name


def test_every_expectation_row_is_used() -> None:
    used: set[tuple[str, str]] = set()
    for vd, state, probe, _ in CASES:
        for key in (
            f"{vd.engine}/{vd.version}/{state}",
            f"{vd.engine}//{state}",
            f"{vd.engine}/{vd.version}",
            f"{vd.engine}/",
        ):
            if probe.name in EXPECTED.get(key, {}):
                used.add((key, probe.name))
                break
    for vd in DIRS:
        if vd.log_lines() is not None:
            for probe in LOG:
                for key in (f"{vd.engine}/{vd.version}", f"{vd.engine}/"):
                    if probe.name in EXPECTED.get(key, {}):
                        used.add((key, probe.name))
                        break
    rows = {(key, name) for key, row in EXPECTED.items() for name in row}
    assert rows - used == set(), "rows that match no capture body (typo or stale)"
    assert all(name in LIBRARY for _, name in rows)


def test_replay_covers_every_http_probe_and_engine() -> None:
    assert {p.name for _, _, p, _ in CASES} >= {
        "openai-models",
        "ollama-ps-residency",
        "llamacpp-running",
        "vllm-running",
        "sglang-running",
        "llamaswap-running",
        "sglang-capacity",
        "llamacpp-slots-running",
        "llamacpp-router-capacity",
        "llamacpp-router-running",
        "llamacpp-router-waiting",
    }
    assert {vd.engine for vd in DIRS} >= {"ollama", "llamacpp", "llama-swap", "vllm", "sglang"}


def _version_dir(path: Path, *states: str) -> None:
    path.mkdir(parents=True)
    (path / "meta.yaml").write_text("engine: x\n")
    for state in states:
        (path / state).mkdir()
        (path / state / "v1_models").write_text('{"data":[]}')


def test_walker_reads_both_layouts_and_no_engine_named_engines(tmp_path: Path) -> None:
    ours, shared = tmp_path / "repo" / "tests" / "captures", tmp_path / "shared"
    _version_dir(shared / "engines" / "vllm" / "v0.30.0", "busy")
    _version_dir(ours / "engines" / "llamacpp" / "b11312", "idle", "streams")
    _version_dir(ours / "llamacpp-router" / "b11312", "loaded")
    (ours / "notes" / "draft").mkdir(parents=True)  # no meta.yaml: not a capture
    roots = engine_roots(ours=ours, shared=shared)
    assert roots == [shared / "engines", ours / "engines", ours]
    found = version_dirs(roots)
    assert [(vd.engine, vd.version) for vd in found] == [
        ("vllm", "v0.30.0"),
        ("llamacpp", "b11312"),
        ("llamacpp-router", "b11312"),
    ]
    assert found[1].states == ("idle",)  # streams/ is not a state
    assert found[1].path == ours / "engines" / "llamacpp" / "b11312"
    assert engine_roots(ours=tmp_path / "none", shared=tmp_path / "none") == []


def test_walker_finds_our_recordings_in_the_tree() -> None:
    ours = repo_captures.OUR_CAPTURES
    found = {(vd.engine, vd.version): vd.path for vd in DIRS}
    assert found[("llamacpp", "b11312")] == ours / "engines" / "llamacpp" / "b11312"
    assert found[("vllm", "v0.32.0")] == ours / "engines" / "vllm" / "v0.32.0"
    assert found[("llamacpp-router", "b11312")] == ours / "llamacpp-router" / "b11312"
    assert "engines" not in {vd.engine for vd in DIRS}
    assert len(found) == len(DIRS), "one engine/version found twice"
