#!/usr/bin/env bash
# Builds the release image (image/release.Dockerfile) from a static binary
# built here, without pulling any base image:
#
#   scripts/release-image.sh [TAG]        # TAG defaults to doppel:latest
#
# ENGINE is the command that builds (default: podman, else docker), given
# as words: ENGINE="podman --root /tmp/x" works. CA_BUNDLE is the CA
# certificates file copied in (default: the first of the usual places).
# GOOS and GOARCH pick the binary's platform, as for go build.
set -euo pipefail
cd "$(dirname "$0")/.."

tag=${1:-doppel:latest}
if [ -z "${ENGINE:-}" ]; then
	if command -v podman >/dev/null 2>&1; then
		ENGINE=podman
	elif command -v docker >/dev/null 2>&1; then
		ENGINE=docker
	else
		echo "release-image: neither podman nor docker is installed; set ENGINE" >&2
		exit 3
	fi
fi
read -r -a engine <<<"$ENGINE"

if [ -z "${CA_BUNDLE:-}" ]; then
	for f in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt /etc/ssl/cert.pem; do
		if [ -s "$f" ]; then
			CA_BUNDLE=$f
			break
		fi
	done
fi
if [ -z "${CA_BUNDLE:-}" ] || [ ! -s "$CA_BUNDLE" ]; then
	echo "release-image: no CA bundle found (install ca-certificates, or set CA_BUNDLE)" >&2
	exit 3
fi

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT

CGO_ENABLED=0 go build -trimpath -o "$ctx/doppel" ./cmd/doppel
cp image/passwd image/group "$ctx/"
cp "$CA_BUNDLE" "$ctx/ca-certificates.crt"
chmod 0644 "$ctx/passwd" "$ctx/group" "$ctx/ca-certificates.crt"

# The directories, each with its owner and mode, as one archive: ADD keeps
# what the archive says.
root="$ctx/root"
install -d -m 0755 "$root/etc/doppel" "$root/var/lib/doppel/templates"
install -d -m 1777 "$root/tmp"
tar -C "$root" -cf "$ctx/dirs.tar" --numeric-owner --owner=0 --group=0 --no-recursion \
	etc var var/lib tmp
tar -C "$root" -rf "$ctx/dirs.tar" --numeric-owner --owner=10001 --group=10001 --no-recursion \
	etc/doppel var/lib/doppel var/lib/doppel/templates
rm -rf "$root"

"${engine[@]}" build -f image/release.Dockerfile -t "$tag" "$ctx"
