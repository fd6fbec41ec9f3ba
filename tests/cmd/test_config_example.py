"""pharos.example.yaml covers the whole schema and parses; `pharos config check` and
`pharos version`; no sample key digest in the README or the example is a guessable key's."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

from pharos.cmd.main import main
from pharos.config import Config, load_config

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "pharos.example.yaml"
SAMPLES = (ROOT / "README.md", EXAMPLE)
COMMON_WORDS = [
    "test",
    "foo",
    "bar",
    "baz",
    "qux",
    "secret",
    "password",
    "passw0rd",
    "admin",
    "root",
    "alice",
    "bob",
    "ops",
    "key",
    "apikey",
    "api-key",
    "changeme",
    "letmein",
    "hello",
    "example",
    "demo",
    "pharos",
    "token",
    "sk-test",
    "123456",
    "12345678",
]
"""Words people try first; a sample digest of one makes a copied config grant that key."""


def schema_fields(struct: type, path: str = "") -> list[tuple[str, str]]:
    """(dotted path, field name) of every field reachable from `struct`."""
    found: list[tuple[str, str]] = []
    info = msgspec.inspect.type_info(struct)
    assert isinstance(info, msgspec.inspect.StructType)
    for field in info.fields:
        here = f"{path}.{field.name}" if path else field.name
        found.append((here, field.name))
        for inner in _structs_in(field.type):
            found.extend(schema_fields(inner, here))
    return found


def _structs_in(kind: msgspec.inspect.Type) -> list[type]:
    if isinstance(kind, msgspec.inspect.StructType):
        return [kind.cls]
    nested: list[Any] = []
    for attribute in ("item_type", "value_type", "types"):
        value = getattr(kind, attribute, None)
        if isinstance(value, tuple):
            nested.extend(value)
        elif value is not None:
            nested.append(value)
    return [cls for inner in nested for cls in _structs_in(inner)]


def test_the_example_config_parses() -> None:
    config = load_config(EXAMPLE)
    assert config.backends and config.keys


def test_the_example_config_names_every_schema_field() -> None:
    text = EXAMPLE.read_text()
    fields = schema_fields(Config)
    assert len(fields) > 30  # the walk reached the nested structs
    missing = [
        path
        for path, name in fields
        if not re.search(rf"^[ #]*(- )?{re.escape(name)}:", text, flags=re.MULTILINE)
    ]
    assert missing == [], f"add these to pharos.example.yaml: {missing}"


def test_the_schema_walk_sees_nested_fields() -> None:
    paths = {path for path, _ in schema_fields(Config)}
    assert {"backends.probes.prom.per_model", "keys.admin", "peers.dns"} <= paths


def sample_digests() -> list[tuple[str, str]]:
    return [
        (path.name, digest)
        for path in SAMPLES
        for digest in re.findall(r"\b[0-9a-f]{64}\b", path.read_text())
    ]


def test_no_sample_digest_is_the_sha256_of_a_common_word() -> None:
    digests = sample_digests()
    assert len(digests) >= 4  # README's two and the example's two
    guessable = {hashlib.sha256(word.encode()).hexdigest(): word for word in COMMON_WORDS}
    found = [(where, guessable[digest]) for where, digest in digests if digest in guessable]
    assert found == []


def test_the_guess_check_would_catch_sha256_of_test() -> None:
    assert hashlib.sha256(b"test").hexdigest() == (
        "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
    )
    assert "test" in COMMON_WORDS and "foo" in COMMON_WORDS


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        status = main(list(argv))
    except SystemExit as exit_:
        status = int(exit_.code or 0)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_config_check_accepts_the_example_and_names_a_typo(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, out, _ = run(capsys, "config", "check", str(EXAMPLE))
    assert status == 0
    assert "ok: 2 backends, 3 keys, policy cost" in out
    bad = tmp_path / "pharos.yaml"
    bad.write_text("backends:\n  - url: http://gpu:11434\n    memroy_gb: 24\n")
    status, out, err = run(capsys, "config", "check", str(bad))
    assert (status, out) == (1, "")
    assert 'backends[0]: unknown field "memroy_gb" (did you mean "memory_gb"?)' in err
    assert "Traceback" not in err
    status, _, err = run(capsys, "config", "check", str(tmp_path / "missing.yaml"))
    assert status == 1 and "missing.yaml" in err


def test_version_subcommand_matches_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "version")
    assert status == 0 and re.fullmatch(r"pharos \d+\.\d+\.\d+\S*\n", out)
    _, flag, _ = run(capsys, "--version")
    assert flag == out
