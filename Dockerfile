# Doppel in a container, built from source: `docker build -t doppel .` from
# the repository root. It compiles the static binary in a Go image and puts
# it on Alpine (a shell and a package manager, for looking around inside).
# The release image, image/release.Dockerfile, is the same binary on
# nothing at all, built by scripts/release-image.sh without pulling any
# image. Both run the way Doppel 1.1's image runs, so that its documented
# line works unchanged:
#
#   docker run --rm -p 8080:8080 -p 8081:8081 \
#     -v "$PWD/config:/etc/doppel" \
#     -v doppel-templates:/var/lib/doppel/templates \
#     doppel
#
# serves config/main.yaml, whose server and admin sections must bind
# 0.0.0.0 to be reachable from outside the container. docs/container.md
# says more.

FROM golang:1.26-alpine AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Static, so that it runs on any base; no VCS stamp (.git is not copied).
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -o /out/doppel ./cmd/doppel

FROM alpine:3
# ca-certificates for https upstreams. The user and its directories are the
# release image's: uid and gid 10001, home /var/lib/doppel, and the
# configuration directory and the templates volume owned by it, so that a
# fresh volume mounted on either is too.
RUN apk add --no-cache ca-certificates \
 && addgroup -g 10001 doppel \
 && adduser -D -H -u 10001 -G doppel -h /var/lib/doppel -s /sbin/nologin doppel \
 && install -d -o doppel -g doppel -m 0755 /etc/doppel /var/lib/doppel /var/lib/doppel/templates
COPY --from=build /out/doppel /usr/local/bin/doppel

# Template files uploaded at run time: without a volume they go with the
# container.
VOLUME ["/var/lib/doppel/templates"]
USER 10001:10001
# templates.dir is ./templates by default: relative to this, the volume.
WORKDIR /var/lib/doppel
# The ports of 1.1's example configuration and of its documented run line;
# the document's server and admin sections decide what is bound.
EXPOSE 8080 8081
# Doppel is PID 1 and handles SIGTERM and SIGINT itself: it stops
# accepting, drains what is in flight (up to 30 s) and exits 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/doppel"]
CMD ["serve", "--config", "/etc/doppel/main.yaml"]
