GO ?= go
PKGS := ./...
# staticcheck, pinned: `go run` fetches it through the module proxy into the
# module cache (nothing else to install) and leaves go.mod alone. v0.8.2 is
# staticcheck 2026.2.2, built with and for Go 1.26.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: build test test-clients services vet fmt bench bench-clients run chaos

build:
	$(GO) build -o bin/ontime ./cmd/ontime

# The whole test suite, against the real local servers (started if down).
test: services vet test-clients
	$(GO) test -race -count=1 -timeout 40m $(PKGS)
	cd deploy && $(GO) test -count=1 ./...   # the dashboard and alert rules (own go.mod: the PromQL parser)

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
