"""What SUPPORT.md claims per engine release, and running the real `pharos doctor` CLI."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pharos.engine.types import Signal
from tests.live.capture import StateGauge
from tests.live.engines import REPO_ROOT

SUPPORT_MD = REPO_ROOT / "SUPPORT.md"
PHAROS_CLI = Path(sys.executable).parent / "pharos"
"""The console script of the venv running the tests (.venv/bin/pharos)."""
DOCTOR_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class SupportRow:
    engine: str
    release: str
    reports: str | None  # the version string the release reports
    probes: dict[str, str | None]  # signal -> the probe that reads it; None = unknown


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _ticked(cell: str) -> str | None:
    found = re.fullmatch(r"`([^`]+)`(?: \((?:live|fixture)\))?", cell)
    return None if found is None else found.group(1)


def support_row(engine: str, release: str, text: str | None = None) -> SupportRow:
    """The SUPPORT.md table row of one engine release."""
    lines = (SUPPORT_MD.read_text(encoding="utf-8") if text is None else text).splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("| engine |")), None)
    assert start is not None, "SUPPORT.md has no support table"
    columns = _cells(lines[start])
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        row = dict(zip(columns, _cells(line), strict=True))
        if row["engine"] != engine or row["release"] != release:
            continue
        probes: dict[str, str | None] = {}
        for signal in Signal:
            cell = row[signal.value]
            name = None if cell == "unknown" else _ticked(cell)
            assert cell == "unknown" or name is not None, f"unreadable cell {cell!r}"
            probes[signal.value] = name
        reports = row.get("reports")
        return SupportRow(engine, release, None if reports is None else _ticked(reports), probes)
    raise AssertionError(f"SUPPORT.md has no row for {engine} {release}")


def doctor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PHAROS_CLI), "doctor", *args],
        capture_output=True,
        text=True,
        timeout=DOCTOR_TIMEOUT_S,
        cwd=REPO_ROOT,
        check=False,
    )


def doctor_json(url: str) -> tuple[int, dict[str, Any]]:
    ran = doctor("--json", "--url", url)
    assert ran.stdout, f"doctor printed nothing (exit {ran.returncode}): {ran.stderr}"
    document = json.loads(ran.stdout)
    [backend] = document["backends"]
    return ran.returncode, backend


def post_json(url: str, body: object) -> tuple[int, str]:
    """Status and text of a JSON POST, error statuses included."""
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as reply:
            return reply.status, reply.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode("utf-8", "replace")


def engine_gauge(url: str, gauge: StateGauge) -> tuple[float | None, float | None]:
    """running/waiting as the engine's own /metrics says, without Pharos's probes."""
    with urllib.request.urlopen(url + gauge.path, timeout=10) as reply:
        body: bytes = reply.read()
    return gauge.read(body)
