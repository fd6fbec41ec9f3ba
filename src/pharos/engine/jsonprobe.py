"""`json_probe`: decode a JSON body into a typed Struct, then pick the signal out.

Structs give every field a default of None, so an absent field is unknown and
never 0; a field of the wrong type is a ProbeError.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import msgspec

from pharos.engine.types import Feed, Probe, ProbeError, Signal, Snapshot, VersionGuard

T = TypeVar("T")


def json_probe(
    name: str,
    path: str,
    signal: Signal,
    shape: type[T],
    extract: Callable[[T], Snapshot],
    *,
    when: VersionGuard | None = None,
) -> Probe:
    decoder = msgspec.json.Decoder(shape)

    def parse(body: bytes) -> Snapshot:
        try:
            decoded = decoder.decode(body)
        except msgspec.ValidationError as err:
            raise ProbeError(f"unexpected shape: {err}") from None
        except msgspec.DecodeError as err:
            raise ProbeError(f"not JSON: {err}") from None
        return extract(decoded)

    return Probe(name=name, signal=signal, feed=Feed(path=path), parse=parse, when=when)
