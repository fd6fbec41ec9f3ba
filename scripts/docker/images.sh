#!/usr/bin/env bash
# Makes the local images the Docker tests and the Dockerfile need, idempotently.
# There is no registry on these machines, so:
#   pharos-busybox:local  busybox-static rootfs through `docker import` (~1 s, 2 MB).
#                         /lib and /lib64 point into /usr, so mounting the host's /usr
#                         read-only runs the host's python or llama-server in it.
#   python:3.11-slim      only when no such image exists: debootstrap minbase bookworm
#                         (python3 is 3.11.2 there) + python3-venv + ca-certificates,
#                         trimmed, /usr/local/bin/python like the official image
#                         (~60 s the first time; the tar is cached under $CACHE).
# Both are tagged once; later runs find them and return at once.
set -euo pipefail

CACHE="${PHAROS_DOCKER_CACHE:-$HOME/.cache/pharos/docker}"
BUSYBOX_IMAGE="${PHAROS_BUSYBOX_IMAGE:-pharos-busybox:local}"
PYTHON_IMAGE="${PHAROS_PYTHON_IMAGE:-python:3.11-slim}"
mkdir -p "$CACHE"
log() { printf '[pharos-docker] %s\n' "$*" >&2; }
die() { printf '[pharos-docker] ERROR: %s\n' "$*" >&2; exit 1; }
have_image() { docker image inspect "$1" >/dev/null 2>&1; }
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  $SUDO flock /tmp/pharos-apt.lock apt-get install -y -q --no-install-recommends "$@" >&2 \
    || { $SUDO flock /tmp/pharos-apt.lock apt-get update -q >&2 \
         && $SUDO flock /tmp/pharos-apt.lock apt-get install -y -q --no-install-recommends "$@" >&2; }
}

exec 9>"$CACHE/images.lock"
flock 9

if ! have_image "$BUSYBOX_IMAGE"; then
  tar_path="$CACHE/busybox-rootfs.tar"
  if [ ! -s "$tar_path" ]; then
    log "making the busybox rootfs"
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    (cd "$work" && apt-get download busybox-static >&2)
    dpkg-deb -x "$work"/busybox-static_*.deb "$work/root"
    root="$work/root"
    mkdir -p "$root/usr" "$root/tmp" "$root/etc" "$root/proc" "$root/sys" "$root/dev"
    chmod 1777 "$root/tmp"
    ln -s usr/lib "$root/lib"
    ln -s usr/lib64 "$root/lib64"
    for applet in $("$root/bin/busybox" --list); do
      [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
    done
    echo 'root:x:0:0:root:/root:/bin/sh' >"$root/etc/passwd"
    echo 'nobody:x:65534:65534:nobody:/nonexistent:/bin/false' >>"$root/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
    tar -C "$root" -cf "$tar_path.tmp" . && mv "$tar_path.tmp" "$tar_path"
    rm -rf "$work"
    trap - EXIT
  fi
  docker import -c 'ENV PATH=/usr/local/bin:/usr/bin:/bin' "$tar_path" "$BUSYBOX_IMAGE" >&2
  log "imported $BUSYBOX_IMAGE"
fi

if ! have_image "$PYTHON_IMAGE"; then
  tar_path="$CACHE/bookworm-python3.tar"
  if [ ! -s "$tar_path" ]; then
    command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap
    log "debootstrap bookworm with python3 (about a minute)"
    work="$(mktemp -d)"
    trap '$SUDO rm -rf "$work"' EXIT
    $SUDO debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
      bookworm "$work/root" http://deb.debian.org/debian >&2
    root="$work/root"
    $SUDO rm -rf "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/locale/* \
      "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* "$root"/var/log/*
    # Like the official image: `python` on PATH and pip usable without PEP 668's guard.
    $SUDO ln -sf /usr/bin/python3 "$root/usr/local/bin/python"
    $SUDO ln -sf /usr/bin/python3 "$root/usr/local/bin/python3"
    $SUDO rm -f "$root"/usr/lib/python3.*/EXTERNALLY-MANAGED
    $SUDO tar -C "$root" -cf "$tar_path.tmp" . && mv "$tar_path.tmp" "$tar_path"
    $SUDO rm -rf "$work"
    trap - EXIT
  fi
  docker import -c 'ENV PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    -c 'ENV LANG=C.UTF-8' -c 'CMD ["python3"]' "$tar_path" "$PYTHON_IMAGE" >&2
  # The image trusts what this host trusts: pip inside `docker build --network host` goes
  # through the same TLS path as the host's pip (which may have its own CA bundle).
  if [ -s /etc/ssl/certs/ca-certificates.crt ]; then
    ctx="$(mktemp -d)"
    cp /etc/ssl/certs/ca-certificates.crt "$ctx/"
    printf 'FROM %s\nCOPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt\n' \
      "$PYTHON_IMAGE" >"$ctx/Dockerfile"
    docker build -q -t "$PYTHON_IMAGE" "$ctx" >&2
    rm -rf "$ctx"
  fi
  log "imported $PYTHON_IMAGE (made locally from debootstrap bookworm)"
fi

echo "$BUSYBOX_IMAGE $PYTHON_IMAGE"
