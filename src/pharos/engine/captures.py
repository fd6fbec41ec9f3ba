"""Reading recorded engine captures (spec §14 layer 2), for replay tests and SUPPORT.md.

Layout: `<root>/<engine>/<version>/<state>/<body file>` plus `paths.tsv`, `engine.log`
and `meta.yaml`; body files are named as the recorder names them (`/api/ps` ->
`api_ps`). A version directory is one that holds a `meta.yaml` (every shared and
recorded capture has one), so other folders under a root are never read as engines.
Copies can be incomplete: a missing body is not a 404. Tools and tests only; never
used on the event loop. Every function takes its roots: where the captures of a
checkout live is the repository's business (tools/captures.py), never the installed
package's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pharos.engine.record import META_FILE, body_file_name
from pharos.engine.types import Kind, Probe, Signal, Snapshot

ENGINE_KINDS: Mapping[str, Kind] = {
    "ollama": Kind.OLLAMA,
    "llamacpp": Kind.LLAMACPP,
    "llamacpp-router": Kind.LLAMACPP,
    "llama-swap": Kind.LLAMA_SWAP,
    "vllm": Kind.VLLM,
    "sglang": Kind.SGLANG,
}
NOT_STATES = frozenset({"streams"})
NESTED_ROOT = "engines"
"""`tests/captures/engines/<engine>/...`: a folder of engines, never an engine itself."""


def engine_roots(ours: Path, shared: Path) -> list[Path]:
    """The shared captures and our own live recordings, when present.

    Ours live in `ours/<engine>/<version>/` (llamacpp-router) or
    `ours/engines/<engine>/<version>/` (what `pharos doctor --record` writes).
    """
    roots = [shared / NESTED_ROOT, ours / NESTED_ROOT, ours]
    return [root for root in roots if root.is_dir()]


def kind_of(engine: str) -> Kind:
    """The recipe an engine directory is replayed with; unknown engines are generic openai."""
    return ENGINE_KINDS.get(engine, Kind.OPENAI)


def body_name(path: str) -> str:
    """`/api/ps` -> `api_ps`, `/props?model=a` -> `props_model=a`: the recorder's naming."""
    return body_file_name(path)


@dataclass(frozen=True)
class VersionDir:
    engine: str
    version: str
    path: Path

    @property
    def states(self) -> tuple[str, ...]:
        return tuple(
            sorted(d.name for d in self.path.iterdir() if d.is_dir() and d.name not in NOT_STATES)
        )

    def body(self, state: str, path: str) -> bytes | None:
        file = self.path / state / body_name(path)
        return file.read_bytes() if file.is_file() else None

    def log_lines(self) -> list[bytes] | None:
        file = self.path / "engine.log"
        return file.read_bytes().splitlines() if file.is_file() else None


def version_dirs(roots: Iterable[Path]) -> list[VersionDir]:
    """Every <engine>/<version> directory under the roots, found by walking."""
    found: list[VersionDir] = []
    for root in roots:
        for engine in sorted(d for d in root.iterdir() if d.is_dir() and d.name != NESTED_ROOT):
            for version in sorted(d for d in engine.iterdir() if (d / META_FILE).is_file()):
                found.append(VersionDir(engine.name, version.name, version))
    return found


def stream_files(roots: Iterable[Path]) -> list[Path]:
    """Every recorded reply file under `<root>/*/*/streams/` (replies.tsv is their index)."""
    found: list[Path] = []
    for root in roots:
        if root.is_dir():
            found.extend(sorted(p for p in root.glob("*/*/streams/*") if p.name != "replies.tsv"))
    return found


Expectations = Mapping[str, Mapping[str, object]]
"""Keyed `engine/`, `engine//state`, `engine/version`, `engine/version/state` -> probe -> value."""


def expected(
    table: Expectations, engine: str, version: str, state: str | None, probe: str
) -> tuple[bool, object]:
    """The most specific row naming the probe: (found, value). A value of None = reads nothing."""
    keys = [f"{engine}/{version}/{state}", f"{engine}//{state}"] if state else []
    keys += [f"{engine}/{version}", f"{engine}/"]
    for key in keys:
        row = table.get(key)
        if row is not None and probe in row:
            return True, row[probe]
    return False, None


def observed(probe: Probe, output: Snapshot) -> object:
    """A probe's output for its own signal, as plain data to compare with a table."""
    signal = probe.signal
    if signal is Signal.VERSION:
        return output.version
    models = output.models or {}
    if signal is Signal.MODELS:
        return None if output.models is None else tuple(sorted(models))
    if signal is Signal.RESIDENCY:
        return None if output.models is None else {n: i.state.value for n, i in models.items()}
    if signal is Signal.VRAM_BYTES:
        return None if output.models is None else {n: i.vram_bytes for n, i in models.items()}
    if signal is Signal.SIZE_BYTES:
        return None if output.models is None else {n: i.size_bytes for n, i in models.items()}
    attr = signal.value
    loads = {k: getattr(v, attr) for k, v in output.loads.items() if getattr(v, attr) is not None}
    return loads or None
