"""Pharos: an LLM request router that routes on the live state of every engine."""

__version__ = "0.1.0"

# First, before any compiled module can load: pharos.policy chooses mypyc's build or the source
# for every module setup.py compiles (policy/_load.py), so they never load mixed.
import pharos.policy  # noqa: F401
