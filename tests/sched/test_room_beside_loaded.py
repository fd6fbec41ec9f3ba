"""Candidate.room_bytes: the host memory a cold load leaves beside every model the host holds
(the policy's tie break between cold loads, issue 15)."""

from __future__ import annotations

import pytest

from pharos.engine.types import Residency
from pharos.sched.fits import IDLE_MODEL_STALE_S
from pharos.state.view import TargetView
from tests.sched.fakes import GB, candidates_with_fits
from tests.sched.test_placement import ollama_view

NOW = 1000.0
OTHER_HOST = "http://o1:11434"


def room_of(
    views: list[TargetView], last_reply_end: dict[int, float], local: dict[int, int]
) -> dict[int, int | None]:
    candidates = candidates_with_fits(views, last_reply_end, local, NOW)
    return {c.target_id: c.room_bytes for c in candidates}


# what the 9 GB host holds beside cold c (4 GB) | c's room
@pytest.mark.parametrize(
    ("loaded", "last_reply_end", "room_gb"),
    [
        ((), {}, 5),  # nothing
        (("a",), {1: NOW - 1.0}, 1),  # a, idle, used a second ago: it still holds its 4 GB
        (("a",), {1: NOW - IDLE_MODEL_STALE_S - 1}, 5),  # a, stale: it holds nothing
        (("a", "b"), {1: NOW - 1.0, 2: NOW - 1.0}, -3),  # a and b idle: c unloads one
    ],
)
def test_a_cold_targets_room_is_its_host_memory_less_every_model_held_and_its_own_size(
    loaded: tuple[str, ...], last_reply_end: dict[int, float], room_gb: int
) -> None:
    views = [
        ollama_view(1, "a", Residency.LOADED if "a" in loaded else Residency.COLD),
        ollama_view(2, "b", Residency.LOADED if "b" in loaded else Residency.COLD),
        ollama_view(3, "c", Residency.COLD),
    ]
    assert room_of(views, last_reply_end, {})[3] == room_gb * GB


def test_a_warm_target_and_a_host_of_unknown_memory_have_no_room() -> None:
    views = [
        ollama_view(1, "a", Residency.LOADED),
        ollama_view(2, "c", Residency.COLD, backend_url=OTHER_HOST, memory_bytes=None),
    ]
    assert room_of(views, {}, {}) == {1: None, 2: None}


def test_a_load_that_would_unload_a_busy_model_has_no_room() -> None:
    # c is infeasible there (fits_if_cold False): no room is read
    views = [
        ollama_view(1, "a", Residency.LOADED),
        ollama_view(2, "b", Residency.LOADED),
        ollama_view(3, "c", Residency.COLD),
    ]
    assert room_of(views, {}, {1: 1, 2: 1})[3] is None
