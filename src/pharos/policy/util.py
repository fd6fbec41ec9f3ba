"""Small helpers shared by the policies."""

from __future__ import annotations

from collections.abc import Sequence

from pharos.policy.types import Candidate


def median_or(known: Sequence[float], default: float) -> float:
    """The median of the known values; `default` when there are none."""
    n = len(known)
    if n == 0:
        return default
    ordered = sorted(known)
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


def median_of(known: list[float], default: float) -> float:
    """median_or for a list the caller owns: sorted in place, no copy."""
    n = len(known)
    if n == 0:
        return default
    known.sort()
    mid = n // 2
    return known[mid] if n % 2 else (known[mid - 1] + known[mid]) / 2.0


def break_tie(
    indices: Sequence[int], utils: Sequence[float], candidates: Sequence[Candidate], seed: int
) -> int:
    """Among tied indices: lowest utilization, then one chosen by the seed.

    The seed picks among the tied targets sorted by id, so the choice does not
    depend on the order the candidates arrived in.
    """
    return break_tie_of(list(indices), [utils[i] for i in indices], candidates, seed)


def break_tie_of(
    indices: list[int],
    index_utils: list[float],
    candidates: Sequence[Candidate],
    seed: int,
    by_room: bool = False,
) -> int:
    """break_tie with each tied index's utilization beside it (`index_utils[k]` is
    `indices[k]`'s): cost.pick keeps only the tied candidates' utilizations. `by_room`: among
    tied cold loads, the one leaving its host the most memory first (roomiest)."""
    least = min(index_utils)
    lowest = [indices[k] for k in range(len(indices)) if index_utils[k] == least]
    if len(lowest) == 1:
        return lowest[0]
    if by_room:
        lowest = roomiest(lowest, candidates)
        if len(lowest) == 1:
            return lowest[0]
    by_id = sorted([(candidates[i].target_id, i) for i in lowest])
    return by_id[seed % len(by_id)][1]


def roomiest(indices: list[int], candidates: Sequence[Candidate]) -> list[int]:
    """The tied cold loads that leave their host the most memory (Candidate.room_bytes), when
    every one of them knows it; else all of them. A model loaded where the host holds nothing
    else leaves another model room to load beside it there later: cold-burst-heavy's chat
    models had taken both hosts a burst needed, and its loads unloaded one of each."""
    most: int | None = None
    for i in indices:
        room = candidates[i].room_bytes
        if room is None:
            return indices
        if most is None or room > most:
            most = room
    return [i for i in indices if candidates[i].room_bytes == most]
