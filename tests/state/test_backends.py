"""set_backends diffing, draining and restore, ejection, readiness, status."""

from __future__ import annotations

import logging

import pytest

from pharos.engine.types import Kind, Load, Residency
from tests.state.fakes import URL, URL_B, make_state, snap, spec

LOADED = Residency.LOADED


async def _two_backends():
    h = make_state()
    h.engine.snapshots[URL] = snap(models={"m": LOADED})
    h.engine.snapshots[URL_B] = snap(models={"m": LOADED, "n": LOADED})
    h.state.set_backends([spec(), spec(URL_B)])
    await h.state.run_round(URL)
    await h.state.run_round(URL_B)
    return h


async def test_unchanged_spec_keeps_state() -> None:
    h = await _two_backends()
    target_id = h.state.target_id_of(f"{URL} m")
    h.state.observe(target_id, service_s=2.0)
    h.state.set_backends([spec(), spec(URL_B)])
    h.clock.advance(1.0)
    await h.state.run_round(URL)
    assert h.engine.calls.count((URL, "resolve")) == 1  # kept its plan: no new resolve
    view = h.state.target(target_id, h.clock.now())
    assert view is not None and view.service_s == 2.0 and view.up


async def test_removed_backend_drains_and_is_restored_with_its_state() -> None:
    h = await _two_backends()
    target_id = h.state.target_id_of(f"{URL_B} n")
    h.state.observe(target_id, load_s=4.0)
    h.state.set_backends([spec()])
    view = h.state.target(target_id, h.clock.now())
    assert view is not None
    assert view.draining and not view.up
    assert [v.draining for v in h.state.targets_for_model("n", h.clock.now())] == [True]
    await h.state.run_round(URL_B)  # no scraper for a removed backend
    assert h.engine.calls.count((URL_B, "resolve")) == 1

    h.state.set_backends([spec(), spec(URL_B)])
    view = h.state.target(target_id, h.clock.now())
    assert view is not None
    assert not view.draining and view.up
    assert view.load_s == 4.0
    assert h.state.target_id_of(f"{URL_B} n") == target_id
    h.clock.advance(1.0)
    await h.state.run_round(URL_B)
    assert h.engine.calls.count((URL_B, "resolve")) == 1  # the plan came back too


async def test_backend_back_with_another_spec_starts_fresh() -> None:
    h = await _two_backends()
    target_id = h.state.target_id_of(f"{URL_B} n")
    h.state.observe(target_id, load_s=4.0)
    h.state.set_backends([spec()])
    h.state.set_backends([spec(), spec(URL_B, kind=Kind.OLLAMA)])
    assert h.state.target(target_id, h.clock.now()) is None  # not seen by the new runtime yet
    await h.state.run_round(URL_B)
    assert h.engine.calls.count((URL_B, "resolve")) == 2
    view = h.state.target(target_id, h.clock.now())
    assert view is not None
    assert view.target_id == target_id  # the ID is stable
    assert view.load_s is None
    assert view.kind is Kind.OLLAMA
    assert view.generation == 1  # its old prefix entries no longer count


async def test_only_the_last_32_removed_are_remembered() -> None:
    h = make_state()
    urls = [f"http://gpu-{i}:8000" for i in range(34)]
    for url in urls:
        h.engine.snapshots[url] = snap(models={"m": LOADED})
    h.state.set_backends([spec(url) for url in urls])
    for url in urls:
        await h.state.run_round(url)
    first = h.state.target_id_of(f"{urls[0]} m")
    last = h.state.target_id_of(f"{urls[-1]} m")
    assert first is not None and last is not None
    h.state.observe(first, service_s=1.0)
    h.state.observe(last, service_s=1.0)
    for index in range(len(urls)):  # removed one by one, oldest first
        h.state.set_backends([spec(u) for u in urls[index + 1 :]])
    assert len(h.state.backends()) == 32
    h.state.set_backends([spec(urls[0]), spec(urls[-1])])
    assert h.state.target(first, h.clock.now()) is None  # forgotten: starts fresh
    view = h.state.target(last, h.clock.now())
    assert view is not None and view.service_s == 1.0


async def test_changed_spec_re_resolves() -> None:
    h = await _two_backends()
    h.state.set_backends([spec(capacity=2), spec(URL_B)])
    await h.state.run_round(URL)
    assert h.engine.calls.count((URL, "resolve")) == 2
    (view,) = h.state.targets_for_model("m", h.clock.now())[:1]
    assert view.config_capacity == 2


async def test_eject_and_recovery_log_once_each_way(caplog: pytest.LogCaptureFixture) -> None:
    h = await _two_backends()
    caplog.set_level(logging.INFO, logger="pharos.state")
    h.state.eject(URL, "connection refused")
    h.state.eject(URL, "connection refused")
    (view,) = [v for v in h.state.targets_for_model("m", h.clock.now()) if v.backend_url == URL]
    assert not view.up
    h.engine.down.add(URL)
    for _ in range(3):
        h.clock.advance(1.0)
        await h.state.run_round(URL)
    (status,) = [s for s in h.state.backends() if s.url == URL]
    assert status.reachable is False and status.ejected == "connection refused"
    h.engine.down.discard(URL)
    for _ in range(3):
        h.clock.advance(1.0)
        await h.state.run_round(URL)
    (view,) = [v for v in h.state.targets_for_model("m", h.clock.now()) if v.backend_url == URL]
    assert view.up
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [f"backend {URL} down: connection refused", f"backend {URL} up again"]


async def test_unreachable_rounds_log_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="pharos.state")
    h = await _two_backends()
    h.engine.down.add(URL_B)
    for _ in range(6):
        h.clock.advance(1.0)
        await h.state.run_round(URL_B)
    lines = [r.getMessage() for r in caplog.records if "plan:" not in r.getMessage()]
    assert lines == [f"backend {URL_B} down: unreachable"]  # the plan lines came at startup
    assert h.decisions.count((URL_B, "scrape", "unreachable")) == 6
    (view, *_) = h.state.targets_of_backend(URL_B, h.clock.now())
    assert view.up  # the last full round (5 s ago) is still fresh
    h.clock.advance(10.0)
    (view, *_) = h.state.targets_of_backend(URL_B, h.clock.now())
    assert not view.up


def test_not_ready_before_backends_are_set() -> None:
    h = make_state()
    assert not h.state.ready


def test_empty_first_set_is_ready() -> None:
    h = make_state()
    h.state.set_backends([])
    assert h.state.ready


async def test_ready_latches_after_first_round_even_when_backend_is_dead() -> None:
    h = make_state()
    h.engine.snapshots[URL] = snap(models={"m": LOADED})
    h.engine.down.add(URL_B)
    h.state.set_backends([spec(), spec(URL_B)])
    await h.state.run_round(URL)
    assert not h.state.ready
    await h.state.run_round(URL_B)  # resolve fails: the round still finished
    assert h.state.ready
    assert (URL_B, "resolve", "failed") in h.decisions
    h.state.set_backends([spec(), spec(URL_B), spec("http://later:1")])
    assert h.state.ready  # a backend found later does not unready the instance


async def test_removing_a_pending_backend_unblocks_ready() -> None:
    h = make_state()
    h.engine.snapshots[URL] = snap(models={"m": LOADED})
    h.state.set_backends([spec(), spec(URL_B)])
    await h.state.run_round(URL)
    h.state.set_backends([spec()])
    assert h.state.ready


async def test_on_round_called_after_every_round() -> None:
    h = await _two_backends()
    h.engine.down.add(URL)
    await h.state.run_round(URL)
    assert h.rounds == [URL, URL_B, URL]


async def test_backend_status() -> None:
    h = await _two_backends()
    h.engine.snapshots[URL] = snap(version="2.0", models={"m": LOADED}, loads={"": Load(running=1)})
    h.clock.advance(1.0)
    await h.state.run_round(URL)
    h.clock.advance(0.5)
    (status,) = [s for s in h.state.backends() if s.url == URL]
    assert status.kind is Kind.VLLM
    assert status.version == "1.0"  # fast rounds do not read the version
    assert status.full_round_age_s == pytest.approx(1.5)
    assert status.fast_round_age_s == pytest.approx(0.5)
    assert status.up and status.reachable and status.ejected is None
    assert status.log_feed_up is None
    assert not status.draining
    assert len(status.target_ids) == 1
