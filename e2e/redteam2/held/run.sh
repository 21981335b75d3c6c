#!/usr/bin/env bash
# The attempts that HELD (see ../README.md): exec, native code, filesystem,
# network, gateway and credential-listener tricks (probes.py, with a held
# credential for host.docker.internal:18443 served by servers.py over TLS
# with a throw-away CA); FIFOs, links, x32 and i386 syscalls
# (probes_files_arch.py); the launcher's supervisor (probes_supervisor.py).
# Prints the probes' "RT {...}" lines; judge them against the README.
source "$(dirname "$0")/../lib.sh"
need_base_image
build_bin
here=$(cd "$(dirname "$0")" && pwd)
fix=$WORK/held-fix
mkdir -p "$fix" "$WORK/held"
if [ ! -f "$fix/srv.pem" ]; then
	(cd "$fix" &&
		openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 3 -subj "/CN=rt2-ca" \
			-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign" 2>/dev/null &&
		openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj "/CN=host.docker.internal" 2>/dev/null &&
		printf 'subjectAltName=DNS:host.docker.internal\n' >ext &&
		openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 3 -extfile ext 2>/dev/null &&
		cat /etc/ssl/certs/ca-certificates.crt ca.pem >bundle.pem)
fi
python3 "$here/servers.py" &
srv=$!
trap 'kill $srv 2>/dev/null || true' EXIT
sleep 1
cp "$here"/probes*.py "$WORK/held/"
printf 'FROM %s\nCOPY probes.py probes_files_arch.py probes_supervisor.py /app/\n' "$BASE_IMAGE" >"$WORK/held/Dockerfile"
docker build -q -t rt2-held:local "$WORK/held" >/dev/null
cp "$here/spec.toml" "$WORK/held/spec.toml"
export RT_SECRET=sk-rt2-REAL-VALUE-held-by-the-gateway-0123456789
export MCPSIDECAR_CA_BUNDLE=$fix/bundle.pem
for p in probes.py probes_files_arch.py probes_supervisor.py; do
	echo "== $p"
	"$MCPSIDECAR_BIN" run --allow-old-engine --quiet --spec "$WORK/held/spec.toml" --runs-dir "$WORK/held/runs" \
		--image rt2-held:local --pull never -- python3 "/app/$p" 2>"$WORK/held/$p.stderr" | grep '^RT' | cut -c1-400
	echo "run directory: $(latest_run "$WORK/held/runs")"
done
echo "host-side fixture log: $fix/hits.log"
