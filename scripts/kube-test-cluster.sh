#!/usr/bin/env bash
# kube-test-cluster.sh: a real single-node Kubernetes (v1.37.2) on loopback, built on this
# machine from the Go module proxy, for the Kubernetes backend's tests (issue 20).
#
#   scripts/kube-test-cluster.sh build    build the pinned binaries once per machine into the
#                                         cache (idempotent, keyed by version)
#   scripts/kube-test-cluster.sh up       start etcd, kube-apiserver, controller-manager,
#                                         scheduler, a private containerd and one kubelet;
#                                         wait for the node to be Ready; print the kubeconfig
#   scripts/kube-test-cluster.sh down     stop and remove everything `up` started or changed
#                                         (idempotent, safe after a failed `up`)
#   scripts/kube-test-cluster.sh status   what is running
#   scripts/kube-test-cluster.sh smoke    up, two test pods talk TCP over the bridge, down,
#                                         then check that nothing is left
#
# Environment:
#   MCPSIDECAR_KUBE_CACHE  build cache (default /var/cache/mcpsidecar-kube): binaries, Go build
#                          and module caches, CNI plugins, image tarballs. `down` keeps it.
#   MCPSIDECAR_KUBE_STATE  state dir (default /var/lib/mcpsidecar-kube): configs, keys, logs of
#                          every component, etcd data, containerd root, kubelet root. `down`
#                          removes it.
#   MCPSIDECAR_KUBE_TIMEOUT  seconds each wait may take (default 120)
#   MCPSIDECAR_KUBE_REBUILD=1  `build` rebuilds the binaries even when built (to time a warm
#                          rebuild; the Go build cache makes it fast)
#
# Needs root, containerd + ctr (Debian `containerd`, installed beside Docker; a PRIVATE instance
# is started, Docker's is not touched), runc, iptables, ip, kubectl, Go, docker (only `build`, to
# build the FROM scratch images), apt-get + dpkg (only `build`, for the CNI plugins).
#
# SAFETY: the pod network has no way off this machine. How it is ensured:
#   1. Pods get addresses on a test subnet of our own (POD_SUBNET, 10.237.0.0/24) on our own
#      bridge (BRIDGE, mcpsk0) from the Debian bridge + host-local CNI plugins with
#      isGateway=false and ipMasq=false, and a host-local `routes` list holding only the subnet:
#      a pod has NO default route, so a packet to any other address fails inside the pod with
#      "network is unreachable" and never reaches the host. (isGateway=true would give every
#      pod a default route via the bridge and the host, which forwards, would route it out.)
#   2. No masquerading anywhere: ipMasq=false, no kube-proxy, no portmap plugin, and the
#      kubelet runs with makeIPTablesUtilChains=false. A pod address is never NATed to the
#      host's.
#   3. Even a pod that adds its own default route (it would need NET_ADMIN) cannot leave: the
#      script inserts, at the top of FORWARD (iptables and ip6tables), a chain of its own that
#      ACCEPTs only bridge-to-bridge traffic of the test subnet (-i BR -o BR -s/-d SUBNET,
#      needed because Docker sets the FORWARD policy to DROP and bridged frames pass
#      FORWARD with br_netfilter) and DROPs everything else that enters or leaves the bridge.
#      This holds whatever Docker's FORWARD policy is.
#   4. IPv6 is disabled on the bridge. The host's own address on it (10.237.0.1) lets the host
#      (kubelet, tests) reach pods; pods reach the host through it by local delivery, not
#      forwarding: the kubelet API listens there (TLS, anonymous access off), and so does any
#      host service bound to all addresses (how a host-side test fixture serves pods).
#   5. Images are built locally and imported into the private containerd (imagePullPolicy
#      Never/IfNotPresent); there is no registry, nothing is pulled.
#   `down` removes the bridge, the FORWARD jump and the chain; `smoke` checks they are gone.
set -euo pipefail

K8S_VERSION=v1.37.2
K8S_STAGING_VERSION=v0.37.2
ETCD_VERSION=v3.7.3
CNI_DEB=containernetworking-plugins

CACHE=${MCPSIDECAR_KUBE_CACHE:-/var/cache/mcpsidecar-kube}
STATE=${MCPSIDECAR_KUBE_STATE:-/var/lib/mcpsidecar-kube}
TIMEOUT=${MCPSIDECAR_KUBE_TIMEOUT:-120}
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KUBE_SRC=$SCRIPT_DIR/kube

BIN_K8S=$CACHE/bin/kubernetes-$K8S_VERSION
BIN_ETCD=$CACHE/bin/etcd-$ETCD_VERSION
CNI_DIR=$CACHE/cni
IMG_DIR=$CACHE/images
PAUSE_IMAGE=localhost/mcpsidecar-kube-pause:1
NETTEST_IMAGE=localhost/mcpsidecar-kube-nettest:1

# Network of the test cluster (see SAFETY above).
BRIDGE=mcpsk0
POD_SUBNET=10.237.0.0/24
BRIDGE_ADDR=10.237.0.1
SERVICE_CIDR=10.238.0.0/24
FWD_CHAIN=MCPSIDECAR-KUBE-FWD
NODE_NAME=mcpsidecar-kube-node

# Loopback ports (checked free before `up`).
ETCD_PORT=23790
ETCD_PEER_PORT=23800
APISERVER_PORT=16443
CM_PORT=16257
SCHED_PORT=16259
KUBELET_PORT=16250
KUBELET_HEALTHZ_PORT=16248

SYSCTLS=(vm.overcommit_memory kernel.panic kernel.panic_on_oops)

log() { printf '[kube-test-cluster %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { printf 'kube-test-cluster: error: %s\n' "$*" >&2; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

need() { # need CMD HINT
	command -v "$1" >/dev/null 2>&1 || die "$1 not found: $2"
}

need_root() {
	[[ $(id -u) == 0 ]] || die "$1 needs root (it starts a kubelet and containerd, and changes iptables)"
}

# ---------------------------------------------------------------------------------------------
# build

# go_env runs a go command with the build and module caches inside $CACHE, so they are kept
# per machine and never mix with the project's caches.
go_env() {
	env GOCACHE="$CACHE/go/cache" GOMODCACHE="$CACHE/go/mod" GOPATH="$CACHE/go/path" \
		GOFLAGS="-modcacherw -buildvcs=false -trimpath" GOTOOLCHAIN=local CGO_ENABLED=0 \
		GOPROXY="${GOPROXY:-https://proxy.golang.org}" go "$@"
}

# k8s_ldflags sets the version fields kubectl reads from the server (without them it cannot
# parse the server version); the same fields hack/lib/version.sh sets in a release build.
k8s_ldflags() {
	local minor=${K8S_VERSION#v1.} ; minor=${minor%%.*}
	local f=""
	# No build date: the flags stay the same from build to build, so a rebuild with a warm
	# cache links nothing new.
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		f+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
		f+=" -X $pkg.gitTreeState=clean"
	done
	printf '%s' "-s -w$f"
}

# write_k8s_wrapper generates the wrapper module: it requires k8s.io/kubernetes and replaces
# every staging module k8s.io/kubernetes requires at v0.0.0 (resolved upstream by its own
# `=> ./staging/...` replaces, which do not apply to a dependency) with the published
# $K8S_STAGING_VERSION. The list is read from k8s.io/kubernetes's own go.mod, never typed.
write_k8s_wrapper() {
	local dir=$1
	mkdir -p "$dir"
	log "fetching k8s.io/kubernetes@$K8S_VERSION's go.mod"
	local upstream
	upstream=$(cd "$dir" && go_env mod download -json "k8s.io/kubernetes@$K8S_VERSION" | jq -r .GoMod)
	[[ -s $upstream ]] || die "could not download k8s.io/kubernetes@$K8S_VERSION (is the Go module proxy reachable?)"
	local staging
	staging=$(go_env mod edit -json "$upstream" |
		jq -r '.Require[] | select(.Version == "v0.0.0" and (.Path | startswith("k8s.io/"))) | .Path')
	[[ -n $staging ]] || die "found no v0.0.0 staging requirements in $upstream"
	{
		sed -e "s/@K8S_VERSION@/$K8S_VERSION/" "$KUBE_SRC/kubernetes.go.mod.in"
		echo
		echo "// Generated from k8s.io/kubernetes@$K8S_VERSION's go.mod by scripts/kube-test-cluster.sh."
		echo "replace ("
		local m
		for m in $staging; do printf '\t%s => %s %s\n' "$m" "$m" "$K8S_STAGING_VERSION"; done
		echo ")"
	} >"$dir/go.mod"
	log "wrapper module: $(wc -w <<<"$staging") staging replaces"
	(cd "$dir" && go_env mod tidy)
}

write_etcd_wrapper() {
	local dir=$1
	mkdir -p "$dir"
	sed -e "s/@ETCD_VERSION@/$ETCD_VERSION/" "$KUBE_SRC/etcd.go.mod.in" >"$dir/go.mod"
	(cd "$dir" && go_env mod tidy)
}

# build_one DIR PKG OUT [LDFLAGS]: skips a binary already built for this version.
build_one() {
	local dir=$1 pkg=$2 out=$3 ldflags=${4:--s -w}
	if [[ -x $out && -f $out.ok && ${MCPSIDECAR_KUBE_REBUILD:-0} != 1 ]]; then
		log "$(basename "$out"): already built ($out)"
		return
	fi
	log "$(basename "$out"): building $pkg"
	local t0 ; t0=$(now)
	(cd "$dir" && go_env build -o "$out.tmp" -ldflags "$ldflags" "$pkg")
	mv "$out.tmp" "$out"
	echo "built in $(elapsed "$t0") s on $(date -u +%FT%TZ)" >"$out.ok"
	log "$(basename "$out"): built in $(elapsed "$t0") s ($(du -h "$out" | cut -f1))"
}

build_cni() {
	if [[ -x $CNI_DIR/usr/lib/cni/bridge ]]; then
		log "CNI plugins: already extracted ($CNI_DIR/usr/lib/cni)"
		return
	fi
	need apt-get "install apt (Debian) to fetch $CNI_DEB"
	need dpkg "install dpkg (Debian) to extract $CNI_DEB"
	log "CNI plugins: apt-get download $CNI_DEB"
	local tmp ; tmp=$(mktemp -d)
	(cd "$tmp" && apt-get download "$CNI_DEB" >/dev/null) ||
		die "apt-get download $CNI_DEB failed (run apt-get update first?)"
	rm -rf "$CNI_DIR.tmp" && mkdir -p "$CNI_DIR.tmp"
	dpkg -x "$tmp"/"$CNI_DEB"_*.deb "$CNI_DIR.tmp"
	cp "$tmp"/"$CNI_DEB"_*.deb "$CNI_DIR.tmp/"
	rm -rf "$tmp" "$CNI_DIR" && mv "$CNI_DIR.tmp" "$CNI_DIR"
	[[ -x $CNI_DIR/usr/lib/cni/bridge && -x $CNI_DIR/usr/lib/cni/host-local && -x $CNI_DIR/usr/lib/cni/loopback ]] ||
		die "$CNI_DEB did not contain bridge, host-local and loopback under usr/lib/cni"
	log "CNI plugins: $(ls "$CNI_DIR/usr/lib/cni" | tr '\n' ' ')"
}

# build_image NAME TAG: a FROM scratch image holding one static binary from
# scripts/kube/images/NAME, saved as a tarball that `up` imports into the private containerd.
build_image() {
	local name=$1 tag=$2 tar=$IMG_DIR/$1.tar
	local sum ; sum=$(cat "$KUBE_SRC/images/go.mod" "$KUBE_SRC/images/$name"/*.go | sha256sum | cut -c1-16)
	if [[ -f $tar && -f $tar.ok && $(cat "$tar.ok") == "$sum" ]]; then
		log "image $tag: already built ($tar)"
		return
	fi
	need docker "docker is needed by build to make the FROM scratch images"
	mkdir -p "$IMG_DIR"
	local ctx ; ctx=$(mktemp -d)
	(cd "$KUBE_SRC/images" && go_env build -ldflags "-s -w" -o "$ctx/$name" "./$name")
	printf 'FROM scratch\nCOPY %s /%s\nENTRYPOINT ["/%s"]\n' "$name" "$name" "$name" >"$ctx/Dockerfile"
	docker build -q -t "$tag" "$ctx" >/dev/null 2>"$ctx/build.err" ||
		die "docker build of $tag failed: $(cat "$ctx/build.err")"
	docker save -o "$tar.tmp" "$tag"
	docker rmi "$tag" >/dev/null # the image lives in the tarball; leave Docker as it was
	mv "$tar.tmp" "$tar" && echo "$sum" >"$tar.ok"
	rm -rf "$ctx"
	log "image $tag: $tar ($(du -h "$tar" | cut -f1))"
}

cmd_build() {
	need go "install Go (https://go.dev/dl) and put it on PATH"
	need jq "install jq (apt-get install jq)"
	mkdir -p "$CACHE/bin" || die "cannot create cache dir $CACHE (set MCPSIDECAR_KUBE_CACHE to a writable dir)"
	# One build at a time per cache: a second `build` (CI starts one early in the background,
	# then `make kube` asks again) waits here and then finds everything built.
	exec 9>"$CACHE/.build.lock"
	if ! flock -n 9; then
		log "another build of this cache is running; waiting for it"
		flock 9
	fi
	local t0 ; t0=$(now)
	log "build cache: $CACHE"

	local etcdmod=$CACHE/src/etcd-$ETCD_VERSION
	if [[ ! -f $etcdmod/go.sum ]]; then write_etcd_wrapper "$etcdmod"; fi
	mkdir -p "$BIN_ETCD"
	build_one "$etcdmod" go.etcd.io/etcd/server/v3 "$BIN_ETCD/etcd"

	local k8smod=$CACHE/src/kubernetes-$K8S_VERSION
	mkdir -p "$BIN_K8S"
	local want=(kube-apiserver kube-controller-manager kube-scheduler kubelet)
	command -v kubectl >/dev/null 2>&1 || want+=(kubectl)
	local b missing=0
	for b in "${want[@]}"; do [[ -f $BIN_K8S/$b.ok ]] || missing=1; done
	local sum ; sum=$(sha256sum <"$KUBE_SRC/kubernetes.go.mod.in" | cut -c1-16)
	if ((missing)) && [[ ! -f $k8smod/go.sum || $(cat "$k8smod/template.sum" 2>/dev/null) != "$sum" ]]; then
		write_k8s_wrapper "$k8smod"
		echo "$sum" >"$k8smod/template.sum"
	fi
	local ld ; ld=$(k8s_ldflags)
	for b in "${want[@]}"; do
		build_one "$k8smod" "k8s.io/kubernetes/cmd/$b" "$BIN_K8S/$b" "$ld"
	done

	# One directory with etcd, kube-apiserver and kubectl, for controller-runtime's envtest
	# (BinaryAssetsDirectory / KUBEBUILDER_ASSETS), which needs no download then.
	mkdir -p "$CACHE/envtest"
	ln -sfn "$BIN_ETCD/etcd" "$CACHE/envtest/etcd"
	ln -sfn "$BIN_K8S/kube-apiserver" "$CACHE/envtest/kube-apiserver"
	ln -sfn "$(command -v kubectl 2>/dev/null || echo "$BIN_K8S/kubectl")" "$CACHE/envtest/kubectl"

	build_cni
	build_image pause "$PAUSE_IMAGE"
	build_image nettest "$NETTEST_IMAGE"
	log "build done in $(elapsed "$t0") s; cache $(du -sh "$CACHE" 2>/dev/null | cut -f1)"
}

# ---------------------------------------------------------------------------------------------
# up

KUBECONFIG_ADMIN=$STATE/kubeconfig
CTR_SOCK=$STATE/containerd/containerd.sock
COMPONENTS=(etcd kube-apiserver containerd kube-controller-manager kube-scheduler kubelet)

# ctr_ talks to our containerd, never Docker's; bounded so a hung containerd cannot hang down.
ctr_() { timeout 60 ctr --address "$CTR_SOCK" --namespace k8s.io "$@"; }
# ctr_up: our containerd answers (checked for the socket first: ctr waits ~20 s on a missing one)
ctr_up() { [[ -S $CTR_SOCK ]] && timeout 10 ctr --address "$CTR_SOCK" version >/dev/null 2>&1; }
kc() { kubectl --kubeconfig "$KUBECONFIG_ADMIN" --cache-dir "$STATE/kubectl-cache" "$@"; }

# wait_for WHAT CMD...: retries CMD every 0.2 s until it succeeds or $TIMEOUT s pass.
wait_for() {
	local what=$1 ; shift
	local deadline=$(($(date +%s) + TIMEOUT))
	until "$@" >/dev/null 2>&1; do
		if (($(date +%s) >= deadline)); then
			die "timed out after ${TIMEOUT}s waiting for $what (logs: $STATE/logs/; set MCPSIDECAR_KUBE_TIMEOUT to wait longer)"
		fi
		sleep 0.2
	done
}

check_port_free() {
	local port=$1 who=$2
	if ss -Hltn "sport = :$port" | grep -q .; then
		die "port $port (for $who) is in use: $(ss -Hltnp "sport = :$port" | head -1); stop what holds it or run '$0 down' if it is an old test cluster"
	fi
}

preflight() {
	need_root "up"
	need containerd "install Debian's containerd (apt-get install containerd)"
	need ctr "install Debian's containerd (it ships ctr)"
	need runc "install runc (apt-get install runc)"
	need kubectl "install kubectl or run '$0 build', which builds it when it is missing"
	need iptables "install iptables"
	need ip "install iproute2"
	need openssl "install openssl"
	need ss "install iproute2 (ss)"
	local b
	for b in "$BIN_ETCD/etcd" "$BIN_K8S/kube-apiserver" "$BIN_K8S/kube-controller-manager" \
		"$BIN_K8S/kube-scheduler" "$BIN_K8S/kubelet" "$CNI_DIR/usr/lib/cni/bridge" \
		"$IMG_DIR/pause.tar" "$IMG_DIR/nettest.tar"; do
		[[ -e $b ]] || die "$b is missing: run '$0 build' first (cache: $CACHE)"
	done
	if [[ -e $STATE ]]; then
		die "$STATE exists: a test cluster is up or was not cleaned up; run '$0 down' first"
	fi
	if ip link show "$BRIDGE" >/dev/null 2>&1; then
		die "bridge $BRIDGE exists: run '$0 down' first"
	fi
	if ip route show | grep -v "dev $BRIDGE" | grep -q "^${POD_SUBNET%/*}\|^10\.237\."; then
		die "the pod subnet $POD_SUBNET overlaps a route on this host: $(ip route | grep '^10\.237\.')"
	fi
	check_port_free $ETCD_PORT etcd; check_port_free $ETCD_PEER_PORT "etcd peer"
	check_port_free $APISERVER_PORT kube-apiserver; check_port_free $CM_PORT kube-controller-manager
	check_port_free $SCHED_PORT kube-scheduler; check_port_free $KUBELET_PORT kubelet
	check_port_free $KUBELET_HEALTHZ_PORT "kubelet healthz"
}

# start NAME CMD...: runs a component in its own session with its log under $STATE/logs and
# its pid in $STATE/pids, so `down` stops exactly what `up` started.
start() {
	local name=$1 ; shift
	setsid "$@" </dev/null >"$STATE/logs/$name.log" 2>&1 &
	echo $! >"$STATE/pids/$name.pid"
	STEP_T0=$(now)
}

step_done() { # step_done NAME
	log "$1: ready in $(elapsed "$STEP_T0") s"
	echo "$1 $(elapsed "$STEP_T0")" >>"$STATE/timings"
}

alive() { # alive NAME: fails (with the log's tail) when the component has exited
	local pid ; pid=$(cat "$STATE/pids/$1.pid")
	if ! kill -0 "$pid" 2>/dev/null; then
		tail -n 20 "$STATE/logs/$1.log" >&2 || true
		die "$1 exited during start (log: $STATE/logs/$1.log)"
	fi
}

ready() { # ready NAME CMD...: CMD succeeds, or dies at once if NAME has exited
	local name=$1 ; shift
	alive "$name"
	"$@"
}

make_pki() {
	local p=$STATE/pki
	mkdir -p "$p"
	(
		cd "$p"
		openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 30 \
			-subj "/CN=mcpsidecar-kube-test-ca" 2>/dev/null
		cert() { # cert NAME SUBJ SAN
			openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
			printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$3" >"$1.ext"
			openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
				-extfile "$1.ext" -out "$1.crt" 2>/dev/null
		}
		cert apiserver "/CN=kube-apiserver" \
			"IP:127.0.0.1,IP:${SERVICE_CIDR%.0/24}.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default.svc"
		cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "DNS:localhost"
		cert kubelet "/CN=$NODE_NAME" "IP:$BRIDGE_ADDR,IP:127.0.0.1,DNS:localhost"
		openssl genrsa -out sa.key 2048 2>/dev/null
		openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
		chmod 600 ./*.key
	)
	# One token per identity; the kubelet, scheduler and controller-manager get their real
	# identities so the Node and RBAC authorizers treat them as in a real cluster.
	local t
	: >"$p/tokens.csv"
	for t in "admin,admin,system:masters" "kubelet,system:node:$NODE_NAME,system:nodes" \
		"scheduler,system:kube-scheduler," "controller-manager,system:kube-controller-manager,"; do
		IFS=, read -r name user group <<<"$t"
		local tok ; tok=$(openssl rand -hex 24)
		printf '%s,%s,%s,"%s"\n' "$tok" "$user" "$user" "$group" >>"$p/tokens.csv"
		write_kubeconfig "$STATE/$name.kubeconfig" "$user" "$tok"
	done
	chmod 600 "$p/tokens.csv" "$STATE"/*.kubeconfig
}

write_kubeconfig() { # write_kubeconfig FILE USER TOKEN
	cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: mcpsidecar-kube
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority: $STATE/pki/ca.crt
users:
- name: $2
  user:
    token: $3
contexts:
- name: mcpsidecar-kube
  context: {cluster: mcpsidecar-kube, user: "$2"}
current-context: mcpsidecar-kube
KC
}

keep_logs() { # keeps a failed up's logs, which down removes with the state dir
	local keep ; keep=/tmp/mcpsidecar-kube-failed-$(date -u +%Y%m%dT%H%M%S)
	cp -r "$STATE/logs" "$keep" 2>/dev/null && log "failed: logs kept in $keep; cleaning up with down"
}

# record_host_state notes what existed before `up`, so `down` removes only what we created.
record_host_state() {
	[[ -d /var/lib/cni ]] || touch "$STATE/varlibcni.absent"
	[[ -d /var/log/containers ]] || touch "$STATE/varlogcontainers.absent"
	[[ -d /var/lib/kubelet ]] || touch "$STATE/varlibkubelet.absent"
	ls -d /sys/fs/cgroup/*/k8s.io 2>/dev/null >"$STATE/cgroups.before" || true
}

save_sysctls() {
	local s
	for s in "${SYSCTLS[@]}"; do echo "$s=$(sysctl -n "$s")"; done >"$STATE/sysctls.saved"
}

# setup_network creates the bridge with the host's address on it, the FORWARD chain and the CNI
# config (see SAFETY in the header).
setup_network() {
	ip link add "$BRIDGE" type bridge
	echo "$BRIDGE" >"$STATE/bridge.created"
	sysctl -qw "net.ipv6.conf.$BRIDGE.disable_ipv6=1"
	ip addr add "$BRIDGE_ADDR/${POD_SUBNET#*/}" dev "$BRIDGE"
	ip link set "$BRIDGE" up

	local ipt
	for ipt in iptables ip6tables; do
		$ipt -w -N "$FWD_CHAIN"
		echo "$ipt" >>"$STATE/iptables.created"
		if [[ $ipt == iptables ]]; then
			$ipt -w -A "$FWD_CHAIN" -i "$BRIDGE" -o "$BRIDGE" -s "$POD_SUBNET" -d "$POD_SUBNET" -j ACCEPT
		fi
		$ipt -w -A "$FWD_CHAIN" -i "$BRIDGE" -j DROP
		$ipt -w -A "$FWD_CHAIN" -o "$BRIDGE" -j DROP
		$ipt -w -I FORWARD 1 -j "$FWD_CHAIN"
	done

	mkdir -p "$STATE/cni/net.d" "$STATE/cni/networks"
	cat >"$STATE/cni/net.d/10-mcpsidecar-kube.conflist" <<CNI
{
  "cniVersion": "1.0.0",
  "name": "mcpsidecar-kube",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": false,
      "isDefaultGateway": false,
      "ipMasq": false,
      "hairpinMode": false,
      "ipam": {
        "type": "host-local",
        "dataDir": "$STATE/cni/networks",
        "ranges": [[{"subnet": "$POD_SUBNET", "rangeStart": "${POD_SUBNET%.0/24}.10", "rangeEnd": "${POD_SUBNET%.0/24}.250"}]],
        "routes": []
      }
    }
  ]
}
CNI
}

write_containerd_config() {
	mkdir -p "$STATE/containerd"
	cat >"$STATE/containerd/config.toml" <<TOML
# Private containerd of the mcpsidecar test cluster: its own root, state and socket, so
# Docker's containerd (/run/containerd, namespace moby) is untouched.
version = 2
root = "$STATE/containerd/root"
state = "$STATE/containerd/state"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "$CTR_SOCK"
[ttrpc]
  address = "$CTR_SOCK.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # runc cannot set oom_score_adj -998 here (EACCES) without this.
  restrict_oom_score_adj = true
  # Network namespaces are bind-mounted under our state dir, not /var/run/netns.
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "$STATE/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_DIR/usr/lib/cni"
    conf_dir = "$STATE/cni/net.d"
    max_conf_num = 1
TOML
}

write_kubelet_config() {
	mkdir -p "$STATE/kubelet" "$STATE/pod-logs"
	cat >"$STATE/kubelet/config.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine has cgroup v1 and Docker beside us: no QoS cgroups, no node allocatable
# enforcement, no iptables chains of the kubelet's own.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
makeIPTablesUtilChains: false
hairpinMode: none
resolvConf: ""
clusterDomain: cluster.local
# The sandbox's pods set net.ipv4.tcp_fastopen (per network namespace, as in Docker); it is not in
# Kubernetes' safe set, so the kubelet must allow it or it refuses the pods (SysctlForbidden).
allowedUnsafeSysctls: ["net.ipv4.tcp_fastopen"]
# Kubernetes has no per-container pids limit; the node's podPidsLimit bounds each pod, here at
# the plan's largest per-role pids limit (the agent's and the gateway's, 256). The kubelet sets it
# on the pod's cgroup, which it creates only with cgroupsPerQOS (pkg/kubelet/cm:
# NewPodContainerManager is a no-op without it), so with cgroupsPerQOS false above it bounds
# nothing on this node: it is the value a cluster operator sets, kept here for the day QoS cgroups
# are on. Probe T16 reads the container's own pids.max, which a pod limit does not change.
podPidsLimit: 256
# The node's address is the host's address on our bridge: the kubelet refuses a loopback node
# IP, and leaving it unset would make it look its own name up in DNS. The kubelet API listens
# there (authenticated: no anonymous access) so kube-apiserver reaches it for logs and exec.
address: $BRIDGE_ADDR
port: $KUBELET_PORT
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
readOnlyPort: 0
containerRuntimeEndpoint: unix://$CTR_SOCK
imageServiceEndpoint: unix://$CTR_SOCK
podLogsDir: $STATE/pod-logs
volumePluginDir: $STATE/kubelet/volume-plugins
tlsCertFile: $STATE/pki/kubelet.crt
tlsPrivateKeyFile: $STATE/pki/kubelet.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $STATE/pki/ca.crt}
authorization:
  mode: Webhook
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  imagefs.available: 1%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
maxPods: 110
YAML
}

start_etcd() {
	mkdir -p "$STATE/etcd"
	start etcd "$BIN_ETCD/etcd" --name=mcpsidecar-kube --data-dir="$STATE/etcd" \
		--listen-client-urls="http://127.0.0.1:$ETCD_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
		--listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-cluster="mcpsidecar-kube=http://127.0.0.1:$ETCD_PEER_PORT" --listen-metrics-urls="" \
		--quota-backend-bytes=2147483648 --log-level=warn
	wait_for "etcd /health" ready etcd curl -fsS "http://127.0.0.1:$ETCD_PORT/health"
	step_done etcd
}

start_apiserver() {
	local p=$STATE/pki
	start kube-apiserver "$BIN_K8S/kube-apiserver" \
		--etcd-servers="http://127.0.0.1:$ETCD_PORT" \
		--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port=$APISERVER_PORT \
		--endpoint-reconciler-type=none --cert-dir="$p/apiserver" \
		--tls-cert-file="$p/apiserver.crt" --tls-private-key-file="$p/apiserver.key" \
		--client-ca-file="$p/ca.crt" --token-auth-file="$p/tokens.csv" \
		--authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
		--service-account-key-file="$p/sa.pub" --service-account-signing-key-file="$p/sa.key" \
		--service-account-issuer=https://kubernetes.default.svc.cluster.local \
		--service-cluster-ip-range="$SERVICE_CIDR" \
		--kubelet-client-certificate="$p/apiserver-kubelet-client.crt" \
		--kubelet-client-key="$p/apiserver-kubelet-client.key" \
		--kubelet-certificate-authority="$p/ca.crt" --kubelet-preferred-address-types=InternalIP \
		--profiling=false --v=1
	wait_for "kube-apiserver /readyz" ready kube-apiserver \
		curl -fsS --cacert "$p/ca.crt" "https://127.0.0.1:$APISERVER_PORT/readyz"
	step_done kube-apiserver
}

start_containerd() {
	write_containerd_config
	# The proxy variables point every registry request this containerd could make (an image a
	# pod names but that was not imported) at a closed loopback port, so a pull fails here
	# instead of reaching a registry off this machine.
	start containerd env -i PATH="$PATH" HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 \
		http_proxy=http://127.0.0.1:9 https_proxy=http://127.0.0.1:9 NO_PROXY= no_proxy= \
		containerd --config "$STATE/containerd/config.toml"
	wait_for "containerd socket" ready containerd ctr_up
	local img
	for img in pause nettest; do ctr_ images import "$IMG_DIR/$img.tar" >/dev/null; done
	step_done containerd
}

start_controllers() {
	# Each controller runs as its own service account with its bootstrap role, as kubeadm
	# does; the system:kube-controller-manager identity alone may only mint their tokens.
	start kube-controller-manager "$BIN_K8S/kube-controller-manager" \
		--kubeconfig="$STATE/controller-manager.kubeconfig" \
		--bind-address=127.0.0.1 --secure-port=$CM_PORT --cert-dir="$STATE/pki/controller-manager" \
		--leader-elect=false --allocate-node-cidrs=false --use-service-account-credentials=true \
		--node-monitor-period=1s \
		--service-account-private-key-file="$STATE/pki/sa.key" --root-ca-file="$STATE/pki/ca.crt" \
		--service-cluster-ip-range="$SERVICE_CIDR" --profiling=false --v=1
	local t_cm=$STEP_T0
	start kube-scheduler "$BIN_K8S/kube-scheduler" --kubeconfig="$STATE/scheduler.kubeconfig" \
		--bind-address=127.0.0.1 --secure-port=$SCHED_PORT --cert-dir="$STATE/pki/scheduler" \
		--leader-elect=false --profiling=false --v=1
	wait_for "kube-scheduler /healthz" ready kube-scheduler curl -fsSk "https://127.0.0.1:$SCHED_PORT/healthz"
	step_done kube-scheduler
	STEP_T0=$t_cm
	wait_for "kube-controller-manager /healthz" ready kube-controller-manager \
		curl -fsSk "https://127.0.0.1:$CM_PORT/healthz"
	step_done kube-controller-manager
}

node_ready() {
	[[ $(kc get node "$NODE_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}') == True ]]
}

# cluster_usable: the node lifecycle controller has lifted the not-ready taint (pods can be
# scheduled) and the service-account controller has made the default namespace's account
# (pods can be created: admission refuses a pod whose service account does not exist yet).
cluster_usable() {
	[[ -z $(kc get node "$NODE_NAME" -o 'jsonpath={.spec.taints}') ]] &&
		kc -n default get serviceaccount default
}

start_kubelet() {
	write_kubelet_config
	start kubelet "$BIN_K8S/kubelet" --config="$STATE/kubelet/config.yaml" \
		--kubeconfig="$STATE/kubelet.kubeconfig" --root-dir="$STATE/kubelet" \
		--cert-dir="$STATE/kubelet/pki" --hostname-override="$NODE_NAME" --node-ip="$BRIDGE_ADDR" --v=1
	wait_for "node $NODE_NAME Ready" ready kubelet node_ready
	step_done kubelet
	STEP_T0=$(now)
	wait_for "node untainted and default service account" ready kubelet cluster_usable
	step_done "node schedulable"
}

print_memory() {
	local name pid total=0
	for name in "${COMPONENTS[@]}"; do
		pid=$(cat "$STATE/pids/$name.pid" 2>/dev/null) || continue
		local rss ; rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null) || rss=0
		# containerd runs under env(1) only until exec, so the pid is containerd's own.
		total=$((total + rss))
		printf '  %-24s pid %-7s RSS %6d MiB\n' "$name" "$pid" $((rss / 1024))
	done
	printf '  %-24s %-11s RSS %6d MiB\n' total "" $((total / 1024))
}

cmd_up() {
	preflight
	local t0 ; t0=$(now)
	mkdir -p "$STATE/logs" "$STATE/pids"
	UP_DONE=0
	trap '[[ $UP_DONE == 1 ]] || { keep_logs; cmd_down || true; }' EXIT
	record_host_state
	save_sysctls
	make_pki
	cp "$STATE/admin.kubeconfig" "$KUBECONFIG_ADMIN"
	setup_network
	start_etcd
	start_apiserver
	start_containerd
	start_controllers
	start_kubelet
	UP_DONE=1
	trap - EXIT
	log "cluster up in $(elapsed "$t0") s (node Ready and schedulable)"
	echo "total $(elapsed "$t0")" >>"$STATE/timings"
	echo "memory (RSS):" >&2
	print_memory >&2
	echo "KUBECONFIG=$KUBECONFIG_ADMIN"
}

# ---------------------------------------------------------------------------------------------
# down

ours() { # ours PID: the process is one this cluster started (its command line names $STATE)
	[[ -r /proc/$1/cmdline ]] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -qF "$STATE"
}

stop_pid() { # stop_pid NAME PID: SIGTERM, then SIGKILL after 15 s
	local name=$1 pid=$2 i
	ours "$pid" || return 0
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 75; i++)); do
		ours "$pid" || { log "stopped $name (pid $pid)"; return 0; }
		sleep 0.2
	done
	log "$name (pid $pid) did not stop in 15 s: SIGKILL"
	kill -KILL "$pid" 2>/dev/null || true
	sleep 0.2
}

stop_component() { # stop_component NAME
	local f=$STATE/pids/$1.pid
	[[ -f $f ]] || return 0
	stop_pid "$1" "$(cat "$f")"
	rm -f "$f"
}

# remove_containers deletes every pod container from the private containerd (through ctr while
# it runs, then through runc with our private root for anything left), and stops the shims it
# started.
remove_containers() {
	local id pid
	record_container_ids
	if ctr_up; then
		for id in $(ctr_ tasks ls -q 2>/dev/null); do
			ctr_ tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
		done
		for id in $(ctr_ tasks ls -q 2>/dev/null); do
			ctr_ tasks delete --force "$id" >/dev/null 2>&1 || true
		done
		for id in $(ctr_ containers ls -q 2>/dev/null); do
			ctr_ containers delete "$id" >/dev/null 2>&1 || true
		done
	fi
	stop_component containerd
	if [[ -d $STATE/runc/k8s.io ]]; then
		for id in $(runc --root "$STATE/runc/k8s.io" list -q 2>/dev/null); do
			runc --root "$STATE/runc/k8s.io" delete --force "$id" >/dev/null 2>&1 || true
		done
	fi
	# Shims outlive containerd; each names our socket on its command line.
	for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $CTR_SOCK" || true); do
		stop_pid containerd-shim "$pid"
	done
}

# record_container_ids keeps the ids of every container and sandbox of ours: their shims'
# sockets and CNI's cache files outside the state dir are named after them.
record_container_ids() {
	{
		ctr_up && ctr_ containers ls -q 2>/dev/null
		ls "$STATE/containerd/state/io.containerd.runtime.v2.task/k8s.io" 2>/dev/null
		runc --root "$STATE/runc/k8s.io" list -q 2>/dev/null
	} | grep -E '^[0-9a-f]{64}$' >>"$STATE/container-ids" || true
}

# remove_id_leftovers removes what our shims and CNI leave outside the state dir when
# containers are removed without their pods being torn down through the kubelet: each shim's
# socket in /run/containerd/s (named by the hash of our socket path, namespace and id, so
# Docker's are never touched) and CNI's cached results in /var/lib/cni/results.
remove_id_leftovers() {
	[[ -f $STATE/container-ids ]] || return 0
	local id h
	for id in $(sort -u "$STATE/container-ids"); do
		h=$(printf '%s' "$CTR_SOCK/k8s.io/$id" | sha256sum | cut -c1-64)
		rm -f "/run/containerd/s/$h" /var/lib/cni/results/*-"$id"-*
	done
}

unmount_state() {
	local i m
	for ((i = 0; i < 5; i++)); do
		mapfile -t mounts < <(findmnt -rn -o TARGET | grep -E "^$STATE(/|$)" | sort -r)
		((${#mounts[@]})) || return 0
		for m in "${mounts[@]}"; do
			m=$(printf '%b' "$m") # findmnt escapes spaces as \x20
			umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
		done
	done
	findmnt -rn -o TARGET | grep -E "^$STATE(/|$)" >&2 && return 1
	return 0
}

remove_network() {
	if ip link show "$BRIDGE" >/dev/null 2>&1; then
		ip link delete "$BRIDGE" && log "removed bridge $BRIDGE"
	fi
	local ipt
	for ipt in iptables ip6tables; do
		while $ipt -w -D FORWARD -j "$FWD_CHAIN" 2>/dev/null; do :; done
		if $ipt -w -n -L "$FWD_CHAIN" >/dev/null 2>&1; then
			$ipt -w -F "$FWD_CHAIN" && $ipt -w -X "$FWD_CHAIN" && log "removed $ipt chain $FWD_CHAIN"
		fi
	done
	# CNI keeps a result cache in /var/lib/cni whatever bin/conf dirs it is given.
	rm -f /var/lib/cni/results/mcpsidecar-kube-* 2>/dev/null || true
	remove_id_leftovers
	if [[ -f $STATE/varlibcni.absent ]]; then
		rmdir /var/lib/cni/results /var/lib/cni 2>/dev/null || true
	fi
}

restore_sysctls() {
	[[ -f $STATE/sysctls.saved ]] || return 0
	local line
	while IFS= read -r line; do
		[[ $(sysctl -n "${line%%=*}") == "${line#*=}" ]] && continue
		sysctl -qw "$line" && log "restored $line"
	done <"$STATE/sysctls.saved"
}

# remove_host_leftovers removes what the kubelet and runc create outside our state dir:
# /var/log/containers links into our pod log dir, and the cgroups of our containers.
remove_host_leftovers() {
	local l
	for l in /var/log/containers/*; do
		[[ -L $l && $(readlink "$l") == "$STATE"/* ]] && rm -f "$l"
	done
	[[ -f $STATE/varlogcontainers.absent ]] && rmdir /var/log/containers 2>/dev/null || true
	# The kubelet puts its device-plugin socket here whatever its root dir is.
	rm -f /var/lib/kubelet/device-plugins/kubelet.sock
	if [[ -f $STATE/varlibkubelet.absent ]]; then
		rmdir /var/lib/kubelet/device-plugins /var/lib/kubelet 2>/dev/null || true
	fi
	if [[ -f $STATE/cgroups.before ]]; then
		local d
		for d in /sys/fs/cgroup/*/k8s.io; do
			[[ -d $d ]] || continue
			find "$d" -mindepth 1 -depth -type d -exec rmdir {} + 2>/dev/null || true
			grep -qxF "$d" "$STATE/cgroups.before" || rmdir "$d" 2>/dev/null || true
		done
	fi
}

cmd_down() {
	need_root "down"
	local t0 ; t0=$(now)
	if [[ -d $STATE ]]; then
		stop_component kubelet
		remove_containers
		stop_component kube-scheduler
		stop_component kube-controller-manager
		stop_component kube-apiserver
		stop_component etcd
		unmount_state || die "mounts under $STATE remain (listed above); not removing it: unmount them and run '$0 down' again"
	fi
	remove_network
	if [[ -d $STATE ]]; then
		restore_sysctls
		remove_host_leftovers
		rm -rf --one-file-system "$STATE"
	fi
	log "down in $(elapsed "$t0") s"
}

# ---------------------------------------------------------------------------------------------
# status

cmd_status() {
	if [[ ! -d $STATE ]]; then
		echo "test cluster: down ($STATE does not exist)"
		ip link show "$BRIDGE" >/dev/null 2>&1 && echo "warning: bridge $BRIDGE exists; run '$0 down'"
		return 0
	fi
	echo "test cluster state: $STATE (logs: $STATE/logs)"
	local name pid
	for name in "${COMPONENTS[@]}"; do
		pid=$(cat "$STATE/pids/$name.pid" 2>/dev/null) || { printf '  %-24s not started\n' "$name"; continue; }
		if ours "$pid"; then
			printf '  %-24s running, pid %-7s RSS %5d MiB\n' "$name" "$pid" \
				$(($(awk '/^VmRSS/ {print $2}' "/proc/$pid/status") / 1024))
		else
			printf '  %-24s NOT running (pid %s)\n' "$name" "$pid"
		fi
	done
	if [[ -f $KUBECONFIG_ADMIN ]]; then
		echo "KUBECONFIG=$KUBECONFIG_ADMIN"
		kc get nodes -o wide 2>&1 | sed 's/^/  /' || true
		echo "  pods: $(kc get pods -A --no-headers 2>/dev/null | wc -l)"
	fi
	ip -br addr show "$BRIDGE" 2>/dev/null | sed 's/^/  bridge: /' || echo "  bridge $BRIDGE: absent"
}

# ---------------------------------------------------------------------------------------------
# smoke

SMOKE_FAILS=0
check() { # check DESCRIPTION CMD...
	local what=$1 ; shift
	if "$@" >/dev/null 2>&1; then
		echo "PASS $what"
	else
		echo "FAIL $what"
		SMOKE_FAILS=$((SMOKE_FAILS + 1))
	fi
}

pod_yaml() { # pod_yaml NAME RESTART ARGS...: a restricted pod running the nettest image
	local name=$1 restart=$2 ; shift 2
	local args ; args=$(printf '"%s",' "$@")
	cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $name, namespace: smoke}
spec:
  restartPolicy: $restart
  automountServiceAccountToken: false
  enableServiceLinks: false
  securityContext:
    runAsNonRoot: true
    runAsUser: 65534
    seccompProfile: {type: RuntimeDefault}
  containers:
  - name: nettest
    image: $NETTEST_IMAGE
    imagePullPolicy: Never
    args: [${args%,}]
    securityContext:
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      capabilities: {drop: [ALL]}
YAML
}

pod_phase() { kc -n smoke get pod "$1" -o 'jsonpath={.status.phase}'; }
phase_is() { [[ $(pod_phase "$1") == "$2" ]]; }
phase_done() { [[ $(pod_phase "$1") =~ ^(Succeeded|Failed)$ ]]; }
logs_have() { kc -n smoke logs "$1" | grep -q "$2"; }
host_dials() { # the host reaches a pod through its address on the bridge
	timeout 5 bash -c "exec 3<>/dev/tcp/$1/8080 && head -n1 <&3" | grep -q nettest-ok
}

nothing_left() {
	! ip link show "$BRIDGE" >/dev/null 2>&1 || return 1
	! { iptables-save; ip6tables-save; } 2>/dev/null | grep -qE "$FWD_CHAIN|$BRIDGE|10\.237\." || return 1
	! grep -qF "$STATE" /proc/mounts || return 1
	! pgrep -f "$STATE" >/dev/null || return 1
	[[ ! -e $STATE ]] || return 1
	! ls /var/lib/cni/results/mcpsidecar-kube-* >/dev/null 2>&1 || return 1
	local id h
	for id in $(cat "$1"); do
		h=$(printf '%s' "$CTR_SOCK/k8s.io/$id" | sha256sum | cut -c1-64)
		[[ ! -e /run/containerd/s/$h ]] || return 1
		! ls /var/lib/cni/results/*-"$id"-* >/dev/null 2>&1 || return 1
	done
	[[ ! -e /var/lib/kubelet/device-plugins/kubelet.sock ]] || return 1
}

# forward_guarded: our chain is jumped to from FORWARD, and no rule before the jump accepts
# traffic that is not bound to another interface. (Docker moves its DOCKER-USER jump back to
# the top whenever it creates a network, so ours need not stay first.)
forward_guarded() {
	local rule
	while IFS= read -r rule; do
		[[ $rule == "-A FORWARD -j $FWD_CHAIN" ]] && return 0
		if [[ $rule == *"-j ACCEPT"* && $rule != *"-i "* && $rule != *"-o "* ]]; then
			echo "FORWARD accepts before our chain: $rule" >&2
			return 1
		fi
		if [[ $rule == *"-j ACCEPT"* && $rule == *"$BRIDGE"* ]]; then return 1; fi
	done < <(iptables -w -S FORWARD 2>/dev/null | grep '^-A FORWARD')
	return 1
}

cgroup_count() { # container cgroups under k8s.io in every hierarchy
	local d n=0
	for d in /sys/fs/cgroup/*/k8s.io/*; do [[ -d $d ]] && n=$((n + 1)); done
	echo "$n"
}

sysctls_restored() { # sysctls_restored SAVED
	local s
	for s in "${SYSCTLS[@]}"; do
		grep -qxF "$s=$(sysctl -n "$s")" "$1" || return 1
	done
}

cmd_smoke() {
	need_root "smoke"
	local before ; before=$(mktemp)
	local s
	for s in "${SYSCTLS[@]}"; do echo "$s=$(sysctl -n "$s")"; done >"$before"
	local cg_before ; cg_before=$(cgroup_count)

	cmd_up
	trap '{ keep_logs; cmd_down || true; }' EXIT # a failed check must not leave the cluster up
	local t0 ; t0=$(now)
	kc create namespace smoke >/dev/null
	wait_for "service account smoke/default" kc -n smoke get serviceaccount default
	pod_yaml server Always serve :8080 | kc apply -f - >/dev/null
	wait_for "pod smoke/server Running" phase_is server Running
	log "smoke: server pod Running in $(elapsed "$t0") s"
	local ip ; ip=$(kc -n smoke get pod server -o 'jsonpath={.status.podIP}')
	pod_yaml client Never dial "$ip:8080" | kc apply -f - >/dev/null
	pod_yaml routes Never routes - | kc apply -f - >/dev/null
	wait_for "pod smoke/client to finish" phase_done client
	wait_for "pod smoke/routes to finish" phase_done routes

	echo "smoke checks:"
	check "server pod Running with an address on $POD_SUBNET ($ip)" grep -q '^10\.237\.0\.' <<<"$ip"
	check "client pod reached the server pod over TCP on the bridge" phase_is client Succeeded
	check "client log (through the API and the kubelet) shows the server's answer" logs_have client nettest-ok
	check "server log shows the client's connection" logs_have server answered
	check "the host reaches the pod through $BRIDGE_ADDR on the bridge" host_dials "$ip"
	check "a pod has no default route (no way off this machine)" phase_is routes Succeeded
	check "FORWARD jumps to $FWD_CHAIN before any ACCEPT that could match $BRIDGE" forward_guarded
	check "no masquerade rule names the pod subnet" bash -c "! iptables-save -t nat | grep -q '10\.237\.'"
	check "containerd runs with registry requests pointed at a closed loopback port" \
		grep -qz '^HTTPS_PROXY=http://127.0.0.1:9$' "/proc/$(cat "$STATE/pids/containerd.pid")/environ"
	kc -n smoke get pods -o wide >&2 || true

	local ids ; ids=$(mktemp)
	ctr_ containers ls -q >"$ids"
	trap - EXIT
	cmd_down
	echo "after down:"
	check "nothing left (processes, mounts, bridge, iptables rules, shim sockets, CNI cache, kubelet socket, state dir)" nothing_left "$ids"
	check "sysctls restored (${SYSCTLS[*]})" sysctls_restored "$before"
	check "no container cgroups left" test "$(cgroup_count)" -le "$cg_before"
	rm -f "$before" "$ids"
	((SMOKE_FAILS == 0)) || die "smoke: $SMOKE_FAILS check(s) failed"
	echo "smoke: all checks passed"
}

main() {
	case ${1:-} in
	build) cmd_build ;;
	up) cmd_up ;;
	down) cmd_down ;;
	status) cmd_status ;;
	smoke) cmd_smoke ;;
	*) die "usage: $0 build|up|down|status|smoke" ;;
	esac
}

# Sourcing the script (for debugging one step) defines the functions without running main.
# main and exit share one line so that bash, which reads a script as it runs, never reads past
# it (an edit to this file during a long build cannot change what runs next).
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then main "$@"; exit $?; fi
