# The whole suite is `make test`; CI runs exactly that (.ci/run).
GO ?= go
PKGS := ./...

.PHONY: all build test test-python test-js test-toxiproxy image image-test lint schema fuzz clean bench dashboard-test screenshots

all: lint test build

build:
	$(GO) build -o bin/doppel ./cmd/doppel

# With a PostgreSQL server of its own (docs/storage.md): DOPPEL_TEST_DATABASE_URL
# when set, else one on 127.0.0.1:5432 that trusts postgres, else a throwaway
# cluster started and removed by scripts/with-postgres.sh.
# The Go suite, then the Python and TypeScript clients against the binary:
# each is skipped, saying why, when its language is missing, except under
# CI, where .ci/run installs them and a skip fails.
test:
	scripts/with-postgres.sh $(GO) test -race -count=1 $(PKGS)
	@scripts/test-python.sh || { rc=$$?; [ $$rc -eq 3 ] && [ -z "$$CI" ] || exit $$rc; }
	@scripts/test-js.sh || { rc=$$?; [ $$rc -eq 3 ] && [ -z "$$CI" ] || exit $$rc; }

test-python:
	scripts/test-python.sh

test-js:
	scripts/test-js.sh

# Toxiproxy's own tests (api_test.go, proxy_test.go, the toxics' through a
# proxy) against the binary, one release after the other, serially, outside
# the parallel groups of `test`: their timing assertions are Toxiproxy's.
# TOXIPROXY_VERSIONS picks releases, TOXIPROXY_COUNT=N runs each test N
# times, TOXIPROXY_LOGS=DIR keeps Doppel's log (docs/toxiproxy.md).
TOXIPROXY_VERSIONS ?= v2.12.0 v2.5.0
TOXIPROXY_COUNT ?= 1
# The release image, built with podman (or docker) without pulling any
# image, and run as 1.1's docker run line runs it: docs/container.md.
image:
	scripts/release-image.sh doppel

image-test:
	scripts/image-test.sh

test-toxiproxy:
	DOPPEL_TOXIPROXY_TESTS=1 TOXIPROXY_VERSIONS="$(TOXIPROXY_VERSIONS)" TOXIPROXY_COUNT="$(TOXIPROXY_COUNT)" \
		$(GO) test -count=1 -v -timeout 0 ./test/toxiproxy

lint:
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)
	GOOS=darwin $(GO) build -o /dev/null ./cmd/doppel
	GOOS=freebsd $(GO) build -o /dev/null ./cmd/doppel
	$(GO) build -tags pprof -o /dev/null ./cmd/doppel
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# The dashboard in headless Chromium against the binary (part of `make test`
# too; skipped without Chromium unless CI is set). screenshots rewrites
# docs/dashboard/*.png.
dashboard-test:
	$(GO) test -count=1 -run 'Dashboard' ./cmd/doppel ./internal/admin ./web

screenshots:
	DOPPEL_SCREENSHOTS=1 $(GO) test -count=1 -run 'TestDashboard(InABrowser|ShowsTraffic|RecordsFromTraffic|ShowsTheReplicas)' ./cmd/doppel

# Regenerate the checked-in JSON Schema after changing the document model.
schema:
	$(GO) run ./cmd/doppel config schema > doppel-config.schema.json

# Fuzz the configuration loader (FUZZTIME=1m by default).
FUZZTIME ?= 1m
fuzz:
	$(GO) test ./internal/config -run '^$$' -fuzz FuzzLoad -fuzztime $(FUZZTIME)

# The peer benchmark (docs/performance.md): installs what it needs, about 5 minutes.
# BENCH_ONLY=doppel: only Doppel with the request journal on and off, about 1 minute.
# BENCH_ONLY=delays: only the delay runs, Doppel beside Toxiproxy, about 4 minutes.
bench:
	bench/run.sh

clean:
	rm -rf bin
