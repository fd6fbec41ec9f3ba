"""`pharos sim`: compare routing policies on simulated fleets (pharos.sim), as a table."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from pharos.sim import (
    ALL_POLICIES,
    BASELINES,
    SCENARIOS,
    class_table,
    moves,
    simulate_streams,
    table,
    ttft_cdf_svg,
)
from pharos.sim.sharegpt import DatasetMissing, dataset_path
from pharos.sim.tally import VerdictTally

SIM_DESCRIPTION = (
    "Replay seeded multi-user workloads against simulated engines (slots, prompt caches, "
    "model loads, on virtual time) through Pharos's real scheduler, prefix index and policy, "
    "and through baseline routers, and print what each achieved: prompt-cache hit ratio "
    "(cached / prompt tokens), model loads, TTFT p50/p95/p99 in seconds, fairness across "
    "keys (Jain's index, 1 = equal) and turns served. Figures per seed, `a / b / c`."
)


def add_sim_arguments(parser: argparse.ArgumentParser) -> None:
    names = ", ".join(f"{s.name} ({s.about})" for s in SCENARIOS.values())
    parser.add_argument(
        "--scenario",
        "-s",
        default="chat",
        help=f"a scenario name, several comma-separated, or `all`: {names}",
    )
    parser.add_argument(
        "--policies",
        default=",".join(ALL_POLICIES),
        help=f"comma-separated (default: all of {', '.join(ALL_POLICIES)})",
    )
    parser.add_argument("--seeds", default="1,2,3", help="comma-separated seeds (default 1,2,3)")
    parser.add_argument(
        "--duration", type=float, default=None, help="virtual seconds per run (default: 600)"
    )
    parser.add_argument(
        "--moves",
        action="store_true",
        help="after each scenario, per seed: the follow-ups cost sent to another engine than "
        "the turn before, and their cached tokens and TTFT against the same turns under sticky",
    )
    parser.add_argument(
        "--plot", metavar="DIR", default=None, help="write a TTFT CDF SVG per scenario"
    )
    parser.add_argument(
        "--tie-stream",
        default="0",
        help="another draw of the random seeds Pharos's requests break exact ties with (0: the "
        "default); the workload and the baselines' runs stay the same. Several, comma-separated "
        "(0,1,2,3): Pharos's policies run on each, the baselines once, the tables and per-seed "
        "lines are the first stream's, and --verdict counts the comparisons lost on every "
        "stream apart from those lost on some only, which tie breaks decide",
    )
    parser.add_argument(
        "--verdict",
        action="store_true",
        help="after each scenario, say per seed whether cost is at least as good as the best "
        "baseline run on hit ratio, TTFT p50 and p95 and, where the engines differ in speed or "
        "load, strictly better than sticky on p50 and p95; exit 1 if it loses any. Then each "
        "router judged the same way against the best of the others (without the sticky "
        "rule), which says how hard that bar is",
    )


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def run_sim(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    names = list(SCENARIOS) if args.scenario == "all" else _split(args.scenario)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        err.write(
            f"pharos sim: --scenario: unknown {', '.join(unknown)}; one of {', '.join(SCENARIOS)}\n"
        )
        return 2
    policies = _split(args.policies)
    bad = [p for p in policies if p not in ALL_POLICIES]
    if bad or not policies:
        known = ", ".join(ALL_POLICIES)
        err.write(f"pharos sim: --policies: unknown {', '.join(bad) or '(none)'}; one of {known}\n")
        return 2
    try:
        seeds = [int(s) for s in _split(args.seeds)]
    except ValueError:
        err.write(
            f"pharos sim: --seeds: {args.seeds!r} is not a comma-separated list of integers\n"
        )
        return 2
    if args.duration is not None and not 0 < args.duration <= 86_400:
        err.write("pharos sim: --duration: a number of seconds from 1 to 86400\n")
        return 2
    try:
        streams = [int(k) for k in _split(args.tie_stream)]
    except ValueError:
        streams = []
    if not streams or min(streams) < 0 or len(set(streams)) < len(streams):
        err.write(
            f"pharos sim: --tie-stream: {args.tie_stream!r} is not a stream number (0 or more) "
            "or a comma-separated list of different ones\n"
        )
        return 2
    if args.moves and not {"cost", "sticky"} <= set(policies):
        err.write("pharos sim: --moves compares cost with sticky: give both in --policies\n")
        return 2
    tally = VerdictTally(streams)
    stream_list = ",".join(map(str, streams))
    for name in names:
        scenario = SCENARIOS[name]
        if args.duration is not None:
            scenario = scenario.with_duration(args.duration)
        if scenario.uses_sharegpt and args.scenario == "all" and not dataset_path().exists():
            out.write(f"== {name}: skipped, no ShareGPT data at {dataset_path()}\n\n")
            continue
        try:
            runs = simulate_streams(scenario, policies, seeds, streams)
        except DatasetMissing as missing:
            err.write(f"pharos sim: --scenario {name}: {missing}\n")
            return 2
        results = runs[0]
        if len(streams) > 1:
            stream = f", tie streams {stream_list} (tables: {streams[0]})"
        else:
            stream = f", tie stream {streams[0]}" if streams[0] else ""
        heading = f"== {name}: {scenario.about}; {scenario.duration_s:.0f} s"
        out.write(f"{heading}, seeds {args.seeds}{stream}\n")
        out.write(table(results) + "\n\nTTFT by request class (seeds pooled):\n")
        out.write(class_table(results) + "\n\n")
        if args.verdict:
            baselines = [p for p in policies if p in BASELINES]
            if "cost" not in policies or not baselines:
                err.write(
                    "pharos sim: --verdict needs cost and at least one baseline in --policies\n"
                )
                return 2
            strictly = "sticky" if scenario.engines_differ and "sticky" in baselines else None
            lines = tally.add(
                runs, baselines, strictly_beats=strictly, engines_differ=scenario.engines_differ
            )
            out.write(f"verdict:\n{lines}\n\n")
        if args.moves:
            out.write(f"moves:\n{moves(results, 'cost', 'sticky')}\n\n")
        if args.plot is not None:
            path = Path(args.plot) / f"sim-{name}.svg"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(ttft_cdf_svg(results, f"{name}: {scenario.about}"))
            out.write(f"plot: {path}\n\n")
    if args.verdict:
        out.write(tally.summary())
        return 1 if tally.losses else 0
    return 0
