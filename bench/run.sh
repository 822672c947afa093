#!/usr/bin/env bash
# The peer benchmark behind `make bench` (see docs/performance.md).
#
# Installs what is missing (nginx-light and wrk from apt, Toxiproxy with
# `go install`, Mountebank from npm; the last two into bench/.cache/), builds
# the benchmark programs and Doppel into bench/.cache/bin, then hands over to
# the orchestrator (bench/cmd/bench), which starts and stops its own
# processes by PID. Extra arguments go to the orchestrator
# (e.g. `bench/run.sh -rounds 5 -keep`). The whole run, installs included,
# is bounded by BENCH_BUDGET seconds (default 570, under 10 minutes).
#
# BENCH_ONLY=doppel (`make bench BENCH_ONLY=doppel`) runs only Doppel with
# the request journal on and off, on /small and the mock path: it installs
# only wrk and passes `-only doppel` to the orchestrator.
#
# BENCH_ONLY=bounds runs only the benchmarks of what outside input may cost
# (docs/security.md's bounds): huge headers, full-journal reads, stream
# subscribers, a render over 3 M characters, live sessions; it installs
# nothing. The full run ends with them too.
#
# BENCH_ONLY=latency runs only a latency toxic of 1 s on 2,000 connections
# at once, Toxiproxy and Doppel side by side (bench/cmd/latencyload); it
# installs Toxiproxy only. The full run ends with it too.
#
# BENCH_ONLY=fleet runs only what a fleet costs (docs/fleet.md): three
# replicas' counts in one PostgreSQL (p50, p99, counts a second) and a
# verification over three replicas' journals of 10,000 entries each, on a
# server of scripts/with-postgres.sh. The full run ends with them too.
set -euo pipefail

cd "$(dirname "$0")/.."
GO=${GO:-go}
CACHE=bench/.cache
BIN=$CACHE/bin
TOXIPROXY_VERSION=${TOXIPROXY_VERSION:-v2.12.0}
MOUNTEBANK_VERSION=${MOUNTEBANK_VERSION:-2.9.1}
BUDGET=${BENCH_BUDGET:-570}
ONLY=${BENCH_ONLY:-}
case "$ONLY" in "" | doppel | delays | bounds | fleet | latency) ;; *) echo "bench: FAILED: BENCH_ONLY=$ONLY: the selections are doppel, delays, bounds, fleet and latency" >&2; exit 1 ;; esac

die() { echo "bench: FAILED: $*" >&2; exit 1; }
note() { echo "bench: $*" >&2; }

# bounds runs each bound's benchmark once and prints its figures.
bounds() {
	note "what outside input may cost (docs/security.md), one run each"
	"$GO" test -run '^$' -bench 'HugeHeaders|FullJournalReads' -benchtime 1x ./cmd/doppel &&
		"$GO" test -run '^$' -bench 'ProxyWithSubscribers' -benchtime 20x ./internal/admin &&
		"$GO" test -run '^$' -bench 'BatchEveryCharacter' -benchtime 1x ./internal/jinja &&
		"$GO" test -run '^$' -bench 'LiveSessionBytes' -benchtime 1x ./internal/session ||
		die "a bound's benchmark failed"
}
# fleet measures a counted request's statement, three replicas at once.
fleet() {
	note "a fleet's counted request (docs/fleet.md): three replicas counting in one PostgreSQL"
	scripts/with-postgres.sh bash -c "'$GO' test -run '^\$' -bench 'FleetCount' -benchtime 3s ./internal/store/postgres &&
		'$GO' test -run '^\$' -bench 'FleetVerify' -benchtime 20x ./cmd/doppel" ||
		die "the fleet's benchmarks failed"
}
# latency runs the latency toxic at scale against both servers.
latency() {
	note "a latency toxic of 1 s on 2,000 connections at once: Toxiproxy and Doppel"
	"$GO" build -o "$BIN/" ./cmd/doppel ./bench/cmd/latencyload &&
		"$BIN/latencyload" -doppel "$BIN/doppel" -toxiproxy "$BIN/server" ||
		die "the latency benchmark failed"
}
if [ "$ONLY" = bounds ]; then
	bounds
	exit 0
fi
if [ "$ONLY" = fleet ]; then
	fleet
	exit 0
fi

mkdir -p "$BIN"

# apt packages (root, or sudo without a password).
missing=()
[ "$ONLY" = delays ] || command -v wrk >/dev/null 2>&1 || missing+=(wrk)
if [ -z "$ONLY" ]; then
	command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx-light)
	command -v node >/dev/null 2>&1 || missing+=(nodejs)
	command -v npm >/dev/null 2>&1 || missing+=(npm)
fi
if [ ${#missing[@]} -gt 0 ]; then
	note "installing ${missing[*]} with apt-get"
	if [ "$(id -u)" -eq 0 ]; then SUDO=(); elif command -v sudo >/dev/null 2>&1; then SUDO=(sudo -n); else
		die "missing ${missing[*]}, and not root: apt-get install -y ${missing[*]}"
	fi
	"${SUDO[@]}" apt-get update -qq || die "apt-get update failed"
	DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq "${missing[@]}" || die "apt-get install ${missing[*]} failed"
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

# Toxiproxy (its server binary is called `server`).
if { [ -z "$ONLY" ] || [ "$ONLY" = latency ] || [ "$ONLY" = delays ]; } && [ ! -x "$BIN/server" ]; then
	note "installing Toxiproxy ($TOXIPROXY_VERSION) with go install"
	GOBIN="$PWD/$BIN" timeout 300 "$GO" install "github.com/Shopify/toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION" ||
		die "go install github.com/Shopify/toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION failed"
fi

# Mountebank.
MB=$CACHE/mb/node_modules/.bin/mb
if [ -z "$ONLY" ] && [ ! -x "$MB" ]; then
	note "installing Mountebank $MOUNTEBANK_VERSION with npm"
	timeout 300 npm install --silent --no-audit --no-fund --prefix "$CACHE/mb" "mountebank@$MOUNTEBANK_VERSION" >&2 ||
		die "npm install mountebank@$MOUNTEBANK_VERSION failed"
fi

# Our programs and Doppel itself, always rebuilt so the numbers are today's.
note "building Doppel and the benchmark programs"
"$GO" build -o "$BIN/" ./cmd/doppel ./bench/cmd/bench ./bench/cmd/upstream ./bench/cmd/goproxy ./bench/cmd/loadgen ./bench/cmd/h2bench ||
	die "go build failed"

if [ "$ONLY" = latency ]; then
	latency
	exit 0
fi

left=$((BUDGET - SECONDS))
[ "$left" -gt 60 ] || die "installs used the time budget ($SECONDS s of $BUDGET s); run again, they are cached now"
extra=()
[ -n "$ONLY" ] && extra=(-only "$ONLY")
"$BIN/bench" -bin "$BIN" -mb "$MB" -nginx "$NGINX" -budget "${left}s" "${extra[@]}" "$@"
[ -n "$ONLY" ] || { bounds && fleet && latency; }
