"""Scheduler (spec §8): admission, in-flight counts, the weighted fair queue, and feedback."""

from pharos.sched.gauges import PEER_SILENCE_S, Gauges
from pharos.sched.learning import Dispatch, PrefixOutcome
from pharos.sched.lease import Lease
from pharos.sched.scheduler import (
    DEFAULT_CAPACITY,
    DEFAULT_QUEUE_LIMIT,
    DEFAULT_QUEUE_WAIT_S,
    Scheduler,
)
from pharos.sched.types import (
    Feedback,
    NeverFits,
    PrefixStore,
    QueueFull,
    QueueOutcome,
    QueueTimeout,
    RouteRequest,
    SchedError,
    TargetSource,
    Unavailable,
    UnknownModel,
)

__all__ = [
    "DEFAULT_CAPACITY",
    "DEFAULT_QUEUE_LIMIT",
    "DEFAULT_QUEUE_WAIT_S",
    "PEER_SILENCE_S",
    "Dispatch",
    "Feedback",
    "Gauges",
    "Lease",
    "NeverFits",
    "PrefixOutcome",
    "PrefixStore",
    "QueueFull",
    "QueueOutcome",
    "QueueTimeout",
    "RouteRequest",
    "SchedError",
    "Scheduler",
    "TargetSource",
    "Unavailable",
    "UnknownModel",
]
