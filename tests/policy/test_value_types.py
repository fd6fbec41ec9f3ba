"""RouteReq and Decision are slotted classes now, not frozen dataclasses (issue 13: mypyc ran
the dataclass's __init__ interpreted). They must still behave as the values they were."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

import pytest

from pharos.policy import (
    DEFAULT_CONFIG,
    IMPLEMENTATION,
    POLICIES,
    Candidate,
    Decision,
    RouteReq,
    Why,
)
from pharos.policy.util import median_of, median_or


def _decision(target_id: int | None, enqueue: bool, why: Why, reason: str) -> Decision:
    return Decision(target_id, enqueue, why, lambda: (), lambda: reason)


def test_decisions_are_equal_by_target_queue_and_why_whatever_explains_them() -> None:
    one = _decision(3, False, "cache", "warm, est 0.4s")
    assert one == _decision(3, False, "cache", "another sentence")
    assert hash(one) == hash(_decision(3, False, "cache", ""))
    # what differs | other decision
    cases = [
        ("target", _decision(4, False, "cache", "")),
        ("enqueue", _decision(3, True, "cache", "")),
        ("why", _decision(3, False, "warm", "")),
    ]
    for what, other in cases:
        assert one != other, what
    assert repr(one) == "Decision(target_id=3, enqueue=False, why='cache')"
    assert one.reason == "warm, est 0.4s"


def test_a_route_request_is_a_value_built_by_position_or_keyword() -> None:
    request = RouteReq(1200, 7)
    assert request == RouteReq(prompt_tokens=1200, seed=7)
    assert hash(request) == hash(RouteReq(1200, 7))
    assert request != RouteReq(1200, 8)
    assert request != (1200, 7)
    assert request != RouteReq(1200, 7, 3)  # a home makes another request
    assert request != RouteReq(1200, 7, -1, {1: 2})  # so do live conversations to spread over
    assert RouteReq(1200, 7, -1, {1: 2}) == RouteReq(1200, 7, conversations={1: 2})
    assert request != RouteReq(1200, 7, new_conversation=True)  # and a person's new chat
    assert request != RouteReq(1200, 7, first_chat=True)  # and their first
    assert repr(request) == (
        "RouteReq(prompt_tokens=1200, seed=7, home_target_id=-1, conversations=None, "
        "new_conversation=False, first_chat=False)"
    )


def test_the_compiled_values_refuse_a_change() -> None:
    if IMPLEMENTATION != "mypyc":
        pytest.skip("the source build's slotted classes accept assignment (as Candidate does)")
    with pytest.raises(AttributeError):
        RouteReq(1, 2).seed = 3  # type: ignore[misc]
    with pytest.raises(AttributeError):
        _decision(1, False, "cache", "").why = "warm"  # type: ignore[misc]


class Candidates(Sequence[Candidate]):
    """A Sequence that is not a list: pick copies it into one first."""

    def __init__(self, items: list[Candidate]) -> None:
        self._items = items

    @overload
    def __getitem__(self, index: int) -> Candidate: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Candidate]: ...
    def __getitem__(self, index: int | slice) -> Candidate | Sequence[Candidate]:
        return self._items[index]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Candidate]:
        return iter(self._items)


def test_pick_decides_alike_on_a_list_a_tuple_and_any_sequence() -> None:
    candidates = [
        Candidate(1, 2, 0, queue_ahead=1, service_s=None),
        Candidate(2, 4, 1, warm=False, load_s=None, fits_if_cold=True),
        Candidate(3, 1, 1, matched_tokens=900, prefill_s_per_token=None, kv_usage=0.95),
        Candidate(4, 2, 2, warm=None, evicts_tokens=300),
    ]
    for name, pick in sorted(POLICIES.items()):
        for seed in range(4):
            request = RouteReq(2000, seed)
            seen = [
                pick(request, given, DEFAULT_CONFIG)
                for given in (candidates, tuple(candidates), Candidates(candidates))
            ]
            assert len({(d, d.reason, d.scores) for d in seen}) == 1, (name, seed, seen)


def test_median_of_sorts_its_own_list_and_agrees_with_median_or() -> None:
    # values | median (none known: the default, 9.0)
    cases = [
        ([], 9.0),
        ([3.0], 3.0),
        ([4.0, 1.0], 2.5),
        ([5.0, 1.0, 3.0], 3.0),
        ([0.004, 0.002, 0.004, 0.002], 0.003),
    ]
    for values, median in cases:
        assert median_or(values, 9.0) == pytest.approx(median), values
        owned = list(values)
        assert median_of(owned, 9.0) == pytest.approx(median), values
        assert owned == sorted(values)
