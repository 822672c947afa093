#!/usr/bin/env bash
# The release image, tested end to end (docs/container.md#the-image-test):
# built with podman (or docker when its daemon answers), run with a
# configuration directory mounted read-only and a templates volume, as
# Doppel 1.1's run line mounts them; proxied, mocked and administered
# through; then stopped with SIGTERM while a slow request is in flight,
# which must complete, and the container must exit 0.
#
# No registry is needed: the image is FROM scratch, from a binary built
# here and this machine's CA bundle. With podman, the script uses storage
# of its own, cgroupfs, no default ulimits and the host network, so it runs
# in a container without systemd. Without podman or docker it installs
# podman with apt-get when it can (root or sudo), else exits 3.
set -euo pipefail
cd "$(dirname "$0")/.."

started=$(date +%s)
say() { echo "image-test: $*"; }
fail() {
	echo "image-test: FAIL: $*" >&2
	exit 1
}

work=$(mktemp -d)
name=doppel-image-test-$$
volume=doppel-image-test-templates-$$
tag=doppel:test
engine=()
as_root=() # sudo, for podman when not root: what the CI recipe runs is rootful
upstream_pid=""
cleanup() {
	local rc=$?
	if [ "$rc" -ne 0 ] && [ ${#engine[@]} -gt 0 ]; then
		echo "--- container log ---" >&2
		"${engine[@]}" logs "$name" >&2 2>&1 || true
	fi
	if [ -n "$upstream_pid" ]; then
		kill "$upstream_pid" 2>/dev/null || true
	fi
	if [ ${#engine[@]} -gt 0 ]; then
		"${engine[@]}" rm -f "$name" >/dev/null 2>&1 || true
		"${engine[@]}" volume rm -f "$volume" >/dev/null 2>&1 || true
	fi
	"${as_root[@]}" rm -rf "$work" 2>/dev/null || true
	exit "$rc"
}
trap cleanup EXIT

# --- the engine -------------------------------------------------------------

for c in go curl tar; do
	if ! command -v "$c" >/dev/null 2>&1; then
		echo "image-test: $c is needed and not installed" >&2
		exit 3
	fi
done

install_podman() {
	local sudo=""
	if [ "$(id -u)" -ne 0 ]; then
		if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
			sudo=sudo
		else
			echo "image-test: podman is not installed, docker does not answer, and installing podman needs root or sudo without a password" >&2
			exit 3
		fi
	fi
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "image-test: podman is not installed, docker does not answer, and there is no apt-get to install podman with: install podman (and runc)" >&2
		exit 3
	fi
	say "installing podman and runc"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq podman runc >/dev/null
}

if ! command -v podman >/dev/null 2>&1; then
	if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
		engine=(docker)
	else
		install_podman
	fi
fi
if [ ${#engine[@]} -eq 0 ]; then
	if [ -z "${CONTAINERS_CONF:-}" ]; then
		# No systemd to manage cgroups, and ulimits a container may not raise.
		printf '[containers]\ndefault_ulimits = []\n\n[engine]\ncgroup_manager = "cgroupfs"\n' >"$work/containers.conf"
		export CONTAINERS_CONF="$work/containers.conf"
	fi
	if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		as_root=(sudo env "CONTAINERS_CONF=$CONTAINERS_CONF" ${STORAGE_DRIVER:+"STORAGE_DRIVER=$STORAGE_DRIVER"})
	fi
	engine=("${as_root[@]}" podman --root "$work/storage" --runroot "$work/run")
	if [ -x /usr/sbin/runc ]; then
		engine+=(--runtime /usr/sbin/runc)
	fi
fi
say "engine: ${engine[*]} ($("${engine[@]}" --version))"

# --- the image --------------------------------------------------------------

t=$(date +%s)
ENGINE="${engine[*]}" scripts/release-image.sh "$tag" >"$work/build.log" 2>&1 ||
	{ cat "$work/build.log" >&2; fail "the release image did not build"; }
say "built $tag in $(($(date +%s) - t)) s"

user=$("${engine[@]}" image inspect --format '{{.Config.User}}' "$tag")
[ "$user" = "10001:10001" ] || fail "the image runs as '$user', not 10001:10001"
workdir=$("${engine[@]}" image inspect --format '{{.Config.WorkingDir}}' "$tag")
[ "$workdir" = /var/lib/doppel ] || fail "the working directory is '$workdir', not /var/lib/doppel"
ports=$("${engine[@]}" image inspect --format '{{range $p, $_ := .Config.ExposedPorts}}{{$p}} {{end}}' "$tag")
case "$ports" in *8080/tcp*8081/tcp*) ;; *) fail "the image exposes '$ports', not 8080/tcp and 8081/tcp" ;; esac

# --- the host side: an upstream, a configuration ----------------------------

go build -o "$work/helper" ./test/image
"$work/helper" -listen 127.0.0.1:0 -port-file "$work/upstream.port" >"$work/upstream.log" 2>&1 &
upstream_pid=$!
for _ in $(seq 50); do
	[ -s "$work/upstream.port" ] && break
	sleep 0.1
done
[ -s "$work/upstream.port" ] || fail "the upstream did not start"
upstream=$(cat "$work/upstream.port")
# The container shares the host's network: its ports must be free here.
read -r -d '' proxy admin < <("$work/helper" -ports 2 && printf '\0') || true
token=5d0c3f7e-8a41-4b9e-9c2d-7e6f1a2b3c4d

mkdir -p "$work/config"
cat >"$work/config/main.yaml" <<YAML
server:
  host: 127.0.0.1
  port: $proxy

admin:
  host: 127.0.0.1
  port: $admin
  tokens:
    - name: image-test
      group: admin
      token: $token

proxies:
  - name: shop
    type: http
    url: http://127.0.0.1:$upstream/
    resolve:
      type: default
    mocks:
      - name: offline
        request:
          method: GET
          url: "^/offline$"
        response:
          status: 200
          json: '{"from": "mock"}'
      # Its file is uploaded below, into the templates volume.
      - name: page
        request:
          method: GET
          url: "^/page/(?P<id>[0-9]+)$"
        response:
          status: 200
          template: page.json.j2
YAML
chmod 0755 "$work/config"
chmod 0644 "$work/config/main.yaml"

# --- run it: 1.1's two mounts, no command -----------------------------------

"${engine[@]}" volume create "$volume" >/dev/null
"${engine[@]}" run -d --name "$name" --network host \
	-v "$work/config:/etc/doppel:ro" \
	-v "$volume:/var/lib/doppel/templates" \
	"$tag" >/dev/null
for _ in $(seq 100); do
	curl -fsS -o /dev/null "http://127.0.0.1:$admin/api/v1/status" 2>/dev/null && break
	sleep 0.1
done
curl -fsS -o "$work/status.json" "http://127.0.0.1:$admin/api/v1/status" ||
	fail "the admin listener did not answer /api/v1/status within 10 s"
grep -q '"name":"shop"' "$work/status.json" || fail "the status does not list the proxy shop: $(cat "$work/status.json")"
say "serving /etc/doppel/main.yaml from the read-only mount"

# Not root: the process's user as the kernel sees it (on the host, where
# the engine runs rootful; mapped, so not 0 either, where it runs rootless).
pid=$("${engine[@]}" inspect --format '{{.State.Pid}}' "$name")
uid=$(awk '/^Uid:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
[ "$uid" != 0 ] || fail "doppel runs as root"
say "running as uid ${uid:-(not readable here)} on the host"

# Proxied to the host's upstream, and mocked with nothing behind it.
body=$(curl -fsS "http://127.0.0.1:$proxy/orders") || fail "GET /orders through the proxy failed"
[ "$body" = '{"from":"upstream","path":"/orders"}' ] || fail "GET /orders: unexpected body $body"
body=$(curl -fsS "http://127.0.0.1:$proxy/offline") || fail "GET /offline (a mock) failed"
case "$body" in *'"from": "mock"'* | *'"from":"mock"'*) ;; *) fail "GET /offline: unexpected body $body" ;; esac
say "proxied to the upstream and answered by a mock"

# The admin API: read with the token, and a template file uploaded into the
# volume by the user that is not root, then rendered.
curl -fsS -o "$work/proxies.json" -H "X-Proxy-Authorization: Bearer $token" \
	"http://127.0.0.1:$admin/api/v1/proxies" || fail "GET /api/v1/proxies failed"
grep -q '"shop"' "$work/proxies.json" || fail "GET /api/v1/proxies does not list shop: $(cat "$work/proxies.json")"
code=$(curl -sS -o "$work/upload.out" -w '%{http_code}' -X PUT -H "X-Proxy-Authorization: Bearer $token" \
	--data-binary '{"page": {{ id }}}' "http://127.0.0.1:$admin/api/v1/proxies/shop/templates/page.json.j2")
[ "$code" = 204 ] || fail "uploading page.json.j2 answered $code: $(cat "$work/upload.out")"
body=$(curl -fsS "http://127.0.0.1:$proxy/page/7") || fail "GET /page/7 (the uploaded template) failed"
[ "$body" = '{"page": 7}' ] || fail "GET /page/7: unexpected body $body"
say "read the admin API, uploaded a template into the volume and rendered it"

# The configuration directory is read-only: a write is refused, saying
# why, and the configuration serves on.
code=$(curl -sS -o "$work/delete.out" -w '%{http_code}' -X DELETE -H "X-Proxy-Authorization: Bearer $token" \
	"http://127.0.0.1:$admin/api/v1/proxies/shop")
case "$code" in 2*) fail "deleting shop from the read-only configuration answered $code" ;; esac
grep -q 'read-only' "$work/delete.out" || fail "the refused write does not say the configuration is read-only: $(cat "$work/delete.out")"
say "a write to the read-only configuration: $code $(cat "$work/delete.out")"
curl -fsS -o /dev/null "http://127.0.0.1:$proxy/offline" || fail "the proxy stopped serving after a refused write"

# The CA bundle is the host's, where Go looks for it.
"${engine[@]}" cp "$name:/etc/ssl/certs/ca-certificates.crt" "$work/ca.crt"
cmp -s "$work/ca.crt" "$(readlink -f /etc/ssl/certs/ca-certificates.crt 2>/dev/null || echo /dev/null)" ||
	[ ! -e /etc/ssl/certs/ca-certificates.crt ] || fail "the image's CA bundle differs from the host's"
# Nothing was written into the configuration directory.
[ "$(ls -A "$work/config")" = main.yaml ] || fail "the configuration directory gained files: $(ls -A "$work/config")"

# --- SIGTERM with a request in flight ---------------------------------------

curl -sS -o "$work/slow.out" -w '%{http_code}' "http://127.0.0.1:$proxy/slow?ms=3000" >"$work/slow.code" 2>"$work/slow.err" &
slow=$!
sleep 1
t=$(date +%s)
"${engine[@]}" kill --signal TERM "$name" >/dev/null
sleep 0.3
if curl -sS -o /dev/null --max-time 2 "http://127.0.0.1:$proxy/orders" 2>/dev/null; then
	fail "a new request was accepted after SIGTERM"
fi
wait "$slow" || fail "the slow request failed during the drain: $(cat "$work/slow.err")"
[ "$(cat "$work/slow.code")" = 200 ] || fail "the slow request answered $(cat "$work/slow.code")"
[ "$(cat "$work/slow.out")" = "slow answer after 3000 ms" ] || fail "the slow request answered $(cat "$work/slow.out")"
status=$("${engine[@]}" wait "$name")
[ "$status" = 0 ] || fail "the container exited $status after SIGTERM, not 0"
"${engine[@]}" logs "$name" 2>&1 | grep -q 'drained cleanly' || fail "the log does not say it drained"
say "SIGTERM: the request in flight completed, the container exited 0 after $(($(date +%s) - t)) s"

say "passed in $(($(date +%s) - started)) s"
