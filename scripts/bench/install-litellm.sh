#!/usr/bin/env bash
# LiteLLM 1.110.2 in its own venv, for `make bench-compare` (issue 13). Idempotent, cached
# outside the repo. Its [proxy] extra pins packages that are not published, so this installs
# litellm plus the extra's other requirements, read from litellm's own metadata.
set -euo pipefail
VERSION=1.110.2
PYTHON=${PYTHON:-python3.11}
ROOT=${PHAROS_BENCH_CACHE:-$HOME/.cache/pharos/bench}
VENV=$ROOT/litellm-$VERSION
# Requirements of litellm[proxy] that PyPI does not have (pip reports them as not found).
UNPUBLISHED_RE=${LITELLM_UNPUBLISHED_RE:-'^(litellm-proxy|litellm-proxy-extras|litellm-enterprise)$'}

if [ -f "$VENV/.installed" ]; then
    echo "litellm $VERSION: $VENV"
    exit 0
fi
mkdir -p "$ROOT"
test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install -q "litellm==$VERSION"
"$VENV/bin/python" - "$UNPUBLISHED_RE" >"$VENV/proxy-requirements.txt" <<'PY'
import re, sys
from importlib.metadata import requires
from packaging.requirements import Requirement

skip = re.compile(sys.argv[1])
for line in requires("litellm") or []:
    req = Requirement(line)
    if req.marker is None or not req.marker.evaluate({"extra": "proxy"}):
        continue
    if req.marker.evaluate({"extra": ""}):
        continue  # not proxy-only: installed with litellm already
    if skip.match(req.name):
        continue
    req.marker = None
    print(req)
PY
echo "litellm[proxy] requirements installed:" && cat "$VENV/proxy-requirements.txt"
"$VENV/bin/pip" install -q -r "$VENV/proxy-requirements.txt"
touch "$VENV/.installed"
echo "litellm $VERSION: $VENV"
