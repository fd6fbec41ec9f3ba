"""Client-capture replay fixtures; the rig itself is tests/proxy/rig.py."""

from tests.proxy.rig import rig

__all__ = ["rig"]
