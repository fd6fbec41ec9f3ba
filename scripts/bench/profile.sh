#!/usr/bin/env bash
# `make bench-profile`: where `pharos serve` spends a request (benchmarks/profile_proxy.py).
# Installs py-spy 0.4.3 into the repo's .venv and, for --callgrind, valgrind from Debian (under
# the shared apt lock), each only when missing. Arguments go to profile_proxy.py; default
# --callgrind, e.g. `bash scripts/bench/profile.sh --spy /tmp/pharos.spy --seconds 20`.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY_SPY_VERSION=0.4.3
test -x .venv/bin/py-spy || .venv/bin/pip install -q "py-spy==$PY_SPY_VERSION"
if [ "$#" -eq 0 ]; then set -- --callgrind; fi
case " $* " in
*" --callgrind "*)
    if ! command -v valgrind >/dev/null; then
        flock /tmp/pharos-apt.lock apt-get update -q
        DEBIAN_FRONTEND=noninteractive flock /tmp/pharos-apt.lock apt-get install -y -q valgrind
    fi
    ;;
esac
uptime >&2
exec .venv/bin/python benchmarks/profile_proxy.py "$@"
