"""Fixtures for the proxy tests live in proxy_rig.py, which the tests import by that unique name."""

from proxy_rig import *  # noqa: F403
