"""Optional mypyc build of the pure routing policy (issue 13): pick-cost-64 p50 40 -> ~10 µs;
with the candidates builder and TargetView (a C struct the builder reads without a getattr)
acquire-release-64 p50 67 -> 35 µs. The scheduler (its types, replies, learning, lease and fair
queue) and the prefix index in the same group: acquire-release-64 353.7k -> 281.9k instructions
a round (callgrind), with the slotted RouteRequest, Feedback and Match. A scan that keeps scalars
(no per-candidate lists), Candidates reused from the previous pick and a slotted Samples:
acquire-release-64 278k -> 198k, pick-cost-64 101k -> 74k instructions (callgrind). state/views.py
in the group: State.targets_for_model over 64 targets 8.4 -> 5.1 µs (its per-target version checks
ran interpreted), acquire-release over a real State 110k -> 97k instructions a round.

Without mypyc, without a C compiler, or with PHAROS_MYPYC=0 the same modules install as plain
Python (they are the source mypyc compiles), so `pip install` never fails for want of a compiler.
Everything else about the package is in pyproject.toml.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

COMPILED = [
    "src/pharos/policy/types.py",
    "src/pharos/policy/util.py",
    "src/pharos/policy/explain.py",
    "src/pharos/policy/estimate.py",
    "src/pharos/policy/cost.py",
    "src/pharos/policy/least_load.py",
    "src/pharos/sched/fits.py",
    "src/pharos/sched/candidates.py",
    "src/pharos/sched/types.py",
    "src/pharos/sched/replies.py",
    "src/pharos/sched/learning.py",
    "src/pharos/sched/lease.py",
    "src/pharos/sched/side_calls.py",
    "src/pharos/sched/scheduler.py",
    "src/pharos/sched/fairqueue.py",
    "src/pharos/sched/prefills.py",
    "src/pharos/sched/held_affinity.py",
    "src/pharos/sched/engine_joins.py",
    "src/pharos/sched/leases_on.py",
    "src/pharos/sched/reply_learner.py",
    "src/pharos/prefix/slots.py",
    "src/pharos/prefix/index.py",
    "src/pharos/state/view.py",
    "src/pharos/state/views.py",
]


class OptionalBuildExt(build_ext):
    """A failed compile is a warning: the pure-Python modules are already in the package."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # no compiler, missing headers, a mypyc error
            _skip(f"build_ext failed ({type(exc).__name__}: {exc})")

    def build_extension(self, ext: Any) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:
            _skip(f"{ext.name} did not compile ({type(exc).__name__}: {exc})")


def _skip(why: str) -> None:
    print(f"pharos: pure-Python policy, not compiled: {why}", file=sys.stderr)


def _ext_modules() -> list[Any]:
    if os.environ.get("PHAROS_MYPYC", "1") == "0":
        _skip("PHAROS_MYPYC=0")
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        _skip("mypyc is not installed")
        return []
    try:
        return list(mypycify(COMPILED, opt_level="3", group_name="pharos_policy"))
    except BaseException as exc:  # mypyc exits on a type error: fall back, never fail install
        _skip(f"mypyc failed ({type(exc).__name__})")
        return []


NATIVE = [
    Extension("pharos.prefix._chainc", ["src/pharos/prefix/_chainc.c"], optional=True),
    Extension("pharos.prefix._indexc", ["src/pharos/prefix/_indexc.c"], optional=True),
    Extension("pharos.proxy._streamc", ["src/pharos/proxy/_streamc.c"], optional=True),
]
"""Plain C, no mypyc: the chat chain's links (prefix/_chainc.c; prefix/chain.py falls back to its
Python loop without it). 194-message 32 KiB chat: ~170-250 -> ~35 µs. Its message_links reads
proxy/parse.py's message Structs with raw JSON contents (without it parse decodes them strictly). The prefix index's per-link
loops (prefix/_indexc.c; prefix/links.py is the fallback). The upstream stream's chunk framing and
the tap's scan for usage names (proxy/_streamc.c; proxy/stream_scan.py is the fallback)."""


def _native_modules() -> list[Any]:
    return [] if os.environ.get("PHAROS_MYPYC", "1") == "0" else list(NATIVE)


setup(ext_modules=_ext_modules() + _native_modules(), cmdclass={"build_ext": OptionalBuildExt})
