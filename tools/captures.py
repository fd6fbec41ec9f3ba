"""Where a checkout keeps its captures: the one lookup tests and tools share.

The shared copy is `$PHAROS_CAPTURES`, else `<repo>/../shared/captures`; our own live
recordings are `tests/captures/`. The installed package never needs either, so this
lives beside the tests, not in `src/` (an installed wheel has no repository around it).
"""

from __future__ import annotations

import os
from pathlib import Path

from pharos.engine import captures
from pharos.engine.captures import VersionDir

REPO_ROOT = Path(__file__).resolve().parents[1]
OUR_CAPTURES = REPO_ROOT / "tests" / "captures"


def shared_captures() -> Path:
    """$PHAROS_CAPTURES, else <repo root>/../shared/captures."""
    env = os.environ.get("PHAROS_CAPTURES")
    return Path(env) if env else REPO_ROOT.parent / "shared" / "captures"


def engine_roots() -> list[Path]:
    """Every root that holds `<engine>/<version>/` directories, shared first."""
    return captures.engine_roots(ours=OUR_CAPTURES, shared=shared_captures())


def version_dirs() -> list[VersionDir]:
    return captures.version_dirs(engine_roots())


def stream_files() -> list[Path]:
    """Every recorded reply file of every capture, shared and ours."""
    return captures.stream_files(engine_roots())


def our_captures() -> Path:
    """Our own recordings (`pharos doctor --record`, live tests), kept in the repository."""
    return OUR_CAPTURES
