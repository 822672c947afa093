#!/usr/bin/env bash
# with-postgres.sh CMD...: run CMD with DOPPEL_TEST_DATABASE_URL exported,
# pointing at a PostgreSQL server the tests may create databases on.
#
# The server is, in this order:
#   1. DOPPEL_TEST_DATABASE_URL itself, when it is already set;
#   2. the server on 127.0.0.1:5432, when one answers there and lets
#      `postgres` in without a password;
#   3. a throwaway cluster (initdb --auth=trust) in a temporary directory on a
#      free port, stopped and removed when CMD ends, however it ends.
# When route 3 finds no PostgreSQL binaries it installs them (apt-get, as
# root) or fails saying how to get them.
#
# Exits with CMD's status. See docs/storage.md, "Running the PostgreSQL tests".
set -euo pipefail

me=with-postgres
say() { echo "$me: $*" >&2; }
die() {
	say "$*"
	exit 1
}

[ $# -gt 0 ] || die "usage: $0 CMD [ARG...]"

# Route 1: the caller's server.
if [ -n "${DOPPEL_TEST_DATABASE_URL:-}" ]; then
	say "using DOPPEL_TEST_DATABASE_URL from the environment"
	exec "$@"
fi

# answers PORT: something accepts TCP connections on 127.0.0.1:PORT.
answers() {
	timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
}

# Route 2: a server on the standard port that trusts `postgres`.
why=
if answers 5432; then
	if ! command -v psql >/dev/null 2>&1; then
		why="127.0.0.1:5432 answers but there is no psql to try it; "
	elif PGCONNECT_TIMEOUT=5 psql -w -X -q -A -t -h 127.0.0.1 -p 5432 -U postgres -d postgres \
		-c 'select 1' >/dev/null 2>&1; then
		export DOPPEL_TEST_DATABASE_URL='postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable'
		say "using the PostgreSQL server on 127.0.0.1:5432 (user postgres, no password)"
		exec "$@"
	else
		why="127.0.0.1:5432 answers but does not let postgres in without a password; "
	fi
fi

# Route 3: a throwaway cluster.
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1fs", b - a }'; }

# find_bindir prints the directory holding initdb and pg_ctl: DOPPEL_PG_BINDIR,
# else the newest /usr/lib/postgresql/*/bin (Debian, Ubuntu), else PATH.
find_bindir() {
	if [ -n "${DOPPEL_PG_BINDIR:-}" ]; then
		if [ -x "$DOPPEL_PG_BINDIR/initdb" ]; then echo "$DOPPEL_PG_BINDIR"; fi
		return 0
	fi
	local dir
	dir=$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
	if [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then
		echo "$dir"
		return
	fi
	if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
		dirname "$(command -v initdb)"
	fi
	return 0
}

bindir=$(find_bindir)
if [ -z "$bindir" ]; then
	[ -z "${DOPPEL_PG_BINDIR:-}" ] || die "DOPPEL_PG_BINDIR=$DOPPEL_PG_BINDIR holds no initdb"
	if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
		die "no PostgreSQL server binaries (initdb, pg_ctl) found; install PostgreSQL (e.g. apt-get install postgresql) or set DOPPEL_TEST_DATABASE_URL to a server the tests may create databases on"
	fi
	say "no PostgreSQL server binaries found; installing them (apt-get install postgresql)"
	was_up=false
	if answers 5432; then was_up=true; fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2 || die "apt-get update failed"
	apt-get install -y -qq postgresql >&2 || die "apt-get install postgresql failed"
	# The package may start its own cluster; leave the machine as it was.
	if ! $was_up && command -v pg_lsclusters >/dev/null 2>&1; then
		pg_lsclusters -h 2>/dev/null | while read -r ver name _ status _; do
			if [ "$status" = online ]; then pg_ctlcluster "$ver" "$name" stop || true; fi
		done
	fi
	bindir=$(find_bindir)
	[ -n "$bindir" ] || die "installed postgresql but still found no initdb"
fi

# As root, the cluster belongs to `postgres` (the server refuses to run as
# root); otherwise to whoever runs this.
pg_user=
if [ "$(id -u)" -eq 0 ]; then
	id postgres >/dev/null 2>&1 || die "running as root, and there is no postgres user to own the cluster"
	pg_user=postgres
fi

# as_owner CMD...: run CMD as the cluster's owner, from the cluster's directory
# (the owner may not be allowed into the current one).
as_owner() {
	if [ -z "$pg_user" ]; then
		(cd "$tmp" && "$@")
	elif command -v runuser >/dev/null 2>&1; then
		(cd "$tmp" && runuser -u "$pg_user" -- "$@")
	else
		(cd "$tmp" && su "$pg_user" -s /bin/sh -c "$(printf '%q ' "$@")")
	fi
}

# The directory also holds the server's socket, whose path is limited to about
# 100 bytes: as root use /tmp, which `postgres` can reach.
base=${TMPDIR:-/tmp}
if [ -n "$pg_user" ]; then base=/tmp; fi
tmp=$(mktemp -d "$base/doppel-pg.XXXXXX")
started=false

# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
	local status=$?
	trap - EXIT INT TERM
	if $started; then
		as_owner "$bindir/pg_ctl" -D "$tmp/data" stop -m immediate -w >/dev/null 2>&1 || true
	fi
	rm -rf "$tmp"
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -n "$pg_user" ]; then chown "$pg_user" "$tmp"; fi
chmod 700 "$tmp"

t0=$(now)
if ! as_owner "$bindir/initdb" --auth=trust -U postgres --no-sync --encoding=UTF8 --locale=C \
	-D "$tmp/data" >"$tmp/initdb.log" 2>&1; then
	cat "$tmp/initdb.log" >&2
	die "initdb failed"
fi
initdb_took=$(since "$t0")

# A free port: unanswered now; if another process takes it before the server
# does, the start fails and the next candidate is tried.
t1=$(now)
port=
for _ in 1 2 3 4 5 6 7 8 9 10; do
	candidate=$((20000 + RANDOM % 40000))
	if answers "$candidate"; then continue; fi
	if as_owner "$bindir/pg_ctl" -D "$tmp/data" -l "$tmp/server.log" -w -t 60 start \
		-o "-p $candidate -k '$tmp' -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
		>/dev/null 2>&1; then
		port=$candidate
		started=true
		break
	fi
	# pg_ctl may have given up on a server that is still coming up.
	as_owner "$bindir/pg_ctl" -D "$tmp/data" stop -m immediate -w >/dev/null 2>&1 || true
done
if [ -z "$port" ]; then
	cat "$tmp/server.log" >&2 2>/dev/null || true
	die "could not start a throwaway PostgreSQL server"
fi

ready=false
for _ in $(seq 1 100); do
	if "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres -d postgres; then
		ready=true
		break
	fi
	sleep 0.1
done
if ! $ready; then
	cat "$tmp/server.log" >&2 || true
	die "the throwaway PostgreSQL server on 127.0.0.1:$port never became ready"
fi

export DOPPEL_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
version=$("$bindir/pg_ctl" --version | awk '{ print $3 }')
say "${why}started a throwaway PostgreSQL $version cluster on 127.0.0.1:$port in $tmp (initdb $initdb_took, start $(since "$t1")); removed on exit"

set +e
"$@"
status=$?
set -e
exit "$status"
