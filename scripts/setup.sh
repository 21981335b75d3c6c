#!/usr/bin/env bash
# setup.sh: what the tests need on a fresh machine (root, Docker, Go), done
# once and skipped when already done, so that `make test` is the one
# command a newcomer runs: the Debian packages the tests use, a running
# Docker engine, the Go modules, and the Debian python image of the
# own-workload tests (scripts/build-debian-image.sh, reused by its content
# tag), the OpenTelemetry collector of the export tests
# (scripts/build-jaeger.sh, built once per machine), and the images of
# the engines elsewhere (scripts/build-engine-image.sh: Docker in a
# container, from Debian's archive, cached under /var/cache). The Kubernetes test cluster's binaries are built by `make kube`
# itself (scripts/test-kube.sh), once per machine.
#
# Usage: scripts/setup.sh [--no-image]   (make setup; make test runs it first)
#   --no-image  everything but the test image and the collector (.ci/run
#               builds them after it has started the test cluster's long
#               build)
# Needs root for the packages and the image; as another user it checks and
# says what is missing instead of installing.
set -euo pipefail
cd "$(dirname "$0")/.."
image=1
[[ "${1:-}" == "--no-image" ]] && image=0

packages=(squid chromium ca-certificates make gcc libc6-dev debootstrap python3
  containerd runc iptables iproute2 openssl jq strace openssh-client openssh-server
  zip wine wine64 gcc-mingw-w64-x86-64-win32  # zip: make dist; make wine-unit: Windows unit tests under wine
  rootlesskit uidmap slirp4netns)  # e2e/rootless_test.go: a rootless engine run by a user

# The rootless engine's launcher: Debian's docker.io ships
# dockerd-rootless.sh (Docker's own docker-ce-rootless-extras puts it on
# PATH); a machine with neither gets docker.io, unless its engine is
# Docker's docker-ce, which conflicts with it.
if [[ ! -e /usr/share/docker.io/contrib/dockerd-rootless.sh ]] && ! command -v dockerd-rootless.sh >/dev/null; then
  if dpkg-query -W -f='${Status}' docker-ce 2>/dev/null | grep -q 'install ok installed'; then
    echo "setup: no dockerd-rootless.sh for the rootless tests: install Docker's docker-ce-rootless-extras" >&2
    exit 1
  fi
  packages+=(docker.io)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) != 0 ]]; then
    echo "setup: missing Debian packages: ${missing[*]} (as root: apt-get install ${missing[*]})" >&2
    exit 1
  fi
  echo "== setup: installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  if [[ $(id -u) != 0 ]]; then
    echo "setup: the Docker engine is not reachable (start it, or join the docker group)" >&2
    exit 1
  fi
  echo "== setup: starting the Docker engine"
  (service docker start || (dockerd >/tmp/dockerd.log 2>&1 &)) || true
  for _ in $(seq 1 30); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { echo "setup: the Docker engine did not start (see /tmp/dockerd.log)" >&2; exit 1; }
fi

go mod download

# The Debian python image the own-workload e2e tests find by its content
# tag (built once per machine, from Debian's archive).
if ((image)); then
  scripts/build-debian-image.sh >/dev/null
  scripts/build-jaeger.sh >/dev/null
  scripts/build-engine-image.sh >/dev/null
  scripts/build-engine-image.sh --suite bookworm >/dev/null
fi
echo "== setup: done"
