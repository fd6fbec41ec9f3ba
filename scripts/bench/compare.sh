#!/usr/bin/env bash
# `make bench-compare`: installs LiteLLM 1.110.2 into its own venv (cached under
# ~/.cache/pharos/bench), then runs benchmarks/compare.py. Extra arguments go to compare.py,
# e.g. `bash scripts/bench/compare.sh --requests 2000 --seconds 20`.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=${PHAROS_BENCH_CACHE:-$HOME/.cache/pharos/bench}
bash scripts/bench/install-litellm.sh >&2
uptime >&2
nproc >&2
exec .venv/bin/python benchmarks/compare.py --litellm "$ROOT/litellm-1.110.2" "$@"
