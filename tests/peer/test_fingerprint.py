"""The fingerprint peers compare (spec §10) changes with every field that makes two instances
route or count differently, and with nothing else (the order of entries in the file)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from pharos.config import parse_config
from pharos.peer.fingerprint import fingerprint

SHA = "a" * 64


def config_text(key: dict[str, Any], *, backends: list[str] | None = None) -> str:
    urls = ["http://gpu-1:8080", "http://gpu-2:8080"] if backends is None else backends
    document = {
        "backends": [{"url": url, "kind": "llamacpp"} for url in urls],
        "keys": [{"name": "scrape", "sha256": SHA, **key}, {"name": "other", "sha256": "b" * 64}],
    }
    return yaml.safe_dump(document)


def print_of(key: dict[str, Any], **kw: Any) -> int:
    return fingerprint(parse_config(config_text(key, **kw), "fingerprint"), "UTC")


# key fields changed  | why a peer must see it
# metrics: true       | one instance serves /metrics to a key the other refuses
# admin: true         | /status and /usage readable on one instance only
# rpm / tokens        | quotas counted against different limits
# models              | a model allowed on one instance only
@pytest.mark.parametrize(
    "changed",
    [{"metrics": True}, {"admin": True}, {"rpm": 60}, {"tokens_per_day": 1000}, {"models": ["m"]}],
)
def test_every_access_or_limit_flag_of_a_key_changes_the_fingerprint(
    changed: dict[str, Any],
) -> None:
    assert print_of(changed) != print_of({})


def test_a_key_set_that_differs_only_in_the_metrics_flag_is_flagged() -> None:
    assert print_of({"metrics": True}) != print_of({"metrics": False})
    assert print_of({"metrics": False}) == print_of({})


def test_the_order_of_backends_in_the_file_does_not_matter() -> None:
    one = print_of({}, backends=["http://gpu-1:8080", "http://gpu-2:8080"])
    other = print_of({}, backends=["http://gpu-2:8080", "http://gpu-1:8080"])
    assert one == other


def test_another_usage_zone_changes_the_fingerprint() -> None:
    config = parse_config(config_text({}), "fingerprint")
    assert fingerprint(config, "UTC") != fingerprint(config, "Asia/Bangkok")
