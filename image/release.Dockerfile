# The release image: the static binary and what it needs at run time, on
# nothing. scripts/release-image.sh assembles the build context and builds
# it (docs/container.md); it pulls no base image.
#
# The context holds:
#   doppel                 built with CGO_ENABLED=0, so it needs no libc
#   ca-certificates.crt    a CA bundle, for https upstreams
#   passwd, group          image/passwd and image/group: root and doppel
#   dirs.tar               the directories, with their owners and modes
#                          (COPY --chown would hand /etc and /var to doppel
#                          too, and COPY drops /tmp's sticky bit)
FROM scratch

COPY passwd group /etc/
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
# /tmp (1777) for the control socket, /tmp/doppel.sock by default;
# /etc/doppel and /var/lib/doppel/templates owned by doppel, so that a
# fresh volume mounted on either is too.
ADD dirs.tar /
COPY doppel /usr/local/bin/doppel

# The configuration directory, and the template files uploaded at run time:
# without a volume they go with the container.
VOLUME ["/var/lib/doppel/templates"]

# Numeric, so that an orchestrator can tell it is not root without a passwd.
USER 10001:10001
ENV HOME=/var/lib/doppel
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
