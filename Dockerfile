# Doppel in a container: a static binary on a small base, run as a user
# that is not root. Build it from the repository root:
#
#   docker build -t doppel .
#
# and serve the main.yaml of a directory of yours, mounted at /etc/doppel
# (mount the directory, not the file: writes replace the document by a
# rename beside it, under a lock file there):
#
#   docker run --rm --user "$(id -u):$(id -g)" -v "$PWD:/etc/doppel" \
#     -p 127.0.0.1:8080:8080 -p 127.0.0.1:8081:8081 doppel
#
# docs/getting-started.md#in-a-container says more.

FROM golang:1.26-alpine AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Static, so that it runs on any base; no VCS stamp (.git is not copied).
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -o /out/doppel ./cmd/doppel

FROM alpine:3
RUN apk add --no-cache ca-certificates \
 && adduser -D -H -u 10001 doppel \
 && mkdir /etc/doppel \
 && chown doppel /etc/doppel
COPY --from=build /out/doppel /usr/local/bin/doppel
# A document's addresses are usually 127.0.0.1, which nothing outside the
# container reaches: listen on every interface of the container instead,
# on the ports below. `-e DOPPEL_PROXY_ADDR=...` changes that.
ENV DOPPEL_PROXY_ADDR=0.0.0.0:8080 \
    DOPPEL_ADMIN_ADDR=0.0.0.0:8081
# Relative paths in the document (templates.dir, ./templates by default)
# are then beside it, in the mounted directory.
WORKDIR /etc/doppel
USER doppel
EXPOSE 8080 8081
ENTRYPOINT ["doppel"]
CMD ["serve", "--config", "/etc/doppel/main.yaml"]
