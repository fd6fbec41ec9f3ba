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
    least = min([utils[i] for i in indices])
    lowest = [i for i in indices if utils[i] == least]
    if len(lowest) == 1:
        return lowest[0]
    by_id = sorted([(candidates[i].target_id, i) for i in lowest])
    return by_id[seed % len(by_id)][1]
