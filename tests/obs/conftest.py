"""Fixtures for the obs tests live in obs_rig.py, which the tests import by that unique name."""

from obs_rig import *  # noqa: F403
