#!/usr/bin/env bash
# Validates Kubernetes manifests (default: deploy/peers/kubernetes.yaml) against the API
# schemas of Kubernetes 1.37, offline: PyPI's kubernetes-validate bundles them. There is no
# cluster on these machines, so this is how the manifests are checked before anyone applies
# them (tests/live/test_peers_kubernetes.py). Installs into a venv cached outside the repo
# (~/.cache/pharos/kubernetes-validate, about 150 MB, once), idempotently; --strict also
# rejects fields the schema doesn't know (a typo'd field would be silently dropped by kubectl
# apply on older clusters).
set -euo pipefail

VERSION=1.37.0
CACHE="${PHAROS_KUBE_VALIDATE_CACHE:-$HOME/.cache/pharos/kubernetes-validate}"
PYTHON="${PYTHON:-python3.11}"
VENV="$CACHE/venv-$VERSION"
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$CACHE"

exec 9>"$CACHE/install.lock"
flock 9
if [ ! -f "$VENV/.installed" ]; then
  rm -rf "$VENV"
  printf '[pharos-kube] installing kubernetes-validate %s into %s\n' "$VERSION" "$VENV" >&2
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q "kubernetes-validate==$VERSION" >&2
  touch "$VENV/.installed"
fi
flock -u 9

[ "$#" -gt 0 ] || set -- "$here/kubernetes.yaml"
exec "$VENV/bin/kubernetes-validate" --strict --kubernetes-version "${VERSION%.*}" "$@"
