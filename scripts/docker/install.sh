#!/usr/bin/env bash
# Installs Debian's docker.io and starts dockerd, idempotently.
# A daemon that already answers on the socket is used as is (it may be shared
# with other work on the machine); otherwise one is started in the background
# with --iptables=false --ip-forward=false (ready in about 0.5 s here).
# Prints the socket path on stdout.
set -euo pipefail

SOCK="${PHAROS_DOCKER_SOCK:-/var/run/docker.sock}"
CACHE="${PHAROS_DOCKER_CACHE:-$HOME/.cache/pharos/docker}"
mkdir -p "$CACHE"
log() { printf '[pharos-docker] %s\n' "$*" >&2; }
die() { printf '[pharos-docker] ERROR: %s\n' "$*" >&2; exit 1; }

answers() { curl -s --max-time 2 --unix-socket "$SOCK" http://docker/_ping 2>/dev/null | grep -q OK; }

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

if ! command -v dockerd >/dev/null 2>&1; then
  command -v apt-get >/dev/null 2>&1 || die "no dockerd and no apt-get: install Docker so that $SOCK answers"
  log "installing docker.io with apt"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO flock /tmp/pharos-apt.lock apt-get install -y -q --no-install-recommends docker.io >&2 \
    || { $SUDO flock /tmp/pharos-apt.lock apt-get update -q >&2 \
         && $SUDO flock /tmp/pharos-apt.lock apt-get install -y -q --no-install-recommends docker.io >&2; }
fi

# docker-compose (Debian's 1.29.2) runs the README's compose example in the e2e test.
if ! command -v docker-compose >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  log "installing docker-compose with apt"
  $SUDO flock /tmp/pharos-apt.lock apt-get install -y -q --no-install-recommends docker-compose >&2 \
    || log "docker-compose did not install; the e2e test needs it"
fi

# One starter at a time: two helpers racing here must not start two daemons.
exec 9>"$CACHE/dockerd-start.lock"
flock 9
if ! answers; then
  log "starting dockerd (log: $CACHE/dockerd.log)"
  $SUDO bash -c "nohup dockerd --iptables=false --ip-forward=false -H unix://$SOCK >>'$CACHE/dockerd.log' 2>&1 </dev/null 9>&- &"
  # (9>&-: the daemon must not inherit the start lock and hold it for its lifetime)
  for _ in $(seq 1 100); do
    answers && break
    sleep 0.1
  done
  answers || die "dockerd did not answer on $SOCK within 10 s; see $CACHE/dockerd.log"
fi
log "dockerd answers on $SOCK"
echo "$SOCK"
