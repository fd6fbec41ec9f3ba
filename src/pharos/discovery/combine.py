"""Combine every source of BackendSpecs into the one list State serves (spec §10).

Sources are named (static config, zero-config probing, Docker labels); each
replaces its own list whenever it learns something, and State gets the union.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pharos.state import BackendSpec

STATIC = "static"
"""The config file's `backends:` (or what zero-config probing found instead)."""
DOCKER = "docker"
"""Containers with pharos.* labels (discovery/docker, landing in this wave)."""
SOURCE_ORDER: tuple[str, ...] = (STATIC, DOCKER)
"""Precedence when two sources name one URL: the operator's config wins."""


def merge_specs(*sources: Sequence[BackendSpec]) -> list[BackendSpec]:
    """Combine static and discovered lists; the first source to name a URL wins."""
    seen: dict[str, BackendSpec] = {}
    for source in sources:
        for spec in source:
            seen.setdefault(spec.url, spec)
    return list(seen.values())


class BackendSources:
    """Each source's latest list; every change pushes the merged list to `apply`
    (State.set_backends, which keeps the state of backends whose spec is unchanged)."""

    def __init__(
        self,
        apply: Callable[[Sequence[BackendSpec]], None],
        order: Sequence[str] = SOURCE_ORDER,
    ) -> None:
        self._apply = apply
        self._lists: dict[str, list[BackendSpec]] = {name: [] for name in order}

    def set(self, source: str, specs: Sequence[BackendSpec]) -> None:
        if source not in self._lists:
            raise ValueError(f"unknown backend source {source!r}")
        self._lists[source] = list(specs)
        self._apply(self.merged())

    def merged(self) -> list[BackendSpec]:
        return merge_specs(*self._lists.values())

    def of(self, source: str) -> list[BackendSpec]:
        return list(self._lists[source])
