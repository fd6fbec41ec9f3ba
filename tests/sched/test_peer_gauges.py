"""Peers' in-flight per target key is summed once per change, not per acquire: the sums read
are always those of the live reports at that instant."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pharos.sched.gauges import PEER_SILENCE_S, Gauges, PeerGauges

KEYS = ["http://a:1 m", "http://b:1 m", "http://c:1 m"]


def _summed(reports: dict[int, tuple[Gauges, float]], now: float) -> dict[str, int]:
    """The sum over reports not yet silent, from scratch."""
    out: dict[str, int] = {}
    for gauges, at in reports.values():
        if now - at > PEER_SILENCE_S:
            continue
        for key, n in gauges.inflight.items():
            if n > 0:
                out[key] = out.get(key, 0) + n
    return out


# (step, origin, argument): a report, a leave, or time passing
steps = st.one_of(
    st.tuples(
        st.just("merge"),
        st.integers(1, 3),
        st.dictionaries(st.sampled_from(KEYS), st.integers(-1, 3), max_size=3),
    ),
    st.tuples(st.just("forget"), st.integers(1, 3), st.none()),
    st.tuples(st.just("advance"), st.integers(1, 3), st.sampled_from([0.0, 0.5, 1.0, 2.0, 2.5])),
)


@settings(max_examples=200)
@given(script=st.lists(steps, max_size=30))
def test_the_sums_an_acquire_reads_match_the_live_reports_after_any_history(
    script: list[tuple[str, int, object]],
) -> None:
    peers = PeerGauges()
    reports: dict[int, tuple[Gauges, float]] = {}  # what a reference keeps: the last merge each
    now = 100.0
    seq = 0
    for step, origin, arg in script:
        if step == "merge":
            assert isinstance(arg, dict)
            seq += 1
            peers.merge(origin, Gauges(inflight=arg, seq=seq), now)
            reports[origin] = (Gauges(inflight=arg, seq=seq), now)
        elif step == "forget":
            peers.forget(origin)
            reports.pop(origin, None)
        else:
            assert isinstance(arg, float)
            now += arg
        assert peers.inflight_by_key(now) == _summed(reports, now)


def test_without_a_change_an_acquire_reads_the_sums_already_made() -> None:
    peers = PeerGauges()
    peers.merge(1, Gauges(inflight={KEYS[0]: 2}, seq=1), 10.0)
    first = peers.inflight_by_key(10.5)
    assert peers.inflight_by_key(11.0) is first
    peers.merge(2, Gauges(inflight={KEYS[0]: 1}, seq=1), 11.0)
    assert peers.inflight_by_key(11.0) == {KEYS[0]: 3}
    assert peers.inflight_by_key(12.5) == {KEYS[0]: 1}  # origin 1 silent for 2.5 s
