#!/usr/bin/env bash
# Build a stand-in for the python:3.11-slim base image from Debian's packages, for a machine that
# reaches no container registry (docs/container-base.md says what it needs and what it does).
#
#   eval "$(scripts/container-base.sh)"   # prints: export CONTAINERS_CONF=... HALFMQ_BASE_IMAGE=...
#   podman build --format docker --build-arg BASE_IMAGE="$HALFMQ_BASE_IMAGE" -t halfmq .
#
# Idempotent: a second call reuses the image (or its saved copy) and takes seconds.
set -euo pipefail

image=localhost/halfmq-base:bookworm
cache=${HALFMQ_BASE_CACHE:-/var/cache/halfmq-base}
conf_dir=${XDG_CONFIG_HOME:-$HOME/.config}/halfmq-podman

if ! command -v podman >/dev/null || ! command -v runc >/dev/null || ! command -v debootstrap >/dev/null; then
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc debootstrap >&2
fi

mkdir -p "$conf_dir"
nofile=$(ulimit -Hn); [ "$nofile" = unlimited ] && nofile=65536
cat > "$conf_dir/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=${nofile}:${nofile}", "nproc=32768:32768"]
[engine]
runtime = "runc"
CONF
export CONTAINERS_CONF="$conf_dir/containers.conf"

announce() { printf 'export CONTAINERS_CONF=%q HALFMQ_BASE_IMAGE=%q\n' "$CONTAINERS_CONF" "$image"; }
if podman image exists "$image"; then announce; exit 0; fi
if [ -f "$cache/base.tar" ] && podman load -q -i "$cache/base.tar" >/dev/null; then announce; exit 0; fi

mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null \
  | grep -E '^(URIs:|deb )' | grep -oE 'https?://[^ ]+/debian/?( |$)' | head -n1 | tr -d ' ' || true)
mirror=${mirror:-http://deb.debian.org/debian}
work=$(mktemp -d)
rootfs="$work/rootfs"
trap 'umount "$rootfs/proc" 2>/dev/null || true; rm -rf "$work"' EXIT
debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >&2
mount -t proc proc "$rootfs/proc"
chroot "$rootfs" apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive chroot "$rootfs" apt-get install -y -qq --no-install-recommends \
  python3 python3-pip python3-venv ca-certificates >&2
if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
  chroot "$rootfs" update-ca-certificates >/dev/null
fi
chroot "$rootfs" python3 -m venv /opt/venv
chroot "$rootfs" apt-get clean
rm -rf "$rootfs/var/lib/apt/lists/"*
umount "$rootfs/proc"
tar -C "$rootfs" -c . | podman import \
  --change 'ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV VIRTUAL_ENV=/opt/venv' \
  --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
  --change 'CMD ["python3"]' - "$image" >/dev/null
mkdir -p "$cache" && podman save -q -o "$cache/base.tar" "$image" >/dev/null || true
announce
