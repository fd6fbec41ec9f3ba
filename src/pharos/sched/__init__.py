"""Scheduler (spec §8): admission, in-flight counts, the weighted fair queue, and feedback."""

from pharos.sched.gauges import PEER_SILENCE_S, Gauges
from pharos.sched.learning import Dispatch, PrefixOutcome
from pharos.sched.lease import Lease
from pharos.sched.scheduler import DEFAULT_CAPACITY, DEFAULT_QUEUE_LIMIT, Scheduler
from pharos.sched.types import (
    Feedback,
    PrefixStore,
    QueueFull,
    QueueOutcome,
    RouteRequest,
    SchedError,
    TargetSource,
    Unavailable,
    UnknownModel,
)

__all__ = [
    "DEFAULT_CAPACITY",
    "DEFAULT_QUEUE_LIMIT",
    "PEER_SILENCE_S",
    "Dispatch",
    "Feedback",
    "Gauges",
    "Lease",
    "PrefixOutcome",
    "PrefixStore",
    "QueueFull",
    "QueueOutcome",
    "RouteRequest",
    "SchedError",
    "Scheduler",
    "TargetSource",
    "Unavailable",
    "UnknownModel",
]
