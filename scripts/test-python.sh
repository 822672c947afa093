#!/usr/bin/env bash
# test-python.sh [PYTEST-ARG...]: test the Python client (clients/python)
# against the real binary.
#
# It installs the package into a fresh venv that sees the system's packages
# (pip install --no-build-isolation --no-index: offline), builds the binary
# (or takes DOPPEL_BIN when it is set), and runs the package's tests with
# pytest and DOPPEL_BIN set.
#
# PYTHON picks the interpreter (default /usr/bin/python3). The tests need
# Python >= 3.9 with venv, setuptools, pytest and requests: on Debian,
#   apt-get install -y python3-venv python3-setuptools python3-pytest python3-requests
#
# Exits 0 when the tests pass, 3 when something they need is missing (it says
# which; the caller decides whether that is a skip), otherwise 1.
set -euo pipefail

me=test-python
say() { echo "$me: $*" >&2; }
missing() {
	say "$*"
	say "on Debian: apt-get install -y python3-venv python3-setuptools python3-pytest python3-requests"
	exit 3
}

root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-/usr/bin/python3}

command -v "$python" >/dev/null 2>&1 || missing "no Python at $python (set PYTHON): the client is Python"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 9))' ||
	missing "$python is $("$python" -c 'import sys; print(sys.version.split()[0])'), older than the 3.9 the client needs"
for need in "venv:making the fresh environment the package is installed into" \
	"ensurepip:giving that environment pip (Debian's python3-venv)" \
	"setuptools:building the package offline (--no-build-isolation)" \
	"pytest:running the tests" \
	"requests:the retrying client the tests drive through Doppel"; do
	module=${need%%:*}
	"$python" -c "import $module" >/dev/null 2>&1 || missing "$python cannot import $module, needed for ${need#*:}"
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ -z "${DOPPEL_BIN:-}" ]; then
	command -v go >/dev/null 2>&1 || { say "no go to build the binary with; set DOPPEL_BIN to one"; exit 1; }
	say "building the binary"
	(cd "$root" && go build -o "$tmp/doppel" ./cmd/doppel)
	DOPPEL_BIN=$tmp/doppel
fi
export DOPPEL_BIN

say "installing clients/python into a fresh venv"
"$python" -m venv --system-site-packages "$tmp/venv"
# A copy, so that the build leaves nothing in the tree.
cp -r "$root/clients/python" "$tmp/src"
rm -rf "$tmp/src/build" "$tmp/src"/src/*.egg-info
"$tmp/venv/bin/python" -m pip install --quiet --no-build-isolation --no-index "$tmp/src"

say "running the tests"
cd "$root/clients/python"
PYTHONDONTWRITEBYTECODE=1 "$tmp/venv/bin/python" -m pytest -p no:cacheprovider -q tests "$@"
