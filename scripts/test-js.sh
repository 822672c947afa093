#!/usr/bin/env bash
# test-js.sh [NODE-TEST-ARG...]: test the TypeScript client (clients/js)
# against the real binary.
#
# It installs the package's dev dependencies (npm ci, from package-lock.json),
# builds it, packs it with npm pack and installs the tarball into a fresh
# project (importing it there, and type-checking a use of it against its
# declarations), installs a fresh copy of the folder into another (whose
# prepare builds it), builds the binary (or takes DOPPEL_BIN when it is set), and
# runs the package's tests with node --test and DOPPEL_BIN set.
#
# The tests need Node >= 18 and npm; npm ci reaches the npm registry the
# user's npm is configured with, unless its cache already holds TypeScript.
#
# Exits 0 when the tests pass, 3 when node or npm is missing or too old (it
# says which; the caller decides whether that is a skip), otherwise 1.
set -euo pipefail

me=test-js
say() { echo "$me: $*" >&2; }
missing() {
	say "$*"
	say "install Node.js 18 or later with npm (on Debian: apt-get install -y nodejs npm)"
	exit 3
}

root=$(cd "${0%/*}/.." && pwd)
pkg=$root/clients/js

command -v node >/dev/null 2>&1 || missing "no node on PATH: the client runs on Node.js, and its tests are node --test"
command -v npm >/dev/null 2>&1 || missing "no npm on PATH: it installs TypeScript, which builds the client, and packs it"
node -e 'process.exit(Number(process.versions.node.split(".")[0]) < 18 ? 1 : 0)' ||
	missing "node is $(node --version), older than the 18 the client needs (its fetch)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ -z "${DOPPEL_BIN:-}" ]; then
	command -v go >/dev/null 2>&1 || { say "no go to build the binary with; set DOPPEL_BIN to one"; exit 1; }
	say "building the binary"
	(cd "$root" && go build -o "$tmp/doppel" ./cmd/doppel)
	DOPPEL_BIN=$tmp/doppel
fi
export DOPPEL_BIN

cd "$pkg"
say "npm ci (TypeScript, a dev dependency) and the build"
npm ci --no-audit --no-fund --loglevel=error >/dev/null
npm run --silent build

say "npm pack, and installing the tarball into a fresh project"
tarball=$(npm pack --silent --pack-destination "$tmp" | tail -n 1)
mkdir "$tmp/project"
cd "$tmp/project"
echo '{"name": "doppel-client-install-check", "private": true, "type": "module"}' >package.json
npm install --no-audit --no-fund --loglevel=error "$tmp/$tarball" >/dev/null
cat >check.mjs <<'JS'
import("@doppelproxy/client").then((m) => {
  for (const name of ["Client", "startDoppel", "DoppelError", "RevisionMismatch", "NotFound", "VerificationFailed"]) {
    if (typeof m[name] !== "function") { console.error("the installed package has no " + name); process.exit(1); }
  }
});
JS
node check.mjs
cat >check.ts <<'TS'
import { Client, DoppelError, VerificationFailed, startDoppel, type Doppel } from "@doppelproxy/client";
const c: Client = new Client("http://127.0.0.1:8081", { token: "t" });
async function use(d: Doppel): Promise<number> {
  const { proxy, revision } = await c.proxy("shop");
  await c.updateProxy(proxy, revision);
  const s = await c.session({ shop: {} }, { ttl: 60 });
  await s.end();
  try {
    await c.verify({ match: { path: "^/orders$" }, count: 3, gapsMs: { min: 1000 }, sameHeader: "Idempotency-Key" });
  } catch (e) {
    if (e instanceof VerificationFailed) return e.matched + e.requests.length;
    if (e instanceof DoppelError) return e.status;
  }
  await d.stop();
  return (await startDoppel({ config: "", token: "t" })).proxyUrl.length;
}
void use;
TS
"$pkg/node_modules/.bin/tsc" --noEmit --strict --module nodenext --moduleResolution nodenext --target es2022 --types node \
	--typeRoots "$pkg/node_modules/@types" check.ts

say "installing the folder, fresh, into another project (its prepare builds it)"
mkdir "$tmp/folder" "$tmp/project2"
(cd "$pkg" && tar -c --exclude=./node_modules --exclude=./dist .) | tar -x -C "$tmp/folder"
cd "$tmp/project2"
echo '{"name": "doppel-client-folder-check", "private": true, "type": "module"}' >package.json
npm install --no-audit --no-fund --loglevel=error "$tmp/folder" >/dev/null
node "$tmp/project/check.mjs"

say "running the tests"
cd "$pkg"
node --test --test-concurrency=1 "$@" test/*.test.mjs
