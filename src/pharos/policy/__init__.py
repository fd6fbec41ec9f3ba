"""Routing policy (spec §7): pure functions from a request and its candidates to a Decision.

Imports nothing of ours: its input types live here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

from pharos.policy import _load

PURE_REASON = _load.choose(os.path.dirname(__file__))
"""Why the Python source of the policy loaded despite a compiled build ("" if it did not)."""

from pharos.policy import cost as _cost  # noqa: E402  (after the build choice above)
from pharos.policy.cost import pick  # noqa: E402
from pharos.policy.explain import waited_reason  # noqa: E402
from pharos.policy.least_load import pick_least_load  # noqa: E402
from pharos.policy.types import (  # noqa: E402
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

IMPLEMENTATION = _load.implementation(_cost)
"""`mypyc` when the compiled policy runs, `python` for the source (status, doctor, benchmarks)."""

POLICIES: Mapping[str, PickFn] = MappingProxyType({"cost": pick, "least-load": pick_least_load})
"""Policy name (config `policy:`) -> pick function."""

__all__ = [
    "DEFAULT_CONFIG",
    "IMPLEMENTATION",
    "POLICIES",
    "PURE_REASON",
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
    "waited_reason",
]
