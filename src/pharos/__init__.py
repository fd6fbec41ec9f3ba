"""Pharos: an LLM request router that routes on the live state of every engine."""

__version__ = "0.1.0"
