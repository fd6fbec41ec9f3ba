"""Target registry, scraped and logged engine state, speed estimates (spec §5)."""

from pharos.state.logfollow import LogFeedOpener
from pharos.state.registry import target_key
from pharos.state.spec import BackendSpec, BackendStatus, StateOptions, StatRecord
from pharos.state.state import State
from pharos.state.view import TargetView

__all__ = [
    "BackendSpec",
    "BackendStatus",
    "LogFeedOpener",
    "StatRecord",
    "State",
    "StateOptions",
    "TargetView",
    "target_key",
]
