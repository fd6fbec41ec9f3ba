"""A key's home for its next new conversation (issue 15, the held-out seeds 6-20).

A person opens one chat after another. Each new one is cache-neutral (it shares at most the
system prompt), so cost sent it to whichever target was least utilized at that moment, and a
few users' chats piled onto one host while another's slots held chats nobody would continue.
Sending the key's next chat where its last one ended (unless another target saves more than
PolicyConfig.away_s) keeps each person's chats in the slots and host cache their own old
chat occupies, as sticky sessions do, while a real saving still moves it. A key with several
conversations in the window is shared (one Open WebUI, `make scenario`'s anonymous key): it
gets no home, since one home would herd all its users onto one target.
"""

from __future__ import annotations

from collections.abc import Mapping

from pharos.prefix import Chain, Match

AFFINITY_WINDOW_S = 120.0
"""A conversation whose last reply ended this long ago no longer counts: the simulator's users
think 5-30 s between turns and open the next chat a few seconds after the last reply."""

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

    def side_call_from(self, key: str) -> None:
        """`key` sent a side call (a title or tags call after a reply): it is an Open WebUI,
        whose one key carries every person using it (README "Open WebUI"), so it gets no home.
        sharegpt-webui, 20 seeds: 6 comparisons lost with homes there, 5 without (main 5)."""
        self._side_callers.add(key)

    def started(self, key: str) -> None:
        """A request of `key`'s that is not a side call went out."""
        self._inflight[key] = self._inflight.get(key, 0) + 1

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
        """The target of the key's one conversation in the window; -1 with none or several, or
        while one of the key's requests is in flight: `make scenario`'s one key had a single
        ended conversation while its other five users' first turns were arriving, and each
        went home (real-speed: 10 -> 7 comparisons lost, by herding; with this check its output
        is main's byte for byte)."""
        entries = self._by_key.get(key)
        if not entries:
            return -1
        if key in self._inflight or key in self._side_callers:
            return -1  # a request of the key's in flight: a second person, or the same one
        since = now - self._window_s
        home = -1
        for _, target_id, ended_at in entries:
            if ended_at < since:
                continue
            if home >= 0:
                return -1
            home = target_id
        return home

    def _sweep(self, since: float) -> None:
        for key in [k for k, v in self._by_key.items() if v[-1][2] < since]:
            del self._by_key[key]
