GO ?= go
PKGS := ./...

.PHONY: build test services vet fmt bench run

build:
	$(GO) build -o bin/ontime ./cmd/ontime

# The whole test suite, against the real local servers (started if down).
test: services vet
	$(GO) test -race -count=1 -timeout 40m $(PKGS)

services:
	./scripts/services.sh

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1)
	$(GO) vet $(PKGS)
	$(GO) mod tidy -diff          # go.mod and go.sum say exactly what is used
	cd bench && $(GO) vet ./...   # the benchmark module builds (its own go.mod)
	cd bench && $(GO) mod tidy -diff

run:
	$(GO) run ./cmd/ontime serve

# ontime against asynq and River, same workloads, one run (~10 minutes).
# Writes bench/out/results.md and the plots; see BENCHMARKS.md.
bench: services
	cd bench && $(GO) run . -out out
