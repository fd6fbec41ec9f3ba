"""The compiled group type-checks in pip's isolated build env (found on a fresh clone, 2026-12-01).

mypyc type-checks every module the compiled ones import, transitively. pip builds in an isolated
env holding only [build-system] requires, so a third-party import reachable from the group that
is missing there fails mypyc (SystemExit), and setup.py falls back to the pure-Python build
without a word under `pip -q`: a fresh `make install` ran the source build while a second
install (which found the venv's packages) compiled.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

from pharos.policy import _load

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
DISTRIBUTION_OF = {"yaml": "pyyaml", "prometheus_client": "prometheus-client"}


def _module_path(name: str) -> Path | None:
    base = SRC.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _imports(path: Path, package: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{node.module}" if node.module else parent
            else:
                base = node.module or ""
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def third_party_reached_by(roots: list[str]) -> set[str]:
    """Top-level third-party modules imported, transitively through pharos, from `roots`."""
    seen: set[str] = set()
    third_party: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        top = name.split(".")[0]
        if top != "pharos":
            if top not in sys.stdlib_module_names and top != "__future__":
                third_party.add(top)
            continue
        parts = name.split(".")
        for depth in range(2, len(parts) + 1):  # every package on the way is imported too
            prefix = ".".join(parts[:depth])
            path = _module_path(prefix)
            if path is None or (prefix in seen and prefix != name):
                continue
            package = prefix if path.name == "__init__.py" else prefix.rpartition(".")[0]
            todo.extend(_imports(path, package))
            seen.add(prefix)
    return third_party


def test_every_third_party_module_the_compiled_group_reaches_is_a_build_requirement() -> None:
    roots = [f"{package}.{name}" for package, names in _load.COMPILED.items() for name in names]
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    required = {
        req.split(";")[0].split("[")[0].split("=")[0].split(">")[0].split("<")[0].strip().lower()
        for req in requires
    }
    reached = third_party_reached_by(roots)
    assert reached, "the walk found no third-party import: it is not reading the modules"
    missing = sorted(m for m in reached if DISTRIBUTION_OF.get(m, m).lower() not in required)
    assert missing == []
