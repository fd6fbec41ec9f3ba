"""Engine adapters: probes, the probe library, recipes, plans, resolve, scrape, detect (spec §4)."""

from pharos.engine.detect import detect
from pharos.engine.errors import BackendUnreachable, DetectionFailed, ResolveError
from pharos.engine.library import LIBRARY
from pharos.engine.logline import log_line
from pharos.engine.plan import Plan, ScrapeResult, follow_line
from pharos.engine.prom import prom
from pharos.engine.recipes import RECIPES
from pharos.engine.resolve import resolve, scrape
from pharos.engine.snapshots import apply_aliases, merge_snapshots
from pharos.engine.types import (
    FAST_SIGNALS,
    LOAD_SIGNALS,
    WHOLE_BACKEND,
    Feed,
    Kind,
    Load,
    ModelInfo,
    Probe,
    ProbeError,
    Residency,
    Signal,
    Snapshot,
)

__all__ = [
    "FAST_SIGNALS",
    "LIBRARY",
    "LOAD_SIGNALS",
    "RECIPES",
    "WHOLE_BACKEND",
    "BackendUnreachable",
    "DetectionFailed",
    "Feed",
    "Kind",
    "Load",
    "ModelInfo",
    "Plan",
    "Probe",
    "ProbeError",
    "Residency",
    "ResolveError",
    "ScrapeResult",
    "Signal",
    "Snapshot",
    "apply_aliases",
    "detect",
    "follow_line",
    "log_line",
    "merge_snapshots",
    "prom",
    "resolve",
    "scrape",
]
