from tests.peer.mesh import mesh

__all__ = ["mesh"]
