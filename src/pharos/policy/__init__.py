"""Routing policy (spec §7): pure functions from a request and its candidates to a Decision.

Imports nothing of ours: its input types live here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

from pharos.policy.cost import pick
from pharos.policy.least_load import pick_least_load
from pharos.policy.types import (
    DEFAULT_CONFIG,
    WHY_VALUES,
    Candidate,
    Decision,
    PolicyConfig,
    RouteReq,
    Score,
    Why,
)

PickFn = Callable[[RouteReq, Sequence[Candidate], PolicyConfig], Decision]

POLICIES: Mapping[str, PickFn] = MappingProxyType({"cost": pick, "least-load": pick_least_load})
"""Policy name (config `policy:`) -> pick function."""

__all__ = [
    "DEFAULT_CONFIG",
    "POLICIES",
    "WHY_VALUES",
    "Candidate",
    "Decision",
    "PickFn",
    "PolicyConfig",
    "RouteReq",
    "Score",
    "Why",
    "pick",
    "pick_least_load",
]
