"""Where the recorded captures live: `$PHAROS_CAPTURES`, else `<repo root>/../shared/captures`."""

from __future__ import annotations

import os
from pathlib import Path

import pharos


def captures_root() -> Path:
    configured = os.environ.get("PHAROS_CAPTURES")
    if configured:
        return Path(configured)
    return Path(pharos.__file__).resolve().parents[2].parent / "shared" / "captures"


def repo_captures_root() -> Path:
    """Our own recordings (`pharos doctor --record`), kept in the repository."""
    return Path(pharos.__file__).resolve().parents[2] / "tests" / "captures"


def stream_files() -> list[Path]:
    """Every recorded reply file under engines/*/*/streams/ and tests/captures/*/*/streams/."""
    found: list[Path] = []
    for root in (captures_root() / "engines", repo_captures_root()):
        if root.is_dir():
            found.extend(sorted(p for p in root.glob("*/*/streams/*") if p.name != "replies.tsv"))
    return found
