"""The scheduler's inputs, outputs and errors (spec §8)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal, Protocol

from pharos.engine.usage import Usage
from pharos.prefix import Chain, Match, Source
from pharos.state.view import TargetView

QueueOutcome = Literal["immediate", "waited"]
"""The `queue` decision stage (spec §13): did the request wait in the fair queue."""


class TargetSource(Protocol):
    """What the scheduler reads and teaches about targets (implemented by pharos.state.State)."""

    def targets_for_model(self, model: str, now: float) -> Sequence[TargetView]:
        """Every target serving the model, up or not."""
        ...

    def targets_of_backend(self, backend_url: str, now: float) -> Sequence[TargetView]: ...

    def model_listed(self, model: str) -> bool:
        """Any backend, up or down, ever listed it: tells 404 from 503."""
        ...

    def observe(
        self,
        target_id: int,
        *,
        prefill_s_per_token: float | None = None,
        load_s: float | None = None,
        service_s: float | None = None,
    ) -> None:
        """EWMA samples; None = no sample for that estimate."""
        ...

    def reply_succeeded(self, target_id: int, now: float) -> None:
        """A successful reply shows the model loaded until the next full round."""
        ...


class PrefixStore(Protocol):
    """The parts of pharos.prefix.PrefixIndex the scheduler uses."""

    def lookup(
        self,
        chain: Chain,
        generation_of: Callable[[int], int | None],
        stop_after: int | None = None,
    ) -> dict[int, Match]: ...

    def record(
        self, chain: Chain, target_id: int, generation: int, now_s: float, source: Source = ...
    ) -> None: ...

    def correct(self, chain: Chain, target_id: int) -> None: ...

    def observe_cached(
        self, chain: Chain, target_id: int, predicted_bytes: int, cached_tokens: int | None
    ) -> int:
        """The engine's cached tokens against the prediction (are tools cached, issue 16);
        returns the predicted bytes to judge the reply by."""
        ...


@dataclass(frozen=True, slots=True)
class RouteRequest:
    model: str  # the name clients use
    prompt_tokens: int  # estimated: decoded text bytes / 4
    chain: Chain | None  # None: no prefix to look up (embeddings, control requests)
    seed: int  # random per request; breaks exact ties
    exclude_target_ids: frozenset[int] = frozenset()  # a retry avoids the target that failed
    retry: bool = False  # goes to the front of its key's queue: it already waited its turn
    control: bool = False  # Ollama load/unload with no prompt: forwarded, never learned from


@dataclass(frozen=True, slots=True)
class Feedback:
    """What the proxy saw of one reply. None = unknown, never 0."""

    status: int | None  # engine HTTP status; None = never answered (connect failed)
    ttft_s: float | None
    duration_s: float | None
    usage: Usage | None = None  # what the reply's usage line said; None = no usage seen
    died_mid_reply: bool = False
    client_left: bool = False

    @property
    def succeeded(self) -> bool:
        return self.status is not None and 200 <= self.status < 300 and not self.died_mid_reply

    @property
    def prompt_tokens(self) -> int | None:
        return None if self.usage is None else self.usage.prompt_tokens

    @property
    def cached_tokens(self) -> int | None:
        return None if self.usage is None else self.usage.cached_tokens

    @property
    def completion_tokens(self) -> int | None:
        return None if self.usage is None else self.usage.completion_tokens

    @property
    def engine_load_s(self) -> float | None:
        return None if self.usage is None else self.usage.engine_load_s

    @property
    def engine_prefill_s(self) -> float | None:
        return None if self.usage is None else self.usage.engine_prefill_s


ABANDONED = Feedback(None, None, None)
"""A lease granted to a request that was cancelled before it could use it."""


class SchedError(Exception):
    """A request the scheduler could not place. `outcome` is its `route` decision (spec §13)."""

    outcome: ClassVar[str] = ""


class UnknownModel(SchedError):
    """No backend, up or down, lists the model (404)."""

    outcome: ClassVar[str] = "unknown_model"


class Unavailable(SchedError):
    """Backends list the model but none that serves it is up (503)."""

    outcome: ClassVar[str] = "unavailable"


class QueueFull(SchedError):
    """The fair queue is at its bound (429)."""

    outcome: ClassVar[str] = "queue_full"


class NeverFits(Unavailable):
    """The model is cold and larger than the memory of every host serving it (503 at once)."""

    outcome: ClassVar[str] = "never_fits"


class QueueTimeout(SchedError):
    """The request waited in the fair queue for the whole limits.queue_wait (503)."""

    outcome: ClassVar[str] = "queue_timeout"

    def __init__(self, message: str, waited_s: float) -> None:
        super().__init__(message)
        self.waited_s = waited_s
