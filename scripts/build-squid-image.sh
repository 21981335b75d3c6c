#!/usr/bin/env bash
# Build the local Squid gateway image (default tag mcpsidecar-squid:local) from
# the Debian `squid` package installed on this host, without pulling anything
# from a registry: copy /usr/sbin/squid, the helpers it may start, every shared
# library they load (per ldd) and the dynamic loader, the error templates, icons
# and mime.conf, a minimal passwd/group, into a root filesystem, and
# `docker import` it. No shell, no package manager in the image.
#
# Usage: scripts/build-squid-image.sh [TAG]
#   MCPSIDECAR_IMAGE_LABELS="k=v k2=v2" adds labels (the e2e tests add
#   mcpsidecar.test=1 so cleanup can find the image).
#   Needs: squid (apt-get install -y squid; .ci/run installs it), docker, ldd.
#
# Running it (the harness does this for --gateway-engine squid):
#   docker run --read-only --tmpfs /run --tmpfs /tmp --tmpfs /var/spool/squid \
#     -v <run>/gateway:/sandbox-output -v <run>/squid.conf:/etc/squid/squid.conf:ro TAG
# It runs as the unprivileged user proxy (13:13); the access log goes wherever
# squid.conf says (/sandbox-output/access.log in the generated one).
set -euo pipefail

tag="${1:-mcpsidecar-squid:local}"
squid_bin="$(command -v squid || true)"
if [[ -z "$squid_bin" ]]; then
  echo "build-squid-image: squid is not installed (apt-get install -y squid)" >&2
  exit 5
fi
if ! docker info >/dev/null 2>&1; then
  echo "build-squid-image: the Docker daemon is not reachable" >&2
  exit 5
fi

root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT

# copy PATH into the rootfs at the same path, following symbolic links.
copy() {
  local src="$1"
  mkdir -p "$root$(dirname "$src")"
  cp -L --preserve=mode "$src" "$root$src"
}

# copy_elf copies a binary and every library ldd says it loads.
copy_elf() {
  copy "$1"
  { ldd "$1" || true; } | awk '/=> \//{print $3} /^\t\/.*ld-linux/{print $1}' | while read -r lib; do
    [[ -e "$root$lib" ]] || copy "$lib"
  done
}

copy_elf /usr/sbin/squid
for helper in pinger unlinkd log_file_daemon diskd; do
  [[ -x /usr/lib/squid/$helper ]] && copy_elf "/usr/lib/squid/$helper"
done
# The loader is found at its canonical path whatever ldd printed.
for ld in /lib64/ld-linux-x86-64.so.2 /lib/ld-linux-aarch64.so.1; do
  [[ -e "$ld" && ! -e "$root$ld" ]] && copy "$ld"
done

mkdir -p "$root/usr/share/squid"
cp -rL /usr/share/squid/icons /usr/share/squid/mime.conf "$root/usr/share/squid/"
# Error templates: English only (every other language falls back to it).
mkdir -p "$root/usr/share/squid/errors"
cp -rL /usr/share/squid/errors/templates "$root/usr/share/squid/errors/templates"
[[ -d /usr/share/squid/errors/en ]] && cp -rL /usr/share/squid/errors/en "$root/usr/share/squid/errors/en"
mkdir -p "$root/etc/squid"
cp -L /etc/squid/errorpage.css "$root/etc/squid/errorpage.css"

cat >"$root/etc/passwd" <<'PASSWD'
root:x:0:0:root:/nonexistent:/nonexistent
proxy:x:13:13:proxy:/nonexistent:/nonexistent
nobody:x:65534:65534:nobody:/nonexistent:/nonexistent
PASSWD
cat >"$root/etc/group" <<'GROUP'
root:x:0:
proxy:x:13:
nogroup:x:65534:
GROUP
# An empty squid.conf: the harness mounts the generated one over it.
: >"$root/etc/squid/squid.conf"

# Writable places Squid uses; the harness mounts tmpfs over them when the
# root filesystem is read-only.
for d in run tmp var/log/squid var/spool/squid var/cache/squid sandbox-output; do
  mkdir -p "$root/$d"
done
chmod 1777 "$root/tmp"
chown -R 13:13 "$root/run" "$root/var/log/squid" "$root/var/spool/squid" "$root/var/cache/squid" "$root/sandbox-output"

version="$("$squid_bin" -v | head -1)"
extra=()
for kv in ${MCPSIDECAR_IMAGE_LABELS:-}; do
  extra+=(--change "LABEL $kv")
done
tar -C "$root" --numeric-owner -c . | docker import "${extra[@]}" \
  --change 'USER 13:13' \
  --change 'ENTRYPOINT ["/usr/sbin/squid", "-N", "-d", "1", "-f", "/etc/squid/squid.conf"]' \
  --change 'LABEL mcpsidecar=1' \
  --change 'LABEL mcpsidecar.image=squid' \
  --change "LABEL mcpsidecar.squid.version=\"$version\"" \
  - "$tag" >/dev/null
echo "$tag"
