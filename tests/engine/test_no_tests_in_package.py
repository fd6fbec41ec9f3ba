"""The installed package never reaches into the repository's tests/ (issue 8: tooling out).

A wheel has no tests/ beside it, so a runtime module that builds a path into tests/ (or
imports from it) breaks exactly where nobody runs the test suite.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pharos

PACKAGE = Path(pharos.__file__).resolve().parent


def _docstrings(tree: ast.AST) -> set[int]:
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            ids.add(id(node.value))  # attribute docstrings
    return ids


def reaches_into_tests(source: str) -> list[str]:
    """Imports of tests/tools and string constants naming a tests/ path (docstrings aside)."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] in ("tests", "tools"):
                found.append(f"line {node.lineno}: from {node.module} import")
        elif isinstance(node, ast.Import):
            found += [
                f"line {node.lineno}: import {a.name}"
                for a in node.names
                if a.name.split(".")[0] in ("tests", "tools")
            ]
        elif (
            isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
        ):
            text = node.value
            if text == "tests" or text.startswith("tests/") or "/tests/" in text:
                found.append(f"line {node.lineno}: {text!r}")
    return found


def test_the_scanner_catches_a_path_and_an_import_but_not_a_docstring() -> None:
    bad = 'import tests.engine\nROOT = Path(__file__).parents[2] / "tests" / "captures"\n'
    assert len(reaches_into_tests(bad)) == 2
    assert reaches_into_tests('"""Replayed by tests/engine/test_replay.py."""\nX = 1\n') == []
    assert reaches_into_tests('P = "/repo/tests/captures"\n') == ["line 1: '/repo/tests/captures'"]


def test_no_module_under_src_pharos_references_a_tests_path() -> None:
    offenders = {
        str(path.relative_to(PACKAGE)): hits
        for path in sorted(PACKAGE.rglob("*.py"))
        if (hits := reaches_into_tests(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}


def test_every_module_imports_from_a_copy_of_the_package_with_no_repository(
    tmp_path: Path,
) -> None:
    """What an installed wheel sees: the package alone on sys.path, cwd far from the repo."""
    import shutil

    shutil.copytree(
        PACKAGE, tmp_path / "site" / "pharos", ignore=shutil.ignore_patterns("__pycache__")
    )
    script = (
        "import importlib, pkgutil, sys, pharos\n"
        "assert pharos.__file__.startswith(sys.argv[1]), pharos.__file__\n"
        "for m in pkgutil.walk_packages(pharos.__path__, 'pharos.'):\n"
        "    importlib.import_module(m.name)\n"
        "assert 'tests' not in sys.modules and 'tools' not in sys.modules\n"
    )
    site = str(tmp_path / "site")
    result = subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            f"import sys; sys.path.insert(0, {site!r}); exec({script!r})",
            site,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
