"""The `pharos` command line: serve, demo, doctor, keys new, config check, version."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from pharos.cmd import demo, doctor, keys, serve, sim
from pharos.config import ConfigError, load_config

_FORMATTER = argparse.RawDescriptionHelpFormatter

MAIN_DESCRIPTION = """\
Pharos routes LLM requests across your own inference engines (Ollama, llama.cpp,
vLLM, SGLang, llama-swap, any OpenAI-compatible server). Each request goes where
its estimated time to first token is lowest, read from the engines' live signals.
"""

MAIN_EPILOG = """\
examples:
  pharos serve --config pharos.yaml        run the router
  pharos demo                              try it with fake engines, no GPU needed
  pharos doctor --url http://gpu-box:11434 see what Pharos reads from one engine
  pharos doctor --config pharos.yaml       ... from every configured backend
  pharos keys new --name alice             make a client key and its config entry
  pharos config check pharos.yaml          check a config file without starting anything
  pharos version                           the installed version

Run `pharos COMMAND --help` for the options of each command.
"""

SERVE_DESCRIPTION = """\
Run the router: an OpenAI- and Ollama-compatible API in front of the backends in
the config file. The file is re-read when it changes; keys and backends apply live.
Without --config, Pharos looks for engines on 127.0.0.1's default ports and
listens on 127.0.0.1:8090. SIGTERM drains: /healthz turns 503, requests are still
accepted for drain.grace, then streams in flight get drain.timeout to finish.
"""
SERVE_EPILOG = """\
examples:
  pharos serve                          find engines on this host's default ports
  pharos serve --config /etc/pharos/pharos.yaml
"""

DEMO_DESCRIPTION = """\
Start Pharos in front of in-process fake engines (a fake Ollama, llama.cpp and
vLLM), so you can send requests and watch routing without a GPU or a model.
"""
DEMO_EPILOG = """\
examples:
  pharos demo
  pharos demo --listen 127.0.0.1:9000
"""

DOCTOR_DESCRIPTION = """\
Show what Pharos reads from a backend: the engine kind and version, the probes it
uses with their values and sources (an HTTP path, the log, or an own probe from
config), the probes it dropped and why, and the signals nobody reports. It also
points out what tends to surprise a new user: a configured capacity the engine
overrides, aliases the engine does not list, Ollama :cloud models (their prompts
leave your network), and which coding-agent routes (/v1/messages for Claude Code,
/v1/responses for Codex) the backend answers.
Exit status: 0 when every backend answered, 1 when one answered nothing or its
kind could not be detected, 2 for bad arguments or a bad config file.
"""
DOCTOR_EPILOG = """\
examples:
  pharos doctor --url http://127.0.0.1:11434
  pharos doctor --url http://gpu-box:8000 --kind vllm --json
  pharos doctor --url http://127.0.0.1:11434 --log-feed file:///var/log/ollama.log
  pharos doctor --config pharos.yaml
  pharos doctor --url http://127.0.0.1:8080 --record captures/llamacpp/idle
  pharos doctor --url http://127.0.0.1:11434 --log-feed file:///tmp/ollama.log \\
      --record captures/ollama/idle --logs
"""

KEYS_DESCRIPTION = "Manage client keys. Keys live in the config file as SHA-256 hashes only."
KEYS_NEW_DESCRIPTION = """\
Make a new client key. The key is printed once, with the YAML entry (its SHA-256)
to add under `keys:` in the config file. Pharos never stores the key itself: keep
it somewhere safe and give it to the client.
"""
KEYS_NEW_EPILOG = """\
examples:
  pharos keys new --name alice
"""


CONFIG_CHECK_DESCRIPTION = """\
Parse a config file exactly as `pharos serve --config FILE` would, and say what is wrong
with it (each problem names its field), or what it holds. Nothing is started or contacted.
Exit status: 0 when the file is good, 1 when it is not.
"""
CONFIG_CHECK_EPILOG = """\
examples:
  pharos config check pharos.yaml
  pharos config check pharos.example.yaml
"""


def run_config_check(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.file)
    except ConfigError as err:
        sys.stderr.write(f"{err}\n")
        return 1
    keys = f"{len(config.keys)} keys" if config.keys else "no keys (open to every client)"
    sys.stdout.write(
        f"{args.file}: ok: {len(config.backends)} backends, {keys}, policy "
        f"{config.policy.value}, listen {config.listen}\n"
    )
    return 0


def run_version(_args: argparse.Namespace) -> int:
    sys.stdout.write(f"pharos {_package_version()}\n")
    return 0


def _package_version() -> str:
    try:
        return version("pharos")
    except PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pharos", description=MAIN_DESCRIPTION, epilog=MAIN_EPILOG, formatter_class=_FORMATTER
    )
    parser.add_argument("--version", action="version", version=f"pharos {_package_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    serve_parser = commands.add_parser(
        "serve",
        help="run the router",
        description=SERVE_DESCRIPTION,
        epilog=SERVE_EPILOG,
        formatter_class=_FORMATTER,
    )
    serve.add_serve_arguments(serve_parser)
    serve_parser.set_defaults(run=lambda args: serve.run_serve(args))

    demo_parser = commands.add_parser(
        "demo",
        help="try Pharos with fake engines (no GPU needed)",
        description=DEMO_DESCRIPTION,
        epilog=DEMO_EPILOG,
        formatter_class=_FORMATTER,
    )
    demo.add_demo_arguments(demo_parser)
    demo_parser.set_defaults(run=lambda args: demo.run_demo(args))

    doctor_parser = commands.add_parser(
        "doctor",
        help="show what Pharos reads from a backend, and why",
        description=DOCTOR_DESCRIPTION,
        epilog=DOCTOR_EPILOG,
        formatter_class=_FORMATTER,
    )
    doctor.add_doctor_arguments(doctor_parser)
    doctor_parser.set_defaults(run=lambda args: doctor.run_doctor(args, sys.stdout, sys.stderr))

    sim_parser = commands.add_parser(
        "sim",
        help="compare routing policies on simulated fleets",
        description=sim.SIM_DESCRIPTION,
        formatter_class=_FORMATTER,
    )
    sim.add_sim_arguments(sim_parser)
    sim_parser.set_defaults(run=lambda args: sim.run_sim(args))

    keys_parser = commands.add_parser(
        "keys", help="make client keys", description=KEYS_DESCRIPTION, formatter_class=_FORMATTER
    )
    key_commands = keys_parser.add_subparsers(dest="keys_command", metavar="COMMAND")
    keys_new = key_commands.add_parser(
        "new",
        help="make a new client key and its config entry",
        description=KEYS_NEW_DESCRIPTION,
        epilog=KEYS_NEW_EPILOG,
        formatter_class=_FORMATTER,
    )
    keys_new.add_argument(
        "--name", required=True, help="who the key is for; usage is recorded by it"
    )
    keys_new.set_defaults(run=lambda args: keys.run_keys_new(args, sys.stdout, sys.stderr))
    keys_parser.set_defaults(run=lambda _args: _usage_error(keys_parser))

    config_parser = commands.add_parser(
        "config", help="check a config file", formatter_class=_FORMATTER
    )
    config_commands = config_parser.add_subparsers(dest="config_command", metavar="COMMAND")
    config_check = config_commands.add_parser(
        "check",
        help="parse a config file and say what is wrong with it",
        description=CONFIG_CHECK_DESCRIPTION,
        epilog=CONFIG_CHECK_EPILOG,
        formatter_class=_FORMATTER,
    )
    config_check.add_argument("file", metavar="FILE", help="the config file")
    config_check.set_defaults(run=run_config_check)
    config_parser.set_defaults(run=lambda _args: _usage_error(config_parser))

    version_parser = commands.add_parser(
        "version", help="print the installed version", formatter_class=_FORMATTER
    )
    version_parser.set_defaults(run=run_version)
    return parser


def _usage_error(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run = getattr(args, "run", None)
    if run is None:
        return _usage_error(parser)
    try:
        status: int = run(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `pharos doctor --json | head`: the reader left, not an error of ours
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    return status


if __name__ == "__main__":
    sys.exit(main())
