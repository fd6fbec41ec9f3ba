"""The acquire fast path's compiled helpers (issue 13): what replaced the scheduler's closure
and its per-acquire dict of generations must answer exactly as those did."""

from __future__ import annotations

from collections.abc import Sequence

from pharos.engine.types import Residency
from pharos.sched.candidates import Generations, usable_views
from pharos.sched.fits import FitsIfCold, backend_occupancy, fits_if_cold
from pharos.state.view import TargetView
from tests.sched.fakes import GB, make_view


def test_generations_names_a_usable_targets_generation_and_no_other() -> None:
    usable = [make_view(1, generation=4), make_view(7, generation=9)]
    generation_of = Generations(usable)
    # target id | generation
    cases = [
        (1, 4),
        (7, 9),
        (2, None),  # not a candidate: the index's slot for it must not match
    ]
    for target_id, generation in cases:
        assert generation_of(target_id) == generation, target_id


def test_usable_views_leave_out_down_draining_and_excluded_targets() -> None:
    views = [
        make_view(1),
        make_view(2, up=False),
        make_view(3, draining=True),
        make_view(4),
        make_view(5),
    ]
    # excluded ids (a retry) | usable ids
    cases = [
        (frozenset(), [1, 4, 5]),
        (frozenset({4}), [1, 5]),
        (frozenset({2, 3, 9}), [1, 4, 5]),  # already out, or not a view at all
    ]
    for exclude, expected in cases:
        assert [v.target_id for v in usable_views(views, exclude)] == expected, exclude


class BackendViews:
    """targets_of_backend over fixed views, counting the calls."""

    def __init__(self, views: Sequence[TargetView]) -> None:
        self.views = views
        self.asked: list[tuple[str, float]] = []

    def __call__(self, backend_url: str, now: float) -> Sequence[TargetView]:
        self.asked.append((backend_url, now))
        return [v for v in self.views if v.backend_url == backend_url]


def test_fits_if_cold_reads_each_backend_once_and_answers_as_the_plain_functions() -> None:
    a, b = "http://a", "http://b"
    views = [
        make_view(1, backend=a, residency=Residency.COLD, size_bytes=6 * GB, memory_bytes=16 * GB),
        make_view(2, backend=a, residency=Residency.COLD, size_bytes=12 * GB, memory_bytes=16 * GB),
        make_view(3, backend=a, residency=Residency.LOADED, size_bytes=8 * GB),  # busy: 1 lease
        make_view(4, backend=b, residency=Residency.COLD, size_bytes=4 * GB, memory_bytes=8 * GB),
        make_view(5, backend=b, residency=Residency.LOADING, size_bytes=5 * GB),
    ]
    local: dict[int, int] = {3: 1}
    peer: dict[str, int] = {}
    ended: dict[int, float] = {}
    asked_by_fits = BackendViews(views)
    fits_of = FitsIfCold(
        asked_by_fits, 12.5, local_inflight=local, peer_inflight=peer, last_reply_end=ended
    )
    # target | fits: memory minus what busy models hold
    cases = [
        (1, True),  # 6 GB cold on a 16 GB host where a busy 8 GB model sits
        (2, False),  # 12 GB does not fit beside it
        (4, False),  # 4 GB on an 8 GB host with a 5 GB model loading
    ]
    for target_id, fits in cases:
        view = views[target_id - 1]
        others = backend_occupancy(
            [v for v in views if v.backend_url == view.backend_url],
            local_inflight=local,
            peer_inflight=peer,
            last_reply_end=ended,
        )
        assert fits_if_cold(view, others) is fits, target_id
        assert fits_of(view) is fits, target_id
    assert asked_by_fits.asked == [(a, 12.5), (b, 12.5)]  # once a backend, at the pick's time
