"""A key's home for its next new conversation (issue 15, the held-out seeds 6-20).

A person opens one chat after another. Each new one is cache-neutral (it shares at most the
system prompt), so cost sent it to whichever target was least utilized at that moment, and a
few users' chats piled onto one host while another's slots held chats nobody would continue.
Sending the key's next chat where its last one ended (unless another target saves more than
PolicyConfig.away_s) keeps each person's chats in the slots and host cache their own old
chat occupies, as sticky sessions do, while a real saving still moves it. A key that has had
two of its requests in flight at once is shared (one Open WebUI, `make scenario`'s anonymous
key): it gets no home, since one home would herd all its users onto one target. Instead its
new chats are spread by the conversations live on each target (`conversations`,
PolicyConfig.spread_s). A person's first chat, which decides where
their later chats go home to, is spread by the people on each target (`people`,
PolicyConfig.person_s).
"""

from __future__ import annotations

from collections.abc import Mapping

from pharos.prefix import Chain, Match
from pharos.sched.leases_on import LeasesOn

AFFINITY_WINDOW_S = 120.0
"""A conversation whose last reply ended this long ago no longer counts: the simulator's users
think 5-30 s between turns and open the next chat a few seconds after the last reply."""

SPREAD_WINDOW_S = 60.0
"""A conversation whose last reply ended within this counts as live on its target for a shared
key's new conversation (KeyHomes.conversations). `make scenario`'s client thinks 2.5-15 s
between turns (x0.5), 4 turns a chat. Comparisons lost over seeds 1-20 at spread_s 0.1:
30 s -> 154 (seeds 6-10 rise), 60 s -> 155 (docs/routing-log.md, "A shared key's new chats
spread")."""

MAX_KEYS = 4096
"""Keys kept before the expired ones are swept: the map never grows with keys gone quiet."""


def is_new_conversation(chain: Chain, matches: Mapping[int, Match]) -> bool:
    """No target holds more of the prompt than its first message (the system prompt, or the
    first user message of a chat without one), and the prompt has more than that message."""
    if len(chain.hashes) < 2:
        return False
    first_bytes = chain.cum_bytes[0]
    return all(match.matched_bytes <= first_bytes for match in matches.values())


class KeyHomes:
    """Per API key, each conversation whose reply ended within the window: its last link, the
    target it ended on, when."""

    def __init__(self, window_s: float = AFFINITY_WINDOW_S, max_keys: int = MAX_KEYS) -> None:
        self._window_s = window_s
        self._max_keys = max_keys
        self._by_key: dict[str, list[tuple[int, int, float]]] = {}
        self._inflight: dict[str, int] = {}
        self._side_callers: set[str] = set()
        self._shared: set[str] = set()
        self._opening = LeasesOn()  # spread new conversations in flight (`opened`)

    def side_call_from(self, key: str) -> None:
        """`key` sent a side call (a title or tags call after a reply): it is an Open WebUI,
        whose one key carries every person using it (README "Open WebUI"), so it gets no home.
        sharegpt-webui, 20 seeds: 6 comparisons lost with homes there, 5 without (main 5)."""
        self._side_callers.add(key)

    def started(self, key: str) -> None:
        """A request of `key`'s that is not a side call went out. One while another of the
        key's is in flight: several people share the key (a person waits for each reply)."""
        inflight = self._inflight.get(key, 0)
        if inflight > 0:
            self._shared.add(key)
        self._inflight[key] = inflight + 1

    def shared(self, key: str) -> bool:
        """`key` has had two requests that are not side calls in flight at once: `make
        scenario`'s anonymous key, or a gateway's, carries several people."""
        return key in self._shared

    def one_person(self, key: str) -> bool:
        """`key` is one person's as far as we know: never shared, never a side caller."""
        return key not in self._shared and key not in self._side_callers

    def opened(self, lease: object, target_id: int) -> None:
        """A new conversation placed by `conversations` or `people` (a shared key's, or a
        person's first) went to `target_id`: its first turn, in flight."""
        self._opening.add(lease, target_id)

    def closed(self, lease: object) -> None:
        """A lease ended; if `opened` counted it, it counts no longer (its reply, if any, is an
        `ended` conversation now)."""
        self._opening.remove(lease)

    def conversations(self, now: float, window_s: float = SPREAD_WINDOW_S) -> dict[int, int]:
        """Per target, the conversations live there: of every key, those whose last reply ended
        within `window_s`, and the shared keys' new ones in flight (`opened`).

        Why: a key many people share gets no home, and its new chats went wherever a slot was
        free at that moment, so conversations piled up on one engine while the other had few
        (real-equal seed 6: 30.8 s of router queue wait, 12.3 s when spread by this count)."""
        since = now - window_s
        out = self._opening.counts()
        for entries in self._by_key.values():
            for _, target_id, ended_at in entries:
                if ended_at >= since:
                    out[target_id] = out.get(target_id, 0) + 1
        return out

    def newcomer(self, key: str) -> bool:
        """No conversation of `key`'s has ended here (since its entry was last swept) and none
        of its requests is in flight: its first chat."""
        return key not in self._by_key and key not in self._inflight

    def people(self, now: float) -> dict[int, int]:
        """Per target, the keys whose latest conversation ended there within the window, and the
        first chats in flight (`opened`): where each person's next chat goes home to.

        Why: a person's first chat went where a slot was free the moment they arrived, and
        their later chats went home, so an early imbalance held for the run (chat seed 20:
        four of six people on e0, 93 turns there to e1's 54; sticky's even split of
        the six beat cost's p50 and p95, docs/routing-log.md, "A person's first chat")."""
        since = now - self._window_s
        out = self._opening.counts()
        for entries in self._by_key.values():
            _, target_id, ended_at = entries[-1]  # `ended` appends: the last is the latest
            if ended_at >= since:
                out[target_id] = out.get(target_id, 0) + 1
        return out

    def left(self, key: str) -> None:
        """One of `key`'s requests counted by `started` ended, replied or not."""
        left = self._inflight.get(key, 0) - 1
        if left > 0:
            self._inflight[key] = left
        else:
            self._inflight.pop(key, None)

    def __len__(self) -> int:
        return len(self._by_key)

    def ended(self, key: str, chain: Chain, target_id: int, now: float) -> None:
        """A reply of `key`'s conversation (`chain`) ended on `target_id`: it replaces the
        conversation's earlier entry (a chain holds every link of its earlier turns)."""
        if not chain.hashes:
            return
        links = set(chain.hashes)
        since = now - self._window_s
        kept = [e for e in self._by_key.get(key, ()) if e[2] >= since and e[0] not in links]
        kept.append((chain.hashes[-1], target_id, now))
        self._by_key[key] = kept
        if len(self._by_key) > self._max_keys:
            self._sweep(since)

    def home_of(self, key: str, now: float) -> int:
        """The target the key's latest conversation in the window ended on; -1 with none, for
        a shared key or a side caller, or while one of the key's requests is in flight: `make
        scenario`'s one key had a single ended conversation while its other five users' first
        turns were arriving, and each went home (real-speed: 10 -> 7 comparisons lost, by
        herding; with this check its output is main's byte for byte).

        The latest, not the only one: a person who opens chats quickly has several in the
        window. With none for "several" (the shared-key test before `shared`), the
        `real-equal-keys` users (4 turns a chat, thinking 2.5-15 s) sent 45% of their new
        chats to their last chat's host, no better than a coin; with the latest, 72% (seeds
        1-4; 95% once a home the engine queued at stayed home, policy/estimate.py).
        Comparisons lost, seeds 1-20, tie streams 0-3: 1156 -> 1046 over all sixteen
        scenarios (agents 41 -> 20, sharegpt 58 -> 31, real-equal-keys 130 -> 91,
        real-bypass-keys 185 -> 160; sharegpt-noisy 140 -> 155)."""
        entries = self._by_key.get(key)
        if not entries:
            return -1
        if key in self._inflight or key in self._side_callers or key in self._shared:
            return -1
        _, target_id, ended_at = entries[-1]  # `ended` appends: the last is the latest
        return target_id if ended_at >= now - self._window_s else -1

    def _sweep(self, since: float) -> None:
        for key in [k for k, v in self._by_key.items() if v[-1][2] < since]:
            del self._by_key[key]


class UnseenPeaks:
    """Per target, the most requests its engine reported beyond ours within the window: the
    people a first chat counts there for traffic Pharos doesn't see (candidates.unseen_requests).
    A client between two of its requests shows as none, as one of our people thinking between
    turns would, yet ours count while their latest chat ended within AFFINITY_WINDOW_S; counted
    the moment a first chat arrived, the client's engine often read as empty and new people
    went there. Seeds 1-20, tie streams 0-3, comparisons lost: 982 -> 957, lost on every stream
    147 -> 142; noisy 107 -> 103, sharegpt-noisy 163 -> 156, real-bypass-keys 113 -> 99 (the
    three scenarios with unseen traffic and a key per user; docs/routing-log.md, "Traffic
    Pharos doesn't see counts by its peak"). Observing on every pick costs 0.4 us at 2 targets
    and 4.6 us at 64 a third of which report unseen requests (bench_sched's acquire-release-64
    p50 22.5 -> 26.8 us)."""

    __slots__ = ("_peaks", "_window_s")

    def __init__(self, window_s: float = AFFINITY_WINDOW_S) -> None:
        self._window_s = window_s
        self._peaks: dict[int, tuple[int, float]] = {}  # target id -> (requests, seen at)

    def observe(self, unseen: Mapping[int, int], now: float) -> None:
        """What the engines report beyond ours now (targets reporting none left out)."""
        for target_id, requests in unseen.items():
            peak = self._peaks.get(target_id)
            if peak is None or requests >= peak[0] or now - peak[1] > self._window_s:
                self._peaks[target_id] = (requests, now)

    def people(self, now: float) -> dict[int, int]:
        """Per target, the peak seen within the window; older peaks are dropped."""
        out: dict[int, int] = {}
        for target_id, (requests, seen_at) in list(self._peaks.items()):
            if now - seen_at <= self._window_s:
                out[target_id] = requests
            else:
                del self._peaks[target_id]
        return out
