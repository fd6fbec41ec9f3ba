"""The peer series of spec §13 and the peers section of /status, read from the peer table
at scrape time."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import tzinfo

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pharos.peer.table import PeerStatus

PeerStatuses = Callable[[], Sequence[PeerStatus]]


class PeerCollector(Collector):
    def __init__(self, peers: PeerStatuses) -> None:
        self._peers = peers

    def collect(self) -> Iterator[Metric]:
        labels = ["peer"]
        up = GaugeMetricFamily("pharos_peer_up", "1 while our deltas reach the peer", labels=labels)
        mismatch = GaugeMetricFamily(
            "pharos_peer_mismatch",
            "1 when the peer's static backends, keys or usage zone differ from ours",
            labels=labels,
        )
        proto = GaugeMetricFamily(
            "pharos_peer_proto_mismatch",
            "1 when the peer speaks an incompatible wire protocol: the two share no state",
            labels=labels,
        )
        dropped = GaugeMetricFamily(
            "pharos_peer_dropped_prefix_ops",
            "Prefix ops dropped because the peer's pending list was full",
            labels=labels,
        )
        heard = GaugeMetricFamily(
            "pharos_peer_last_heard_timestamp_seconds",
            "When the peer's last delta arrived (unix seconds)",
            labels=labels,
        )
        for peer in self._peers():
            label = [peer.address]
            up.add_metric(label, 1.0 if peer.up is True else 0.0)
            mismatch.add_metric(label, 1.0 if peer.mismatch else 0.0)
            proto.add_metric(label, 1.0 if peer.proto_mismatch else 0.0)
            dropped.add_metric(label, float(peer.dropped_ops))
            if peer.last_heard_s is not None:
                heard.add_metric(label, peer.last_heard_s)
        yield from (up, mismatch, proto, dropped, heard)


@dataclass(frozen=True, slots=True)
class PeerRow:
    address: str
    origin: str
    state: str  # up | down | not tried yet | incompatible protocol
    last_heard: str
    mismatch: bool
    proto_mismatch: bool
    dropped_ops: int
    error: str | None


def peer_rows(
    peers: Sequence[PeerStatus], now_wall_s: float, zone: tzinfo | None
) -> tuple[PeerRow, ...]:
    rows = []
    for peer in peers:
        if peer.proto_mismatch:
            state = "incompatible protocol"
        elif peer.up is None:
            state = "not tried yet"
        else:
            state = "up" if peer.up else "down"
        if peer.last_heard_s is None:
            heard = "never"
        else:
            ago = max(0.0, now_wall_s - peer.last_heard_s)
            stamp = dt.datetime.fromtimestamp(peer.last_heard_s, zone).strftime("%H:%M:%S")
            heard = f"{ago:.1f}s ago ({stamp})"
        rows.append(
            PeerRow(
                address=peer.address,
                origin="" if peer.origin is None else f"{peer.origin:016x}",
                state=state,
                last_heard=heard,
                mismatch=peer.mismatch,
                proto_mismatch=peer.proto_mismatch,
                dropped_ops=peer.dropped_ops,
                error=peer.error,
            )
        )
    return tuple(rows)
