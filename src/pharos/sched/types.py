"""The scheduler's inputs, outputs and errors (spec §8)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar, Final, Literal, Protocol, final

from pharos.engine.usage import Usage
from pharos.prefix import Chain, Match, Source
from pharos.state.view import TargetView

QueueOutcome = Literal["immediate", "waited", "engine_queue"]
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
        self,
        chain: Chain,
        target_id: int,
        generation: int,
        now_s: float,
        source: Source = Source.LOCAL,
    ) -> None: ...

    def correct(self, chain: Chain, target_id: int) -> None: ...

    def observe_cached(
        self, chain: Chain, target_id: int, predicted_bytes: int, cached_tokens: int | None
    ) -> int:
        """The engine's cached tokens against the prediction (are tools cached, issue 16);
        returns the predicted bytes to judge the reply by."""
        ...


@final
class RouteRequest:
    """A slotted class with Final attributes, not a frozen dataclass (policy.RouteReq's reason):
    compiled, the dataclass's __init__ still ran interpreted through object.__setattr__, 1.7 µs
    against ~0.2 µs; the proxy builds one per request."""

    __slots__ = (
        "chain",
        "control",
        "exclude_target_ids",
        "model",
        "prompt_tokens",
        "retry",
        "seed",
    )

    def __init__(
        self,
        model: str,
        prompt_tokens: int,
        chain: Chain | None,
        seed: int,
        exclude_target_ids: frozenset[int] = frozenset(),
        retry: bool = False,
        control: bool = False,
    ) -> None:
        self.model: Final = model  # the name clients use
        self.prompt_tokens: Final = prompt_tokens  # estimated: decoded text bytes / 4
        self.chain: Final = chain  # None: no prefix to look up (embeddings, control requests)
        self.seed: Final = seed  # random per request; breaks exact ties
        self.exclude_target_ids: Final = exclude_target_ids  # a retry avoids the failed target
        self.retry: Final = retry  # to the front of its key's queue: it already waited its turn
        self.control: Final = control  # Ollama load/unload, no prompt: never learned from

    def _fields(self) -> tuple[object, ...]:
        return (
            self.model,
            self.prompt_tokens,
            self.chain,
            self.seed,
            self.exclude_target_ids,
            self.retry,
            self.control,
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RouteRequest) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return (
            f"RouteRequest(model={self.model!r}, prompt_tokens={self.prompt_tokens!r}, "
            f"chain={self.chain!r}, seed={self.seed!r}, "
            f"exclude_target_ids={self.exclude_target_ids!r}, retry={self.retry!r}, "
            f"control={self.control!r})"
        )


@final
class Feedback:
    """What the proxy saw of one reply. None = unknown, never 0. Slotted with Final attributes
    for RouteRequest's reason (1.6 µs as a frozen dataclass, one per request)."""

    __slots__ = ("client_left", "died_mid_reply", "duration_s", "status", "ttft_s", "usage")

    def __init__(
        self,
        status: int | None,
        ttft_s: float | None,
        duration_s: float | None,
        usage: Usage | None = None,
        died_mid_reply: bool = False,
        client_left: bool = False,
    ) -> None:
        self.status: Final = status  # engine HTTP status; None = never answered (connect failed)
        self.ttft_s: Final = ttft_s
        self.duration_s: Final = duration_s
        self.usage: Final = usage  # what the reply's usage line said; None = no usage seen
        self.died_mid_reply: Final = died_mid_reply
        self.client_left: Final = client_left

    def _fields(self) -> tuple[object, ...]:
        return (
            self.status,
            self.ttft_s,
            self.duration_s,
            self.usage,
            self.died_mid_reply,
            self.client_left,
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Feedback) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return (
            f"Feedback(status={self.status!r}, ttft_s={self.ttft_s!r}, "
            f"duration_s={self.duration_s!r}, usage={self.usage!r}, "
            f"died_mid_reply={self.died_mid_reply!r}, client_left={self.client_left!r})"
        )

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
