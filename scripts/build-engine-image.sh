#!/usr/bin/env bash
# Build the image of a Docker engine that runs inside a container, for the
# "engine elsewhere" e2e tests (internal/testutil/enginehost): a Debian root
# from Debian's archive (`debootstrap --variant=minbase`, the archive this
# machine's apt already uses, or MCPSIDECAR_DEBIAN_MIRROR) with Debian's
# docker.io and what dockerd needs, imported with `docker import`. No
# registry is used, here or by the engine the image runs.
#
#   trixie   (default) docker.io 26.1: a current engine
#   bookworm docker.io 20.10: an engine older than 26, on which the host
#            would have to remove the default route inside each internal
#            container (dockerx.DropDefaultRoutes), the most dangerous use of
#            a process id the engine names
#
# Cached twice: the root file system as a tarball under
# /var/cache/mcpsidecar-engine/, keyed by a hash of its recipe (version,
# suite, mirror, package list), so that a removed image is imported again
# in seconds; and the image, tagged mcpsidecar-engine:<suite>-<12 hex>, a
# hash of the root's recipe and the entry point. Present: nothing is done.
# --force rebuilds both. The tag is printed on stdout; progress and errors
# go to stderr.
#
# Usage: scripts/build-engine-image.sh [--suite trixie|bookworm] [--force]
#   MCPSIDECAR_DEBIAN_MIRROR  archive URL (default: from the host's apt sources)
#   MCPSIDECAR_ENGINE_CACHE   cache directory (default /var/cache/mcpsidecar-engine)
# Needs: root, debootstrap and jq (scripts/setup.sh installs them), docker.
#
# The image's entry point makes /sys and the cgroup v1 hierarchies
# writable, then runs dockerd with the arguments it is given. How to run
# the container (capabilities, security options, devices, data root) is
# in docs/testing.md and in enginehost's package doc.
set -euo pipefail

suite=trixie
force=0
while (($#)); do
  case "$1" in
  --suite) suite="${2:?--suite needs a value}"; shift 2 ;;
  --suite=*) suite="${1#--suite=}"; shift ;;
  --force) force=1; shift ;;
  *) echo "usage: $0 [--suite trixie|bookworm] [--force]" >&2; exit 2 ;;
  esac
done

die() { echo "build-engine-image: $*" >&2; exit 5; }
say() { echo "build-engine-image: $*" >&2; }

case "$suite" in trixie | bookworm) ;; *) die "suite $suite: only trixie (engine 26) and bookworm (engine 20.10) are known" ;; esac
command -v jq >/dev/null || die "jq is not installed (apt-get install -y jq)"
docker info >/dev/null 2>&1 || die "the Docker daemon is not reachable"

mirror="${MCPSIDECAR_DEBIAN_MIRROR:-}"
if [[ -z "$mirror" ]]; then
  # deb822 (URIs: ...) or one-line (deb URL suite ...) sources; skip security.
  mirror="$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null |
    awk '/^URIs:/{print $2} /^deb /{for(i=2;i<=NF;i++) if ($i ~ /^https?:/) {print $i; break}}' |
    grep -v -- '-security' | head -1 || true)"
  mirror="${mirror:-http://deb.debian.org/debian}"
fi
# docker.io brings containerd, runc, tini (docker-init) and iptables;
# procps and iproute2 are there to look inside when a test fails.
packages="docker.io,iptables,procps,iproute2"

# The entry point, kept in the image's configuration rather than in the
# cached root, so that changing it costs an import, not a debootstrap.
# Docker mounts /sys and the cgroup v1 hierarchies read-only in a container
# that is not --privileged (refused by runc on this machine, whose
# capability set lacks CAP_SYS_RESOURCE), and dockerd must write there.
# With MCPSIDECAR_ENGINE_WAIT_FOR set, it first waits (up to a minute) for
# that file: a test that makes TLS certificates for the container's
# address, known only once it runs, creates it when they are in place.
entry='mount -o remount,rw /sys
for d in /sys/fs/cgroup/*; do
  if mountpoint -q "$d"; then mount -o remount,bind,rw "$d"; fi
done
if [ -n "${MCPSIDECAR_ENGINE_WAIT_FOR:-}" ]; then
  i=0
  while [ ! -e "$MCPSIDECAR_ENGINE_WAIT_FOR" ]; do
    i=$((i + 1))
    [ "$i" -le 600 ] || { echo "mcpsidecar-engine-entry: $MCPSIDECAR_ENGINE_WAIT_FOR never came" >&2; exit 1; }
    sleep 0.1
  done
fi
exec dockerd "$@"'
entrypoint="$(jq -cn --arg s "$entry" '["/bin/sh", "-ec", $s, "mcpsidecar-engine-entry"]')"

# Bump when a step below changes what the root holds (comments do not count).
root_version=1
root_recipe="$(printf '%s\n' "$root_version" "$suite" "$mirror" "$packages" | sha256sum | cut -c1-12)"
recipe="$(printf '%s\n' "$root_recipe" "$entrypoint" | sha256sum | cut -c1-12)"
tag="mcpsidecar-engine:$suite-$recipe"
cache="${MCPSIDECAR_ENGINE_CACHE:-/var/cache/mcpsidecar-engine}"
tarball="$cache/$suite-$root_recipe.tar"

if [[ $force == 0 ]] && docker image inspect "$tag" >/dev/null 2>&1; then
  say "$tag is already built (cached; --force rebuilds)"
  echo "$tag"
  exit 0
fi
[[ $(id -u) == 0 ]] || die "building $tag needs root (debootstrap, chroot)"
# One build of a suite at a time: a second caller waits for the first's
# image (two at once wrote the same tarball.part, and one's mv failed).
mkdir -p "$cache"
exec 9>"$cache/.lock-$suite"
flock 9
if [[ $force == 0 ]] && docker image inspect "$tag" >/dev/null 2>&1; then
  say "$tag was built meanwhile by another caller"
  echo "$tag"
  exit 0
fi
start=$(date +%s)

if [[ $force == 1 || ! -s "$tarball" ]]; then
  command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install -y debootstrap)"
  [[ -e "/usr/share/debootstrap/scripts/$suite" ]] || die "this debootstrap does not know $suite (upgrade debootstrap)"
  mkdir -p "$cache"
  root="$(mktemp -d /var/tmp/mcpsidecar-engine.XXXXXX)"
  trap 'rm -rf "$root" "$root.log" "$tarball.part"' EXIT
  say "debootstrap --variant=minbase $suite from $mirror with $packages (3 to 8 minutes)"
  debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" >"$root.log" 2>&1 ||
    { tail -20 "$root.log" >&2; die "debootstrap failed (log above)"; }
  # Trim what an engine never needs: apt lists and caches, docs, man pages.
  rm -rf "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* \
    "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/var/log/*
  for bin in sh mount mountpoint dockerd containerd runc docker-init iptables; do
    chroot "$root" sh -c "command -v $bin" >/dev/null || die "$bin is missing from the $suite root"
  done
  chroot "$root" dpkg-query -W -f='${Version}\n' docker.io >"$root/etc/mcpsidecar-engine-version"
  say "packing the root ($(du -sh "$root" | cut -f1)) into $tarball"
  tar -C "$root" --numeric-owner -cf "$tarball.part" .
  mv "$tarball.part" "$tarball"
else
  say "importing the cached root $tarball"
fi

version="$(tar -xOf "$tarball" ./etc/mcpsidecar-engine-version)"
docker import \
  --change "ENTRYPOINT $entrypoint" \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'LABEL mcpsidecar=1' \
  --change 'LABEL mcpsidecar.image=engine' \
  --change "LABEL mcpsidecar.debian.suite=$suite" \
  --change "LABEL mcpsidecar.engine.package=$version" \
  "$tarball" "$tag" >/dev/null
say "built $tag (Debian $suite, docker.io $version) in $(($(date +%s) - start))s"
echo "$tag"
