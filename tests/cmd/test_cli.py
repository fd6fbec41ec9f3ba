"""The `pharos` command line: help texts, keys new, argument errors without tracebacks."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pharos.cmd.main import main
from pharos.config import parse_config
from pharos.proxy.auth import hash_key
from pharos.proxy.keys import new_key


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        status = main(list(argv))
    except SystemExit as exit_:  # argparse exits for --help and usage errors
        status = int(exit_.code or 0)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_main_help_lists_every_command_with_examples(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "--help")
    assert status == 0
    for command in ("serve", "demo", "doctor", "keys"):
        assert re.search(rf"^\s+{command}\s+\S", out, re.MULTILINE), command
    assert "examples:" in out
    assert "pharos keys new --name alice" in out


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (("serve", "--help"), "pharos serve --config"),
        (("demo", "--help"), "fake engines"),
        (("doctor", "--help"), "pharos doctor --url http://127.0.0.1:11434"),
        (("keys", "--help"), "SHA-256"),
        (("keys", "new", "--help"), "pharos keys new --name alice"),
    ],
)
def test_every_command_help_says_what_it_does(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], says: str
) -> None:
    status, out, _ = run(capsys, *argv)
    assert status == 0
    assert says in out


def test_doctor_help_explains_exit_status_and_surprises(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "doctor", "--help")
    assert "Exit status" in out
    assert ":cloud" in out and "/v1/messages" in out


def test_no_command_prints_help_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capsys)
    assert status == 2
    assert "COMMAND" in err


def test_keys_without_subcommand_fails_with_help(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capsys, "keys")
    assert status == 2
    assert "new" in err


def test_keys_new_prints_the_key_once_and_its_config_entry(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, _ = run(capsys, "keys", "new", "--name", "alice")
    assert status == 0
    keys = re.findall(r"pk-[A-Za-z0-9_-]+", out)
    assert len(keys) == 1
    key = keys[0]
    assert len(key) == len("pk-") + 43  # 32 bytes, URL-safe base64 without padding
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()
    assert digest in out
    entry = out[out.index("  - name: alice") :]
    config = parse_config("keys:\n" + entry, "printed entry", library_names=frozenset())
    assert config.keys[0].name == "alice"
    assert config.keys[0].sha256 == digest


def test_keys_new_gives_a_different_key_each_time() -> None:
    assert new_key() != new_key()
    assert hash_key("pk-test") == hashlib.sha256(b"pk-test").hexdigest()


def test_keys_new_rejects_a_name_that_cannot_be_a_yaml_scalar(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, err = run(capsys, "keys", "new", "--name", "al ice: x")
    assert status == 2
    assert out == ""
    assert "--name" in err and "Traceback" not in err


def test_keys_new_needs_a_name(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capsys, "keys", "new")
    assert status == 2
    assert "--name" in err


def test_serve_with_a_bad_config_names_the_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "pharos.yaml"
    config.write_text("backends:\n  - url: http://127.0.0.1:1\n    per-model: x\n")
    status, _, err = run(capsys, "serve", "--config", str(config))
    assert status == 2
    assert 'backends[0]: unknown field "per-model"' in err
    assert "Traceback" not in err


def test_console_script_entry_point_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pharos.cmd.main", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0
    assert result.stdout.startswith("pharos ")
