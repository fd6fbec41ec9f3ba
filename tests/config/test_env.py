"""The environment in configuration: `${VAR}` in config values (secrets stay out of the
file) and PHAROS_CONFIG / PHAROS_LISTEN / PHAROS_LOG_LEVEL for `pharos serve`."""

from __future__ import annotations

from pathlib import Path

import pytest

from pharos.cmd.main import main
from pharos.config import ConfigError
from pharos.config.env import serve_defaults
from pharos.config.load import parse_config

SECRET = "s3cr3t-value-never-printed"
CONFIG = """
listen: "${LISTEN_AT}"
backends:
  - url: http://127.0.0.1:8080
    aliases: {smollm2: "${ALIAS}"}
"""


def test_references_expand_from_the_environment() -> None:
    config = parse_config(CONFIG, environ={"LISTEN_AT": "127.0.0.1:9000", "ALIAS": "small"})
    assert (config.listen.host, config.listen.port) == ("127.0.0.1", 9000)
    assert dict(config.backends[0].aliases) == {"smollm2": "small"}


def test_an_unset_variable_names_the_field_and_the_variable() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(CONFIG, "pharos.yaml", environ={"LISTEN_AT": ":8090"})
    assert err.value.problems == (
        "backends[0].aliases.smollm2: environment variable ALIAS is not set",
    )


# text in a value -> what it becomes (with HOME=/h); None = a config error
@pytest.mark.parametrize(
    ("value", "expanded"),
    [
        ("${HOME}/x", "/h/x"),
        ("a$$b", "a$b"),  # $$ writes one $
        ("$HOME", "$HOME"),  # only ${NAME} expands
        ("cost $5", "cost $5"),
        ("${not a name}", None),
        ("${UNCLOSED", None),
    ],
)
def test_reference_forms(value: str, expanded: str | None) -> None:
    text = f"backends:\n  - url: http://h:1\n    aliases: {{m: '{value}'}}\n"
    if expanded is None:
        with pytest.raises(ConfigError, match=r"backends\[0\]\.aliases\.m: "):
            parse_config(text, environ={"HOME": "/h"})
        return
    assert parse_config(text, environ={"HOME": "/h"}).backends[0].aliases["m"] == expanded


def test_an_unset_variable_error_never_prints_a_set_one() -> None:
    text = 'listen: "${SECRET_LISTEN}"\nbackends: [{url: "${MISSING}"}]\n'
    with pytest.raises(ConfigError) as err:
        parse_config(text, environ={"SECRET_LISTEN": SECRET})
    assert SECRET not in str(err.value)
    assert "MISSING" in str(err.value)


def test_serve_defaults_come_from_pharos_variables() -> None:
    defaults, problems = serve_defaults(
        {"PHAROS_CONFIG": "/etc/p.yaml", "PHAROS_LISTEN": ":9", "PHAROS_LOG_LEVEL": "DEBUG"}
    )
    assert problems == []
    assert (defaults.config, defaults.listen, defaults.log_level) == ("/etc/p.yaml", ":9", "debug")
    defaults, problems = serve_defaults({"PHAROS_LOG_LEVEL": "loud"})
    assert problems == ["PHAROS_LOG_LEVEL: must be one of debug, info, warning, error"]
    assert serve_defaults({})[0].config is None


def test_serve_reads_pharos_config_and_names_the_variable_on_a_bad_listen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("backends: [{url: http://h:1, bogus: 1}]\n")
    monkeypatch.setenv("PHAROS_CONFIG", str(bad))
    assert main(["serve"]) == 2
    assert str(bad) in capsys.readouterr().err  # it read the file PHAROS_CONFIG named
    good = tmp_path / "good.yaml"
    good.write_text("backends: [{url: 'http://127.0.0.1:1'}]\n")
    monkeypatch.setenv("PHAROS_CONFIG", str(good))
    monkeypatch.setenv("PHAROS_LISTEN", "nonsense")
    assert main(["serve"]) == 2
    assert "PHAROS_LISTEN:" in capsys.readouterr().err
    monkeypatch.setenv("PHAROS_LOG_LEVEL", "loud")
    assert main(["serve"]) == 2
    assert "PHAROS_LOG_LEVEL" in capsys.readouterr().err
