GO ?= go
PKGS := ./...
# staticcheck, pinned: `go run` fetches it through the module proxy into the
# module cache (nothing else to install) and leaves go.mod alone. v0.8.2 is
# staticcheck 2026.2.2, built with and for Go 1.26.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: build release image test test-clients services vet fmt docs bench bench-clients run chaos java-test java-bench

# What a build says it is (ontime version, ontime_build_info, the
# webhooks' User-Agent): git describe's version and the commit, stamped at
# link time, so a build with -buildvcs=false (GOFLAGS, as many CI systems
# set) or from a tree without .git still knows. Without .git and without
# VERSION/COMMIT given, the stamp is empty and the binary says what the Go
# toolchain recorded (internal/buildinfo).
# Before the first tag: v0.0.0-gCOMMIT (a version that sorts before v0.0.1).
VERSION ?= $(shell git describe --tags --match 'v*' --dirty 2>/dev/null || git describe --always --dirty --abbrev=12 2>/dev/null | sed 's/^/v0.0.0-g/')
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
COMMIT_DATE ?= $(shell git log -1 --format=%cI 2>/dev/null)
BUILDINFO := github.com/ontimehq/ontime/internal/buildinfo
LDFLAGS := -X '$(BUILDINFO).version=$(VERSION)' -X '$(BUILDINFO).commit=$(COMMIT)' -X '$(BUILDINFO).date=$(COMMIT_DATE)'
BIN ?= bin/ontime
DIST ?= dist
RELEASE_PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/ontime

# Static binaries for every release platform and their SHA-256 sums, in
# $(DIST)/: ontime-VERSION-OS-ARCH and SHA256SUMS (check with
# `cd dist && sha256sum -c SHA256SUMS`). Then `make image` for the
# container. Tag first (git tag vX.Y.Z) so VERSION is the release's, and
# move CHANGELOG.md's Unreleased section under it.
release:
	rm -rf $(DIST) && mkdir -p $(DIST)
	for p in $(RELEASE_PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" \
	    -o $(DIST)/ontime-$(VERSION)-$$os-$$arch ./cmd/ontime || exit 1; \
	done
	cd $(DIST) && sha256sum ontime-* > SHA256SUMS && cat SHA256SUMS

# The container image, stamped like the binaries (.dockerignore leaves
# .git out of the build context, so the version comes as build arguments).
IMAGE ?= ontime:$(VERSION)
image:
	docker build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) --build-arg COMMIT_DATE=$(COMMIT_DATE) -t $(IMAGE) .

# The whole test suite, against the real local servers (started if down).
# PostgreSQL is one of the suite's own (scripts/with-test-postgres.sh: the
# suite at its peak needs more connections than the shared server has).
test: services vet test-clients
	./scripts/with-test-postgres.sh $(GO) test -race -count=1 -timeout 60m $(PKGS)
	cd deploy && $(GO) test -count=1 ./...   # the dashboard and alert rules (own go.mod: the PromQL parser)
	$(MAKE) java-test

# The Java client (clients/java): compiled with javac (Java 17, no
# dependency beyond the JDK), its JUnit 5 tests run by Debian's junit5
# console launcher against a live `ontime serve` the tests start from the
# binary built here. Maven users build it with clients/java/pom.xml; CI has
# no Maven Central, so it does not use Maven.
JAVA_OUT := $(CURDIR)/clients/java/target/make
JUNIT_DIR ?= /usr/share/java
JUNIT_CP := $(JUNIT_DIR)/junit-jupiter-api.jar:$(JUNIT_DIR)/opentest4j.jar:$(JUNIT_DIR)/apiguardian-api.jar
java-test:
	rm -rf $(JAVA_OUT) && mkdir -p $(JAVA_OUT)
	$(GO) build -ldflags "$(LDFLAGS)" -o $(JAVA_OUT)/ontime ./cmd/ontime
	javac --release 17 -Xlint:all,-serial -Werror -d $(JAVA_OUT)/main $$(find clients/java/src/main -name '*.java')
	javac --release 17 -Xlint:all,-serial -Werror -d $(JAVA_OUT)/test -cp $(JAVA_OUT)/main:$(JUNIT_CP) $$(find clients/java/src/test -name '*.java')
	java -Dontime.bin=$(JAVA_OUT)/ontime -jar $(JUNIT_DIR)/junit-platform-console-standalone.jar \
	  --class-path $(JAVA_OUT)/main:$(JAVA_OUT)/test --scan-class-path --fail-if-no-tests --disable-banner --details=summary

# Submit rates of the Java client beside the Go client's on one node
# (sequential and 16 threads); see scripts/client-bench.sh.
java-bench:
	./scripts/client-bench.sh

services:
	./scripts/services.sh

# The API as other languages meet it (~1 minute): apiv1/openapi.json
# through redocly lint (no warning) and openapi-typescript (a program
# calling every route type-checks), then the TypeScript and Python clients
# against a live `ontime serve` each (their generated types current with
# the document). npm packages come from the lockfiles.
test-clients: build
	cd tools/openapi && npm ci --no-audit --no-fund && npm run check
	cd clients/typescript && npm ci --no-audit --no-fund && ONTIME_BIN=$(CURDIR)/bin/ontime npm test
	cd clients/python && python3 scripts/gen_types.py --check && ONTIME_BIN=$(CURDIR)/bin/ontime python3 -m unittest discover -s tests -v

# Submit rates of the Go, TypeScript and Python clients against one
# `ontime serve`, sequential and 16 concurrent callers, side by side
# (~2 minutes); see bench/clients.
bench-clients: build
	cd clients/typescript && npm ci --no-audit --no-fund
	cd bench && $(GO) run ./clients -ontime $(CURDIR)/bin/ontime

# docs/configuration.md from the code (TestConfigDocIsCurrent fails when
# it is stale); the pages' runnable blocks: go test -run TestDocsRun ./e2e/
docs:
	$(GO) run ./internal/configdoc

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1)
	$(GO) vet $(PKGS)
	$(GO) run $(STATICCHECK) $(PKGS)
	$(GO) mod tidy -diff          # go.mod and go.sum say exactly what is used
	cd bench && $(GO) vet ./...   # the benchmark module builds (its own go.mod)
	cd bench && $(GO) run $(STATICCHECK) ./...
	cd bench && $(GO) mod tidy -diff
	cd deploy && $(GO) vet ./...  # the dashboard/rules/compose checks (own go.mod)
	cd deploy && $(GO) run $(STATICCHECK) ./...
	cd deploy && $(GO) mod tidy -diff

run:
	$(GO) run ./cmd/ontime serve

# ontime against asynq and River, same workloads, one run (~25 minutes):
# ontime in-process and as `ontime serve` over HTTP + webhook (the service
# path; `cd bench && go run . -only service` alone, `-quick` a small run).
# Writes bench/out/results.md and the plots; see BENCHMARKS.md.
bench: services
	cd bench && $(GO) run . -out out

# The chaos suite at full size, one scenario at a time, without the race
# detector (~30 minutes, and the burst on top): real `ontime serve`
# processes, submits over HTTP to whichever node is alive, webhooks to a
# receiver in the test. Kill rounds (issue 25 item 10): 3 nodes on the
# database coordinator, MariaDB and PostgreSQL, default leases, 200 tasks/s
# due 2-10 s ahead, a random node kill -9'd every ~11 s and restarted 3 s
# later under the same node_id, 8 rounds; a private PostgreSQL crashed; a
# private Redis hot tier flushed, killed and restarted empty; a Go-handler
# node process killed beside `ontime serve` (item 1: target-less tasks
# wait, unattempted, and are delivered on its return); both nodes of a
# cluster with skip and fire_once schedules killed past the misfire
# threshold (item 5: no burst of stale fires); hostile receivers and
# clients; a 2,000,000-task burst. Each prints submitted /
# delivered / lost / duplicated / early / lateness p50 p99 max / over 30 s
# and the load average (also appended to chaos-results.txt) and fails on a
# lost or early task. `make test` runs the short version.
# Sizes: ONTIME_CHAOS_<NAME> (e2e/chaos_*_test.go); figures: RELIABILITY.md.
chaos: services
	ONTIME_CHAOS=full ONTIME_CHAOS_OUT=$(CURDIR)/chaos-results.txt $(GO) test -count=1 -v -timeout 150m -run 'TestChaos' ./e2e/
