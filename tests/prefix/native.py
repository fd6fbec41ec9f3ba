"""The optional C builds of the prefix package (prefix/_chainc.c, _indexc.c), for tests."""

from __future__ import annotations

import importlib
import os
import shutil
import types

import pytest


def native_module(name: str) -> types.ModuleType | None:
    """`pharos.prefix.<name>` when setup.py built it, else None."""
    try:
        return importlib.import_module(f"pharos.prefix.{name}")
    except ImportError:
        return None


def needs_c_build(module: types.ModuleType | None, name: str) -> types.ModuleType:
    """Skips without the C build, except in CI on a machine with a C compiler: there setup.py
    fell back by mistake (`pip install -v` says why)."""
    if module is not None:
        return module
    if os.environ.get("CI") and (shutil.which("cc") or shutil.which("gcc")):
        pytest.fail(f"CI has a C compiler but pharos.prefix.{name} was not built")
    pytest.skip(f"no C build of pharos.prefix.{name} here (no C compiler at install)")
