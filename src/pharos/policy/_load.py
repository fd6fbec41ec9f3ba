"""Which build of the compiled modules loads: mypyc's or the Python source (issue 13).

The compiled modules (setup.py, when a C compiler is there) sit next to their sources and win
the import. The source loads instead when PHAROS_PURE_PYTHON=1 (the tests run both), and when a
source is newer than its compiled module: an edit without a reinstall must never run stale code.
Runs once, at import, before any compiled module loads (pharos/__init__.py imports
pharos.policy first); no routing code reads the environment.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from types import ModuleType

PACKAGE = "pharos.policy"
MODULES = ("types", "util", "explain", "estimate", "cost", "least_load")
COMPILED: dict[str, tuple[str, ...]] = {
    PACKAGE: MODULES,
    "pharos.sched": (
        "types",
        "fits",
        "candidates",
        "replies",
        "learning",
        "lease",
        "side_calls",
        "scheduler",
        "fairqueue",
        "prefills",
        "held_affinity",
        "engine_joins",
        "leases_on",
        "reply_learner",
    ),
    "pharos.prefix": ("slots", "index"),
    "pharos.state": ("view", "views"),
}
"""Every module setup.py compiles, by package. One mypyc group: they load all compiled or all
source, never mixed (a compiled candidates module builds the compiled Candidate)."""
PURE_ENV = "PHAROS_PURE_PYTHON"
SAME_INSTALL_S = 2.0
"""A source at most this much newer than its compiled module came with it: pip writes each .py
of a wheel 0.22-0.26 ms after its .so, which was read as an edit, so every wheel and Docker
install ran the source build. An edit lands longer after a build (which takes ~50 s)."""


class _SourceOnly(importlib.abc.MetaPathFinder):
    """Finds this package's modules as .py files only."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,  # noqa: ARG002 (the MetaPathFinder signature)
    ) -> importlib.machinery.ModuleSpec | None:
        package, _, name = fullname.rpartition(".")
        if name not in COMPILED.get(package, ()):
            return None
        for directory in path or ():
            source = os.path.join(directory, name + ".py")
            if os.path.isfile(source):
                return importlib.util.spec_from_file_location(fullname, source)
        return None


def stale_compiled(directory: str, modules: Sequence[str] = MODULES) -> list[str]:
    """Modules whose source changed after their compiled module was built."""
    stale = []
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        for name in modules:
            compiled = os.path.join(directory, name + suffix)
            if os.path.isfile(compiled):
                source = os.path.join(directory, name + ".py")
                if os.path.getmtime(source) > os.path.getmtime(compiled) + SAME_INSTALL_S:
                    stale.append(name)
    return stale


def stale_in_build(directory: str) -> list[str]:
    """Every compiled module of COMPILED older than its source, as package.module; `directory`
    is pharos/policy, the other packages its siblings."""
    root = os.path.dirname(directory)
    stale = []
    for package, modules in COMPILED.items():
        here = os.path.join(root, package.rpartition(".")[2])
        stale += [f"{package}.{name}" for name in stale_compiled(here, modules)]
    return stale


def choose(directory: str) -> str:
    """Installs the source-only finder when asked or when a compiled module is stale; returns
    why ("" when the default import order stands)."""
    why = ""
    if os.environ.get(PURE_ENV) == "1":
        why = f"{PURE_ENV}=1"
    else:
        stale = stale_in_build(directory)
        if stale:
            why = f"compiled {', '.join(stale)} older than the source: reinstall to rebuild"
    if why and not any(isinstance(f, _SourceOnly) for f in sys.meta_path):
        sys.meta_path.insert(0, _SourceOnly())
    return why


def implementation(module: ModuleType) -> str:
    """ "mypyc" when the module is a compiled extension, else "python"."""
    origin = getattr(module, "__file__", None) or ""
    return "mypyc" if origin.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)) else "python"
