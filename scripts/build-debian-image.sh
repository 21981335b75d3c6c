#!/usr/bin/env bash
# Build a minimal Debian image with Debian's python3, for running
# examples/python-agent and `test-sandbox --image` on a machine where nothing
# can be pulled from a registry: `debootstrap --variant=minbase` from the
# Debian archive this machine's apt already uses (the first deb.debian.org-style
# URI in /etc/apt/sources.list*, or MCPSIDECAR_DEBIAN_MIRROR), plus python3 and
# ca-certificates, imported with `docker import`.
#
# The tag is the content of the recipe: a hash of its version (bumped when
# the steps change), the suite, the mirror and the package list (mcpsidecar-debian-python:<12 hex>). An image
# with that tag already present is reused, so the image is built once per
# machine (per recipe); pass --force to rebuild. The tag is printed on stdout.
#
# Usage: scripts/build-debian-image.sh [--force]
#   MCPSIDECAR_DEBIAN_SUITE   suite (default: the host's VERSION_CODENAME, else bookworm)
#   MCPSIDECAR_DEBIAN_MIRROR  archive URL (default: from the host's apt sources)
#   MCPSIDECAR_IMAGE_LABELS   "k=v k2=v2" extra labels (the e2e tests add mcpsidecar.test=1)
# Needs: root, debootstrap (.ci/run installs it), docker.
#
# The image has no entrypoint of its own worth keeping (mcpsidecar replaces it
# with its launcher); its default user is nobody (65534), its default command
# python3.
set -euo pipefail

force=0
[[ "${1:-}" == "--force" ]] && force=1

die() { echo "build-debian-image: $*" >&2; exit 5; }

command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install -y debootstrap)"
docker info >/dev/null 2>&1 || die "the Docker daemon is not reachable"
[[ $(id -u) == 0 ]] || die "debootstrap needs root"

suite="${MCPSIDECAR_DEBIAN_SUITE:-}"
if [[ -z "$suite" ]]; then
  suite="$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")"
  suite="${suite:-bookworm}"
fi
mirror="${MCPSIDECAR_DEBIAN_MIRROR:-}"
if [[ -z "$mirror" ]]; then
  # deb822 (URIs: ...) or one-line (deb URL suite ...) sources; skip security.
  mirror="$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null |
    awk '/^URIs:/{print $2} /^deb /{for(i=2;i<=NF;i++) if ($i ~ /^https?:/) {print $i; break}}' |
    grep -v -- '-security' | head -1 || true)"
  mirror="${mirror:-http://deb.debian.org/debian}"
fi
packages="python3-minimal,libpython3-stdlib,ca-certificates"

# Bump when a step below changes what the image holds (comments do not count).
recipe_version=1
recipe="$(printf '%s\n' "$recipe_version" "$suite" "$mirror" "$packages" | sha256sum | cut -c1-12)"
tag="mcpsidecar-debian-python:$recipe"

if [[ $force == 0 ]] && docker image inspect "$tag" >/dev/null 2>&1; then
  echo "build-debian-image: $tag is already built (cached; --force rebuilds)" >&2
  echo "$tag"
  exit 0
fi

root="$(mktemp -d /var/tmp/mcpsidecar-debian.XXXXXX)"
trap 'rm -rf "$root"' EXIT
start=$(date +%s)
echo "build-debian-image: debootstrap --variant=minbase $suite from $mirror" >&2
debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" >"$root.log" 2>&1 ||
  { tail -20 "$root.log" >&2; rm -f "$root.log"; die "debootstrap failed (log above)"; }
rm -f "$root.log"

# Trim what a read-only workload image never needs: apt lists and caches,
# docs, man pages, locales (C.UTF-8 stays in libc).
rm -rf "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* \
  "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/var/log/*
# The directories mcpsidecar mounts over (they must exist in a read-only root).
mkdir -p "$root/sandbox-work" "$root/sandbox-output" "$root/sandbox-input"
chmod 1777 "$root/tmp"

python_version="$(chroot "$root" /usr/bin/python3 -c 'import sys; print(sys.version.split()[0])')"
extra=()
for kv in ${MCPSIDECAR_IMAGE_LABELS:-}; do
  extra+=(--change "LABEL $kv")
done
tar -C "$root" --numeric-owner -c . | docker import "${extra[@]}" \
  --change 'USER 65534:65534' \
  --change 'WORKDIR /sandbox-work' \
  --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1' \
  --change 'CMD ["/usr/bin/python3"]' \
  --change 'LABEL mcpsidecar=1' \
  --change 'LABEL mcpsidecar.image=debian-python' \
  --change "LABEL mcpsidecar.debian.suite=$suite" \
  --change "LABEL mcpsidecar.python.version=$python_version" \
  - "$tag" >/dev/null
echo "build-debian-image: built $tag (Debian $suite, Python $python_version) in $(($(date +%s) - start))s" >&2
echo "$tag"
