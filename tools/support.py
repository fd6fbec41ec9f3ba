"""Generates SUPPORT.md: engine version x signal -> the probe that reads it.

Built from the layer-2 expectation tables (tests/engine/expectations.py), the
capture directories found by walking (tools/captures.py), and the live results
(tests/captures/live-results.tsv, written by live tests that passed: tools/live_results.py).
Run `python -m tools.support` (or `make support`) to rewrite SUPPORT.md; a test fails
when it is stale. Repository tooling: the installed package never imports it.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.engine.expectations import EXPECTED

from pharos.engine.captures import Expectations, VersionDir, expected, kind_of
from pharos.engine.recipes import RECIPES
from pharos.engine.types import Probe, Signal
from tools import live_results
from tools.captures import REPO_ROOT
from tools.captures import version_dirs as walk_version_dirs

SUPPORT_MD = REPO_ROOT / "SUPPORT.md"
LiveProofs = Mapping[tuple[str, str, str], str]
"""(engine dir, version dir, signal value) -> the probe a passing live test credited."""


def load_tables(results: Path = live_results.RESULTS_FILE) -> tuple[Expectations, LiveProofs]:
    return EXPECTED, live_results.by_cell(live_results.read(results))


def _has_input(vd: VersionDir, probe: Probe, state: str | None) -> bool:
    if probe.feed.log:
        return state is None and (vd.path / "engine.log").is_file()
    assert probe.feed.path is not None
    return state is not None and vd.body(state, probe.feed.path) is not None


def _reads(table: Expectations, vd: VersionDir, probe: Probe) -> bool:
    """Whether the table says the probe reads a known value from some input of the version."""
    states: Sequence[str | None] = [None] if probe.feed.log else vd.states
    for state in states:
        if _has_input(vd, probe, state):
            found, value = expected(table, vd.engine, vd.version, state, probe.name)
            if found and value is not None:
                return True
    return False


def reported_version(table: Expectations, vd: VersionDir) -> str | None:
    """The version the engine reports, per the table (what version guards see)."""
    for probe in RECIPES[kind_of(vd.engine)]:
        if probe.signal is not Signal.VERSION or probe.when is not None:
            continue
        for state in vd.states:
            if _has_input(vd, probe, state):
                found, value = expected(table, vd.engine, vd.version, state, probe.name)
                if found and isinstance(value, str):
                    return value
    return None


def _natural(text: str) -> tuple[tuple[int, str], ...]:
    return tuple((int(p), "") if p.isdigit() else (-1, p) for p in re.split(r"(\d+)", text) if p)


def _live_probe(engine: str, version: str, signal: Signal, probe: str) -> str:
    """The probe a live result credits, which must be one of the engine's recipe for it."""
    if probe not in {p.name for p in RECIPES[kind_of(engine)] if p.signal is signal}:
        raise ValueError(
            f"live result {engine}/{version}/{signal.value}: {probe} is not in the recipe"
        )
    return probe


def _grouped(
    live: LiveProofs, dirs: Sequence[VersionDir]
) -> list[tuple[tuple[str, str], list[VersionDir]]]:
    grouped: dict[tuple[str, str], list[VersionDir]] = {}
    for vd in dirs:
        grouped.setdefault((vd.engine, vd.version), []).append(vd)
    for engine, version, _ in live:
        grouped.setdefault((engine, version), [])
    return sorted(grouped.items(), key=lambda kv: (kv[0][0], _natural(kv[0][1])))


def cells(
    table: Expectations, live: LiveProofs, dirs: Sequence[VersionDir]
) -> dict[tuple[str, str], dict[Signal, str]]:
    """(engine, version) -> signal -> cell text.

    Raises ValueError for a live result crediting a probe outside the engine's recipe:
    every cell names the probe it credits.
    """
    rows: dict[tuple[str, str], dict[Signal, str]] = {}
    for (engine, version), vds in _grouped(live, dirs):
        recipe = RECIPES[kind_of(engine)]
        reported = next((v for vd in vds if (v := reported_version(table, vd))), None)
        row: dict[Signal, str] = {}
        for signal in Signal:
            proof = live.get((engine, version, signal.value))
            fixture = next(
                (
                    p.name
                    for p in recipe
                    if p.signal is signal
                    and (p.when is None or p.when(reported))
                    and any(_reads(table, vd, p) for vd in vds)
                ),
                None,
            )
            if proof is not None:
                row[signal] = f"`{_live_probe(engine, version, signal, proof)}` (live)"
            elif fixture is not None:
                row[signal] = f"`{fixture}` (fixture)"
            else:
                row[signal] = "unknown"
        rows[(engine, version)] = row
    return rows


def reported_versions(
    table: Expectations, dirs: Sequence[VersionDir]
) -> dict[tuple[str, str], str]:
    """(engine, version dir) -> the version string the engine reports, where a row says it."""
    out: dict[tuple[str, str], str] = {}
    for vd in dirs:
        reported = reported_version(table, vd)
        if reported is not None:
            out.setdefault((vd.engine, vd.version), reported)
    return out


SIGNAL_MEANINGS: Mapping[Signal, str] = {
    Signal.VERSION: "the version string the engine reports (version guards compare it)",
    Signal.MODELS: "the models the backend serves",
    Signal.RESIDENCY: "per model: loaded, loading or cold (not in memory)",
    Signal.VRAM_BYTES: "per model: bytes of accelerator memory it holds",
    Signal.SIZE_BYTES: "per model: bytes on disk (what loading it costs)",
    Signal.RUNNING: "requests the engine is processing now",
    Signal.WAITING: "requests queued inside the engine",
    Signal.CAPACITY: "requests it runs at once (parallel slots, max running requests)",
    Signal.KV_USAGE: "KV-cache fill, 0..1",
}


def render(table: Expectations, live: LiveProofs, dirs: Sequence[VersionDir]) -> str:
    signals = list(Signal)
    reports = reported_versions(table, dirs)
    lines = [
        "# Engine support matrix",
        "",
        "Which signal Pharos reads on which engine release, through which probe, and what",
        "proves it. Generated by `python -m tools.support` (or `make support`) from the",
        "layer-2 expectation tables (`tests/engine/expectations.py`: what every probe reads",
        "from every recorded body), the capture directories (found by walking",
        "`$PHAROS_CAPTURES/engines`, `tests/captures/engines` and `tests/captures`) and the",
        "live results (`tests/captures/live-results.tsv`: engine, release, signal and probe",
        "of every value a live test asserted on a real engine and passed; rewritten by",
        "`PHAROS_RECORD=1` live runs). Do not edit by hand: `tests/engine/test_support.py`",
        "fails when this file differs from what the generator writes.",
        "",
        "## Columns",
        "",
        "- **engine**: the capture directory name; `llamacpp-router` is llama-server started",
        "  with `--models-dir` (router mode), resolved with the llama.cpp recipe.",
        "- **release**: the version directory of the capture or live run.",
        "- **reports**: the version string that release reports (unknown: no body kept it).",
    ]
    lines += [f"- **{s.value}**: {SIGNAL_MEANINGS[s]}." for s in signals]
    lines += [
        "",
        "## Cells",
        "",
        "- `` `probe` (live) ``: the named recipe probe reads the signal on that release, and a",
        "  live test (`pytest -m live tests/live`) asserted its value on a real engine and",
        "  passed (a row of `tests/captures/live-results.tsv` names the test).",
        "- `` `probe` (fixture) ``: the named probe reads it from a recorded capture body",
        "  (replayed by `tests/engine/test_replay.py`); no live run proved it.",
        "- **unknown**: no probe of the recipe reads it on that release, so Pharos treats the",
        "  signal as unknown, never as 0. Either the engine does not report it, a",
        "  version-guarded probe is not trusted there (llama.cpp `requests_deferred` before",
        "  b8772 reads 0 while requests queue), or the shared capture copy lost the body",
        "  (captures/MANIFEST.md) and no live recording (tests/captures/) proves it yet.",
        "",
        "| engine | release | reports | " + " | ".join(s.value for s in signals) + " |",
        "|---|---|---|" + "---|" * len(signals),
    ]
    for (engine, version), row in cells(table, live, dirs).items():
        reported = reports.get((engine, version))
        shown = f"`{reported}`" if reported else "unknown"
        lines.append(
            f"| {engine} | {version} | {shown} | " + " | ".join(row[s] for s in signals) + " |"
        )
    lines += [
        "",
        "## Not run live here",
        "",
        "- **SGLang 0.5.23** (newest on PyPI): its rows above are fixtures only. It does not",
        "  install on these CPU-only machines: the wheel pins `torch==2.14.1`, which resolves",
        "  to the CUDA 13 build with about twenty `nvidia-*` wheels, and `sglang-kernel==0.4.10`,",
        "  whose only wheel (373 MB) holds CUDA kernels (`sm90`/`sm100` `common_ops` linked",
        "  against `libcuda.so.1`) and no CPU ops; neither has an sdist on PyPI (sglang's last",
        "  is 0.5.10.post1), and with the local CPU torch 2.13.0 pip reports",
        "  ResolutionImpossible. Checked 2026-12-01; re-checked the same afternoon (0.5.23",
        "  still newest): `pip install --dry-run sglang==0.5.23 torch==2.13.0` ends",
        "  `ERROR: Cannot install sglang==0.5.23 and torch==2.13.0 because these package",
        "  versions have conflicting dependencies` (`sglang 0.5.23 depends on torch==2.14.1`),",
        "  `ResolutionImpossible`; `pip download --no-binary :all: sglang-kernel==0.4.10` ends",
        "  `ERROR: No matching distribution found for sglang-kernel==0.4.10` (no sdist).",
        "",
        "## Notes from live runs",
        "",
        "- **llama-cpp-python 0.3.36** serves one request at a time and answers nothing, its",
        "  `/v1/models` included, while it generates: Pharos holds a backend up through scrape",
        "  timeouts while its own requests are in flight there. With `interrupt_requests` on (its",
        "  default) it cuts a streaming reply, without the terminating chunk, as soon as another",
        "  request waits for the model, a scrape included; the live tests run it with",
        "  `--interrupt_requests False`. Give it `capacity: 1` when it must keep that default.",
        "",
    ]
    return "\n".join(lines)


def generate() -> str:
    table, live = load_tables()
    return render(table, live, walk_version_dirs())


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    target = Path(args[0]) if args else SUPPORT_MD
    target.write_text(generate(), encoding="utf-8")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
