"""A setting this version cannot honour yet is an error naming it, never silently ignored."""

from __future__ import annotations

import pytest

from pharos.config import ConfigError, parse_config
from pharos.config.rules import NOT_BUILT

PEERS = """
peers:
  secret_file: /etc/pharos/peer-secret
  members: ["pharos-a:8081", "pharos-b:8081"]
"""
DOCKER_LOGS = """
backends:
  - url: http://gpu-box:8000
  - url: http://gpu-box:8001
    logs: docker://vllm-1
"""


@pytest.mark.parametrize(
    ("setting", "text", "problem"),
    [
        # NOT_BUILT entry   config using it   the line the operator reads
        ("peers", PEERS, "peers: the peer plane is not built in this version"),
        (
            "docker log feeds",
            DOCKER_LOGS,
            "backends[1].logs: docker log feeds are not built in this version",
        ),
    ],
)
def test_a_setting_not_built_yet_is_an_error_that_says_so(
    setting: str, text: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "pharos.yaml", unbuilt=(setting,))
    (line,) = caught.value.problems
    assert line.startswith(problem)
    parse_config(text, "pharos.yaml", unbuilt=())  # the schema itself accepts it
    if setting not in NOT_BUILT:
        parse_config(text, "pharos.yaml")  # built now: accepted by default


def test_a_file_feed_is_built_and_accepted() -> None:
    config = parse_config("backends: [{url: 'http://a:1', logs: 'file:///var/log/a.log'}]")
    assert config.backends[0].logs == "file:///var/log/a.log"
