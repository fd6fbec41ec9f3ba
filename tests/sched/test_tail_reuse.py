"""build_candidates reuses the previous pick's Candidates (issue 13): a reused list must be
exactly what a fresh build gives, and Candidate.has_fields must compare every field, also any
field added later (a field it missed would route on a stale value)."""

from __future__ import annotations

import ast
import random
from pathlib import Path

import pytest

from pharos.engine.types import Residency
from pharos.policy import Candidate
from pharos.policy.types import CANDIDATE_FIELDS
from pharos.prefix import Match, Source
from pharos.sched.candidates import build_candidates
from pharos.state.view import TargetView
from tests.sched.fakes import make_view

TYPES_PY = Path(__file__).resolve().parents[2] / "src" / "pharos" / "policy" / "types.py"

BASE: dict[str, object] = {
    "target_id": 3,
    "capacity": 2,
    "free_slots": 1,
    "queue_ahead": 0,
    "warm": True,
    "kv_usage": 0.5,
    "matched_tokens": 100,
    "prefill_s_per_token": 0.002,
    "load_s": 6.0,
    "service_s": 3.0,
    "fits_if_cold": None,
    "loading": False,
    "evicts_tokens": 0,
    "engine_queued_s": None,
    "evicts_loaded": False,
    "slots_busy_s": None,
    "room_bytes": None,
}
OTHER: dict[str, object] = {
    "target_id": 4,
    "capacity": 4,
    "free_slots": 0,
    "queue_ahead": 2,
    "warm": None,
    "kv_usage": None,
    "matched_tokens": 0,
    "prefill_s_per_token": 0.003,
    "load_s": None,
    "service_s": 2.5,
    "fits_if_cold": True,
    "loading": True,
    "evicts_tokens": 50,
    "engine_queued_s": 0.25,
    "evicts_loaded": True,
    "slots_busy_s": 1.5,
    "room_bytes": 5_000_000_000,
}


def test_has_fields_takes_every_candidate_field_in_order() -> None:
    tree = ast.parse(TYPES_PY.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "has_fields":
            names = tuple(arg.arg for arg in node.args.args[1:])
            assert names == CANDIDATE_FIELDS
            return
    pytest.fail("Candidate.has_fields not found")


def test_has_fields_is_true_for_the_fields_it_was_built_from() -> None:
    candidate = Candidate(**BASE)  # type: ignore[arg-type]
    assert candidate.has_fields(*BASE.values())  # type: ignore[arg-type]


# field: each one changed alone, to OTHER's value
@pytest.mark.parametrize("field", CANDIDATE_FIELDS)
def test_has_fields_is_false_when_any_one_field_differs(field: str) -> None:
    candidate = Candidate(**BASE)  # type: ignore[arg-type]
    changed = {**BASE, field: OTHER[field]}
    assert not candidate.has_fields(*changed.values())  # type: ignore[arg-type]


def test_an_engine_queued_time_equal_in_value_is_the_same_field() -> None:
    candidate = Candidate(**{**BASE, "engine_queued_s": 0.25})  # type: ignore[arg-type]
    recomputed = float("0.25")
    assert candidate.has_fields(*{**BASE, "engine_queued_s": recomputed}.values())  # type: ignore[arg-type]


def random_views(rng: random.Random) -> list[TargetView]:
    return [
        make_view(
            target_id,
            residency=rng.choice((Residency.LOADED, Residency.COLD, Residency.UNKNOWN)),
            running=rng.choice((None, 0, 1, 2)),
            waiting=rng.choice((None, 0, 1)),
            capacity=rng.choice((None, 2, 4)),
            kv_usage=rng.choice((None, 0.3, 0.95)),
            last_fast_scrape_at=rng.choice((None, 10.0)),
        )
        for target_id in range(8)
    ]


def build(
    views: list[TargetView],
    local: dict[int, int],
    ended: dict[int, float],
    matches: dict[int, Match],
    waiting: int,
    previous: list[Candidate] | None,
) -> tuple[list[Candidate], bool]:
    return build_candidates(
        views,
        local_inflight=local,
        peer_inflight={},
        last_reply_end=ended,
        router_waiting=waiting,
        matches=matches,
        default_capacity=2,
        fits_of=lambda _view: True,
        prompt_tokens=400,
        previous=previous,
    )


# seed: 300 steps each, every step changing a little of what the candidates are built from
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_build_from_the_previous_list_equals_a_fresh_build(seed: int) -> None:
    rng = random.Random(seed)
    views = random_views(rng)
    local: dict[int, int] = {}
    ended: dict[int, float] = {}
    matches: dict[int, Match] = {}
    waiting = 0
    previous: list[Candidate] | None = None
    reused_lists = reused_candidates = 0
    for _ in range(300):
        step = rng.randrange(6)
        target = rng.randrange(len(views))
        if step == 0:
            local[target] = local.get(target, 0) + 1
        elif step == 1:
            local.pop(target, None)
        elif step == 2:
            ended[target] = rng.choice((5.0, 20.0))
        elif step == 3:
            matches = {target: Match(rng.choice((400, 1600)), Source.LOCAL)}
        elif step == 4:
            waiting = rng.choice((0, 1))
        elif rng.random() < 0.3:
            views = views[: rng.randint(1, len(views))] if rng.random() < 0.5 else random_views(rng)
        fresh, fresh_free = build(views, local, ended, matches, waiting, None)
        got, got_free = build(views, local, ended, matches, waiting, previous)
        assert got == fresh and got_free == fresh_free
        if previous is not None:
            reused_lists += got is previous
            reused_candidates += sum(1 for a, b in zip(got, previous, strict=False) if a is b)
            assert (got is previous) == (got == previous)
        previous = got
    assert reused_lists > 30 and reused_candidates > 1000, (reused_lists, reused_candidates)


# matched: the targets the prefix index names; ids 1, 33 and 65 share a bit of the filter
@pytest.mark.parametrize("matched", [[33], [1, 65], [65], [1, 33, 65], []])
def test_only_the_matched_targets_get_matched_tokens_whatever_bits_they_share(
    matched: list[int],
) -> None:
    views = [make_view(target_id) for target_id in (1, 2, 33, 64, 65, 97)]
    matches = {target_id: Match(400 * (target_id + 1), Source.LOCAL) for target_id in matched}
    candidates, _ = build(views, {}, {}, matches, 0, None)
    got = {c.target_id: c.matched_tokens for c in candidates if c.matched_tokens}
    assert got == {target_id: 100 * (target_id + 1) for target_id in matched}
