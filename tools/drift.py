"""`make live-latest`'s report: what changed between the pinned recordings and a live run
against the newest releases (scripts/engines/live-latest.sh records into a temp dir).

For each engine recorded both ways, every HTTP probe of its recipe reads every state on
both sides (the same driven states, so the same load): a probe that read a value pinned
and reads nothing now is DROPPED, one that reads now and did not is RESOLVED, and one that
reads a different value in the same state CHANGED meaning (say a gauge that now reads 0
under load). Values a run cannot drive exactly (the KV-cache fill) are compared as
known/unknown only. Run: python -m tools.drift LATEST_CAPTURES [PINNED_CAPTURES].
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from pharos.engine.captures import VersionDir, engine_roots, kind_of, observed, version_dirs
from pharos.engine.recipes import RECIPES
from pharos.engine.router_mode import llamacpp_router_residency, per_model_path
from pharos.engine.snapshots import known
from pharos.engine.types import Probe, ProbeError, Signal
from tools.captures import OUR_CAPTURES

INEXACT = frozenset({Signal.KV_USAGE})


def _read(probe: Probe, vd: VersionDir, state: str) -> object:
    assert probe.feed.path is not None
    paths = [probe.feed.path]
    if probe.feed.per_model:
        body = vd.body(state, "/v1/models")
        listed = llamacpp_router_residency.parse(body).models if body else None
        paths = [per_model_path(probe.feed.path, m) for m in sorted(listed or {})]
    values = []
    for path in paths:
        body = vd.body(state, path)
        if body is None:
            continue
        try:
            output = probe.parse(body)
        except ProbeError:
            continue
        if known(output, probe.signal):
            values.append(observed(probe, output))
    if not values:
        return None
    return "known" if probe.signal in INEXACT else (values if probe.feed.per_model else values[0])


def _version(vd: VersionDir) -> str:
    return f"{vd.engine}/{vd.version}"


def report(latest: Sequence[VersionDir], pinned: Sequence[VersionDir]) -> list[str]:
    lines: list[str] = []
    by_engine = {vd.engine: vd for vd in pinned}
    for new in latest:
        old = by_engine.get(new.engine)
        if old is None:
            lines.append(f"{_version(new)}: no pinned recording to compare with")
            continue
        lines.append(f"{_version(old)} -> {_version(new)}")
        states = [s for s in new.states if s in old.states]
        for probe in RECIPES[kind_of(new.engine)]:
            if probe.feed.log or probe.feed.path is None:
                continue
            for state in states:
                before, after = _read(probe, old, state), _read(probe, new, state)
                if before is None and after is None:
                    continue
                if before is None:
                    lines.append(f"  RESOLVED {probe.name} [{state}]: {after!r}")
                elif after is None:
                    lines.append(f"  DROPPED  {probe.name} [{state}]: was {before!r}")
                elif before != after:
                    lines.append(f"  CHANGED  {probe.name} [{state}]: {before!r} -> {after!r}")
        if not any(line.startswith("  ") for line in lines[-1:]) and lines[-1].startswith(
            _version(old)
        ):
            lines.append("  every probe reads what it read on the pinned release")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print("usage: python -m tools.drift LATEST_CAPTURES [PINNED_CAPTURES]", file=sys.stderr)
        return 2
    latest_root = Path(args[0])
    pinned_root = Path(args[1]) if len(args) > 1 else OUR_CAPTURES
    none = latest_root / "-"
    latest = version_dirs(engine_roots(ours=latest_root, shared=none))
    pinned = version_dirs(engine_roots(ours=pinned_root, shared=none))
    for line in report(latest, pinned):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
