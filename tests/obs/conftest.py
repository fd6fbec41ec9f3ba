"""The obs tests' fixtures; the rig itself is tests/obs/rig.py."""

from tests.obs.rig import start_router

__all__ = ["start_router"]
