"""Scheduler test fixtures. Time is a FakeClock stepped by hand; nothing sleeps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pharos.clock import FakeClock
from pharos.prefix import PrefixIndex, PrefixOp
from pharos.sched import Scheduler
from tests.sched.fakes import FakeTargets


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def targets() -> FakeTargets:
    return FakeTargets()


@pytest.fixture
def prefix_ops() -> list[PrefixOp]:
    return []


@pytest.fixture
def index(clock: FakeClock) -> PrefixIndex:
    return PrefixIndex(clock=clock)


@pytest.fixture
def new_sched(
    targets: FakeTargets, index: PrefixIndex, clock: FakeClock, prefix_ops: list[PrefixOp]
) -> Callable[..., Scheduler]:
    def build(**kw: Any) -> Scheduler:
        kw.setdefault("on_prefix_op", prefix_ops.append)
        return Scheduler(targets, index, clock, **kw)

    return build


@pytest.fixture
def sched(new_sched: Callable[..., Scheduler]) -> Scheduler:
    return new_sched()
