"""`make scenario` (python -m benchmarks.scenario): issue 15's table on real llama-servers.

Every policy gets a freshly started fleet (cold caches) and the same seeded sessions; each
fleet prints one Markdown table. Needs the live tests' engines in ~/.cache/pharos/engines:
`bash scripts/engines/install-all.sh` (make live runs it). Reports, never asserts.

    make scenario                                         # equal engines, 4 policies, 100 s each
    make scenario ARGS="--fleet bypass,speed,models --repeat 2"   # and the runs pooled
    PYTHONPATH=/work/wt/sim/src:. .venv/bin/python -m benchmarks.scenario \\
        --policies pharos-cost,pharos-least-load          # another checkout's policy
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.scenario import pooled
from benchmarks.scenario.client import TurnResult
from benchmarks.scenario.conversations import SOURCES, SourceMissing, conversations
from benchmarks.scenario.fleets import FLEETS, check_installed
from benchmarks.scenario.policies import POLICIES, PolicyRun, run_policy
from benchmarks.scenario.report import table
from tests.live.engines import EngineMissing

import pharos


class NothingPlanned(Exception):
    """The duration is too short for any user to send a turn."""


def _names(text: str, known: tuple[str, ...], what: str) -> tuple[str, ...]:
    names = tuple(n for n in text.split(",") if n)
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown {what} {', '.join(unknown) or '(none given)'}; choose from {', '.join(known)}"
        )
    return names


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scenario",
        description=(__doc__ or "").splitlines()[0],
        epilog="fleets: " + "; ".join(f"{f.name}: {f.about}" for f in FLEETS.values()),
    )
    parser.add_argument(
        "--fleet",
        type=lambda t: _names(t, tuple(FLEETS), "fleet"),
        default=("equal",),
        help="comma-separated: " + ",".join(FLEETS) + " (default equal)",
    )
    parser.add_argument(
        "--policies",
        type=lambda t: _names(t, POLICIES, "policy"),
        default=POLICIES,
        help="comma-separated, run in this order (default " + ",".join(POLICIES) + ")",
    )
    parser.add_argument("--duration", type=float, default=100.0, help="seconds per policy")
    parser.add_argument("--users", type=int, default=6, help="chat users (default 6)")
    parser.add_argument("--seed", type=int, default=1, help="the sessions' seed (default 1)")
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs per fleet; every second run reverses the order"
    )
    parser.add_argument(
        "--sessions",
        choices=SOURCES,
        default="synthetic",
        help="synthetic (the simulator's chats, default) or sharegpt (ShareGPT V3; make "
        "scenario fetches it and uses it)",
    )
    parser.add_argument(
        "--think-scale",
        type=float,
        default=0.25,
        help="multiplies the sessions' think times (default 0.25: 1.25-7.5 s)",
    )
    parser.add_argument(
        "--echo",
        action="store_true",
        help="send the engine's own reply back as the assistant message, as chat UIs do "
        "(default: the session's answer, the same history under every policy)",
    )
    parser.add_argument(
        "--key-per-user",
        action="store_true",
        help="Pharos runs with one API key per user, each user sending theirs, as a team gives "
        "each person a key (default: no keys, every client one anonymous key)",
    )
    parser.add_argument("--out", type=Path, help="also append every turn to this JSON-lines file")
    parser.add_argument(
        "--logs", type=Path, help="keep the engines' logs here (default: a temp dir)"
    )
    args = parser.parse_args(argv)
    if args.duration <= 0 or args.users < 1 or args.repeat < 1 or args.think_scale <= 0:
        parser.error("--duration, --users, --repeat and --think-scale must be positive")
    return args


def _write_turns(path: Path, fleet: str, repeat: int, run: PolicyRun) -> None:
    with path.open("a") as out:
        for turn in run.turns:
            record = {
                "fleet": fleet,
                "repeat": repeat,
                "engine_index": run.engines.index(turn.engine)
                if turn.engine in run.engines
                else None,
                "load_before": run.load_before,
                **dataclasses.asdict(turn),
            }
            out.write(json.dumps(record) + "\n")


async def _fleet(args: argparse.Namespace, name: str, log_dir: Path) -> None:
    fleet = FLEETS[name]
    convs = conversations(
        users=args.users,
        bypass=fleet.bypass,
        models=fleet.models,
        duration_s=args.duration,
        seed=args.seed,
        source=args.sessions,
        think_scale=args.think_scale,
    )
    if not any(conv.turns for conv in convs if not conv.bypasses_router):
        raise NothingPlanned(
            f"no user sends a turn within --duration {args.duration:g} s (a user's first "
            f"think time alone can be longer); give a longer --duration"
        )
    print(
        f"\n### fleet {name}: {fleet.about}\n"
        f"{os.cpu_count()} cores; {args.users} users back to back, {args.sessions} sessions "
        f"(seed {args.seed}, at most {max(len(c.turns) for c in convs)} turns each, think "
        f"x{args.think_scale:g}{', replies echoed' if args.echo else ''}"
        f"{', a key per user' if args.key_per_user else ''}), "
        f"{args.duration:.0f} s per policy; "
        f"pharos from {Path(pharos.__file__).parent}",
        flush=True,
    )
    runs_by_policy: dict[str, list[list[TurnResult]]] = {p: [] for p in args.policies}
    for repeat in range(args.repeat):
        order = args.policies if repeat % 2 == 0 else tuple(reversed(args.policies))
        runs = []
        for policy in order:
            print(f"  {name} run {repeat + 1}: {policy} for {args.duration:.0f} s", file=sys.stderr)
            tag = f"{name}-{repeat}-{policy}"
            run = await run_policy(
                policy,
                fleet,
                convs,
                args.duration,
                log_dir,
                tag,
                echo=args.echo,
                key_per_user=args.key_per_user,
            )
            runs.append(run)
            runs_by_policy[policy].append(list(run.turns))
            if args.out is not None:
                _write_turns(args.out, name, repeat, run)
        stamp = time.strftime("%H:%M UTC", time.gmtime())
        print(f"\nrun {repeat + 1} (ended {stamp}):\n{table(runs)}", flush=True)
    if args.repeat > 1:
        print(f"\n{args.repeat} runs pooled:\n{pooled.table(runs_by_policy)}", flush=True)


def _stop_on_sigterm(_signum: int, _frame: object) -> None:
    """SIGTERM unwinds like Ctrl-C, so every engine started is stopped on the way out."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        for name in args.fleet:
            check_installed(FLEETS[name])
        conversations(
            users=1, bypass=False, models=("m",), duration_s=1.0, seed=1, source=args.sessions
        )
    except (EngineMissing, SourceMissing) as err:
        print(f"scenario: {err}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="pharos-scenario-") as temp:
        log_dir = args.logs if args.logs is not None else Path(temp)
        try:
            for name in args.fleet:
                asyncio.run(_fleet(args, name, log_dir))
        except NothingPlanned as err:
            print(f"scenario: {err}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print("scenario: interrupted; every engine it started is stopped", file=sys.stderr)
            return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
