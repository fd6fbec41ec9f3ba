"""Signals a live test (tests/live/, marker `live`) proved on a real engine.

(engine dir name, version dir name, signal value) -> "live", or the name of the
probe the live run saw supply the signal (needed when no capture of that version
exists). Filled by the LIVE helper; read by `python -m pharos.engine.support`.
"""

from __future__ import annotations

from collections.abc import Mapping

LIVE_PROOFS: Mapping[tuple[str, str, str], str] = {}
