"""Multi-instance behavior (spec §14 layer 3): three instances, an in-memory peer network
that can cut one off, ticks stepped by hand and one injected clock."""

from __future__ import annotations

import asyncio
import logging

import aiohttp
import pytest

from pharos.peer.table import PeerStatus
from pharos.prefix import Source
from tests.peer.mesh import ADDRESSES, MODEL, Key, Mesh, MeshFactory, until

A, B, C = ADDRESSES
LONG_SYSTEM = "You answer questions about the history of lighthouses. " * 60


def turn(n: int) -> list[dict[str, str]]:
    """A conversation after n user turns: each turn extends the previous one's prefix."""
    messages = [{"role": "system", "content": LONG_SYSTEM}]
    for i in range(n):
        messages.append({"role": "user", "content": f"question {i}: why the Pharos of Alexandria?"})
        if i < n - 1:
            messages.append({"role": "assistant", "content": f"answer {i}: it was tall."})
    return messages


async def three(mesh: MeshFactory, **kw: object) -> Mesh:
    m: Mesh = await mesh(**kw)
    for origin, address in enumerate(ADDRESSES, start=1):
        await m.start(address, origin=origin)
    await m.tick()  # everyone learns everyone's origin; the self link is found and skipped
    return m


def peer_of(m: Mesh, at: str, address: str) -> PeerStatus:
    row: PeerStatus = m[at].status(address)
    return row


async def peer_rows_html(m: Mesh, at: str) -> dict[str, str]:
    """The Peers table rows of `at`'s /status page, by peer address."""
    async with m.client.get(f"{m[at].base}/status") as resp:
        assert resp.status == 200
        page = await resp.text()
    section = page[page.index('<section id="peers">') :].split("</section>")[0]
    return {
        address: section[section.index(f">{address}</td>") :].split("</tr>")[0]
        for address in ADDRESSES
        if f">{address}</td>" in section
    }


async def test_turn_two_through_b_follows_turn_ones_prefix_and_is_labelled_peer(
    mesh: MeshFactory,
) -> None:
    m = await three(mesh)
    status, _ = await m.chat(A, turn(1))
    assert status == 200
    await until(lambda: len(m[A].done) == 1, "turn 1 finished on A")
    first = m[A].done[0]
    assert first.target_key is not None
    await m.tick(A)
    status, _ = await m.chat(B, turn(2))
    assert status == 200
    await until(lambda: len(m[B].done) == 1, "turn 2 finished on B")
    second = m[B].done[0]
    assert second.target_key == first.target_key
    assert second.prefix_source == Source.PEER.value
    assert ("prefix", "predicted_hit") in second.decisions


async def test_an_instance_never_sends_to_itself_and_lists_only_its_peers(
    mesh: MeshFactory,
) -> None:
    m = await three(mesh)
    assert sorted(s.address for s in m[A].pharos.peers.status()) == [B, C]
    sent = len(m.network.requests)
    await m.tick(A)
    assert [(src, dst) for src, dst, _ in m.network.requests[sent:]] == [(A, B), (A, C)]
    assert peer_of(m, A, B).origin == m[B].origin and peer_of(m, A, B).up is True


async def test_a_killed_instance_fails_only_its_own_stream_and_holds_the_slot_for_2s(
    mesh: MeshFactory,
) -> None:
    m = await three(mesh, engines=1)
    fake = m.fakes[0]
    fake.hold(after_tokens=2)
    body = {"model": MODEL, "stream": True, "messages": turn(1)}
    on_a = await m.client.post(f"{m[A].base}/v1/chat/completions", json=body)
    assert (await on_a.content.readuntil(b"\n\n")).startswith(b"data: ")
    on_b = await m.client.post(f"{m[B].base}/v1/chat/completions", json=body)
    assert (await on_b.content.readuntil(b"\n\n")).startswith(b"data: ")
    await m.tick(A)
    (view,) = m[B].pharos.state.targets_for_model(MODEL, m.clock.now())
    assert m[B].pharos.sched.inflight_cluster(view.target_id, view.key) == 2

    await m.kill(A)
    with pytest.raises((aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError)):
        await on_a.read()
    fake.release()
    assert (await on_b.read()).rstrip().endswith(b"data: [DONE]")
    assert on_b.status == 200
    await until(lambda: len(m[B].done) == 1, "B's stream finished")
    # A is silent: its last report still holds its slot on B until 2 s have passed.
    m.clock.advance(1.9)
    assert m[B].pharos.sched.inflight_cluster(view.target_id, view.key) == 1
    m.clock.advance(0.2)
    assert m[B].pharos.sched.inflight_cluster(view.target_id, view.key) == 0
    status, _ = await m.chat(C, turn(1))
    assert status == 200


async def test_a_graceful_leave_drops_its_gauges_at_once(mesh: MeshFactory) -> None:
    m = await three(mesh, engines=1)
    fake = m.fakes[0]
    fake.hold(after_tokens=2)
    body = {"model": MODEL, "stream": True, "messages": turn(1)}
    on_a = await m.client.post(f"{m[A].base}/v1/chat/completions", json=body)
    await on_a.content.readuntil(b"\n\n")
    await m.tick(A)
    (view,) = m[B].pharos.state.targets_for_model(MODEL, m.clock.now())
    assert m[B].pharos.sched.inflight_cluster(view.target_id, view.key) == 1
    fake.release()
    await on_a.read()
    # The reply ended after the last tick; its leaving delta carries the request's cells.
    await until(lambda: len(m[A].done) == 1, "A's stream finished")
    requests_on_a = m[A].pharos.usage.today_by_key()
    await m.leave(A)
    assert m[B].pharos.sched.inflight_cluster(view.target_id, view.key) == 0
    assert m[B].pharos.usage.today_by_key() == requests_on_a
    assert m[C].pharos.usage.today_by_key() == requests_on_a


async def test_usage_counted_on_a_shows_on_b_after_one_tick(mesh: MeshFactory) -> None:
    m = await three(mesh)
    assert (await m.chat(A, turn(1)))[0] == 200
    await until(lambda: len(m[A].done) == 1, "A's reply finished")
    tokens = m[A].pharos.usage.tokens_today("anonymous")
    assert tokens > 0
    assert m[B].pharos.usage.tokens_today("anonymous") == 0
    await m.tick(A)
    assert m[B].pharos.usage.tokens_today("anonymous") == tokens
    assert m[C].pharos.usage.tokens_today("anonymous") == tokens


async def test_a_restart_restores_prefix_stats_and_usage_from_its_peers(
    mesh: MeshFactory,
) -> None:
    m = await three(mesh)
    assert (await m.chat(A, turn(1)))[0] == 200
    await until(lambda: len(m[A].done) == 1, "turn 1 finished")
    await m.tick(A)
    tokens = m[A].pharos.usage.tokens_today("anonymous")
    entries = len(m[A].pharos.prefix)
    assert entries > 0 and m[A].pharos.state.export_stats()
    await m.leave(A)

    restarted = await m.start(A, origin=11)  # a restart is a new origin
    assert len(restarted.pharos.prefix) == entries
    assert restarted.pharos.usage.tokens_today("anonymous") == tokens
    assert {r.key for r in restarted.pharos.state.export_stats()} >= {
        r.key for r in m[B].pharos.state.export_stats()
    }
    await m.tick()
    assert (await m.chat(A, turn(2)))[0] == 200
    await until(lambda: len(restarted.done) == 1, "turn 2 finished on the restarted A")
    assert restarted.done[0].prefix_source in (Source.RESTORED.value, Source.PEER.value)
    assert ("prefix", "predicted_hit") in restarted.done[0].decisions


async def test_a_partition_keeps_all_three_serving_and_heals_by_pulling_snapshots(
    mesh: MeshFactory,
) -> None:
    m = await three(mesh)
    m.network.cut.add(A)
    for address in ADDRESSES:
        assert (await m.chat(address, turn(1)))[0] == 200
    await m.tick()
    assert peer_of(m, B, A).up is False and peer_of(m, A, B).up is False
    # What A learned while cut off reaches B only through A's snapshot after the heal.
    conversation = [{"role": "system", "content": "Only A saw this. " * 200}, *turn(1)[1:]]
    assert (await m.chat(A, conversation))[0] == 200
    await until(lambda: len(m[A].done) == 2, "A's replies finished")
    learned_on_a = m[A].done[1].target_key
    await m.tick(A)  # the op to B is lost: B is unreachable
    m.network.cut.clear()
    pulls = len([r for r in m.network.requests if r[2] == "/peer/snapshot"])
    await m.tick()
    snapshot_pulls = [r for r in m.network.requests if r[2] == "/peer/snapshot"][pulls:]
    assert {(src, dst) for src, dst, _ in snapshot_pulls} >= {(B, A), (C, A), (A, B), (A, C)}
    assert peer_of(m, B, A).up is True
    follow_up = [*conversation, {"role": "assistant", "content": "yes"}]
    follow_up.append({"role": "user", "content": "and then?"})
    assert (await m.chat(B, follow_up))[0] == 200
    await until(lambda: len(m[B].done) == 2, "B's follow-up finished")
    assert m[B].done[1].target_key == learned_on_a
    assert m[B].done[1].prefix_source == Source.RESTORED.value


async def test_quotas_are_exact_connected_one_per_side_partitioned_and_refused_healed(
    mesh: MeshFactory,
) -> None:
    key = Key("team", "sk-team", rpm=3)
    m = await three(mesh, keys=(key,))
    # Connected, a tick between requests: the cluster admits exactly the quota.
    statuses = []
    for i in range(6):
        address = ADDRESSES[i % 3]
        statuses.append((await m.chat(address, turn(1), secret=key.secret))[0])
        await m.tick()
    assert statuses == [200, 200, 200, 429, 429, 429]

    m.clock.advance(120)  # a fresh window
    await m.tick()
    m.network.cut.add(A)
    cut_at = m.clock.time()
    side_a = [(await m.chat(A, turn(1), secret=key.secret))[0] for _ in range(4)]
    side_bc = []
    for i in range(4):
        side_bc.append((await m.chat((B, C)[i % 2], turn(1), secret=key.secret))[0])
        await m.tick(B, C)
    assert side_a == [200, 200, 200, 429]
    assert side_bc == [200, 200, 200, 429]
    m.clock.advance(5)
    await m.tick()
    heard = peer_of(m, A, B).last_heard_s
    assert heard is not None and heard <= cut_at  # A's view of B stops at the cut

    m.network.cut.clear()
    await m.tick()
    for address in ADDRESSES:
        assert (await m.chat(address, turn(1), secret=key.secret))[0] == 429


async def test_mismatched_backend_or_key_sets_are_flagged_and_logged_once(
    mesh: MeshFactory, caplog: pytest.LogCaptureFixture
) -> None:
    m: Mesh = await mesh()
    await m.start(A, origin=1)
    await m.start(B, origin=2)
    await m.start(C, origin=3, keys=(Key("other", "sk-other"),))
    caplog.set_level(logging.WARNING, logger="pharos.peer")
    for _ in range(3):
        await m.tick()
    assert peer_of(m, A, C).mismatch is True
    assert peer_of(m, C, A).mismatch is True
    assert peer_of(m, A, B).mismatch is False
    logged = [r.getMessage() for r in caplog.records if "differ from ours" in r.getMessage()]
    # Once per pair over three ticks: A and B about C, C about A and about B.
    about_c = [line for line in logged if f"origin {m[C].origin}:" in line]
    assert len(about_c) == 2 and len(logged) == 4
    rows = await peer_rows_html(m, A)
    assert "mismatch: backends, keys or usage zone differ" in rows[C]
    assert "mismatch" not in rows[B]


async def test_a_different_usage_zone_is_a_mismatch(mesh: MeshFactory) -> None:
    m: Mesh = await mesh()
    await m.start(A, origin=1)
    await m.start(B, origin=2, timezone="Asia/Bangkok")
    await m.tick()
    await m.tick()
    assert peer_of(m, A, B).mismatch is True


async def test_an_incompatible_protocol_is_flagged_on_both_sides_and_cleared_after_upgrade(
    mesh: MeshFactory,
) -> None:
    m: Mesh = await mesh()
    await m.start(A, origin=1)
    await m.start(B, origin=2, proto=2, pull=False)
    await m.tick()
    assert peer_of(m, A, B).proto_mismatch is True
    assert peer_of(m, B, A).proto_mismatch is True
    assert m[A].pharos.sched.peer_totals().inflight == {}
    assert "incompatible protocol" in (await peer_rows_html(m, A))[B]
    await m.leave(B)
    await m.start(B, origin=3)  # upgraded
    await m.tick()
    await m.tick()
    assert peer_of(m, A, B).proto_mismatch is False
    assert peer_of(m, B, A).proto_mismatch is False


async def test_a_peer_request_without_the_secret_is_refused(mesh: MeshFactory) -> None:
    m: Mesh = await mesh()
    await m.start(A, origin=1)
    await m.start(B, origin=2, secret=b"not-the-shared-one")
    assert (await m.chat(B, turn(1)))[0] == 200
    await until(lambda: len(m[B].done) == 1, "B's reply finished")
    await m.tick(B)
    assert peer_of(m, B, A).up is False and peer_of(m, B, A).error == "refused our secret"
    assert m[A].pharos.usage.tokens_today("anonymous") == 0
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "peer-secret"}):
        reply = await m[A].node.handle("GET", "/peer/snapshot", headers, b"")
        assert reply.status == 401 and reply.origin == m[A].origin


async def test_a_full_pending_list_drops_ops_and_counts_them_per_peer(mesh: MeshFactory) -> None:
    m = await three(mesh)
    m.network.cut.add(C)
    table = m[A].pharos.peers
    (link_c,) = [link for link in table.links() if link.address == C]
    link_c.pending_limit = 3
    for _ in range(5):
        assert (await m.chat(A, turn(1)))[0] == 200
    await until(lambda: len(m[A].done) == 5, "A's replies finished")
    assert peer_of(m, A, C).dropped_ops == 2
    assert peer_of(m, A, B).dropped_ops == 0


async def test_a_cut_instance_keeps_serving_its_clients(mesh: MeshFactory) -> None:
    m = await three(mesh)
    m.network.cut.add(B)
    results = await asyncio.gather(*(m.chat(B, turn(1)) for _ in range(3)))
    assert [status for status, _ in results] == [200, 200, 200]
    await m.tick()  # a failed send is the peer's state, never an error of ours
    assert peer_of(m, B, A).up is False and peer_of(m, A, B).up is False
    assert peer_of(m, A, C).up is True


async def test_metrics_and_status_show_every_peer(mesh: MeshFactory) -> None:
    m = await three(mesh)
    m.network.cut.add(C)
    await m.tick()
    async with m.client.get(f"{m[A].base}/metrics") as resp:
        text = await resp.text()
    assert 'pharos_peer_up{peer="b:8081"} 1.0' in text
    assert 'pharos_peer_up{peer="c:8081"} 0.0' in text
    assert 'pharos_peer_mismatch{peer="b:8081"} 0.0' in text
    assert 'pharos_peer_proto_mismatch{peer="b:8081"} 0.0' in text
    assert 'pharos_peer_dropped_prefix_ops{peer="c:8081"} 0.0' in text
    heard = {
        line.split('"')[1]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("pharos_peer_last_heard_timestamp_seconds{")
    }
    assert heard == {"b:8081": m.clock.time(), "c:8081": m.clock.time()}  # C: before the cut
    assert 'pharos_peer_up{peer="a:8081"}' not in text  # ourselves
    async with m.client.get(f"{m[A].base}/status") as resp:
        assert resp.status == 200, await resp.text()
        page = await resp.text()
    peers = page[page.index('<section id="peers">') :]
    assert "b:8081" in peers and "c:8081" in peers
    assert f"{m[B].origin:016x}" in peers
    assert "down" in peers and "unreachable" in peers
