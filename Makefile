# llmdiag — the commands a newcomer needs are `make run`, `make check` (the
# quick loop, while changing code) and `make test` (everything, before pushing).
GO      ?= go
BIN     := bin/llmdiag
# Tests with -race on 2 cores; keep the whole run well under 10 minutes.
# -count=1: tests start real Prometheus and Redis servers, whose behaviour
# the test cache cannot see, so every run runs them.
TESTFLAGS ?= -race -count=1 -timeout 9m

.PHONY: all build run check test vet lint generate checkgenerate deps docs bench fuzz image chaos clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/llmdiag

## run: start the simulated `seed` fleet and llmdiag serving it on 127.0.0.1:8080
run: build
	./scripts/run.sh $(BIN)

## check: the quick loop while changing code: go vet, then every package's
## tests with -short and without -race. End-to-end tests (internal/testing/e2e),
## tests that start real Prometheus, Redis, Alertmanager or Chromium, the
## scenario matrix and long simulations skip; unit tests all run. Run
## make test before pushing.
check: vet
	$(GO) test -short -count=1 -timeout 5m ./...

## test: install what is missing, then lint, check generated code, vet and test
## The scenario × engine matrix (128 simulated runs through the whole pipeline)
## takes ~1 min plain and far longer under -race, so it runs once without -race;
## its short tests (and every other package) run with -race.
test: deps lint checkgenerate vet
	$(GO) test $(TESTFLAGS) -short ./internal/testing/scenariotest/
	$(GO) test $(TESTFLAGS) $$($(GO) list ./... | grep -v /internal/testing/scenariotest)
	$(GO) test -count=1 -timeout 5m ./internal/testing/scenariotest/

deps:
	./scripts/deps.sh

vet:
	$(GO) vet ./...

## lint: buf lint, and buf breaking: the API may only grow (new fields, new
## numbers) compared with BREAKING_AGAINST (default: the main branch)
BREAKING_AGAINST ?= .git\#branch=main
lint:
	$(GO) tool buf lint
	@if git rev-parse -q --verify main >/dev/null 2>&1 || [ "$(origin BREAKING_AGAINST)" != file ]; then \
		$(GO) tool buf breaking proto --against '$(BREAKING_AGAINST),subdir=proto' && echo "proto/ is wire-compatible with $(BREAKING_AGAINST)"; \
	else echo "no main branch to check buf breaking against (set BREAKING_AGAINST)"; fi

## generate: regenerate gen/ and openapi/llmdiag.v1.yaml from proto/ with
## the tools pinned in go.mod
generate:
	$(GO) tool buf generate
	$(GO) run ./internal/cmd/openapi gen/openapi/openapi.yaml openapi/llmdiag.v1.yaml
	rm -r gen/openapi

## checkgenerate: fail if gen/ or openapi/ differs from what proto/ generates
checkgenerate:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(GO) tool buf generate -o "$$tmp" && \
	$(GO) run ./internal/cmd/openapi "$$tmp/gen/openapi/openapi.yaml" "$$tmp/llmdiag.v1.yaml" && \
	rm -r "$$tmp/gen/openapi" && \
	if diff -r gen "$$tmp/gen" && diff openapi/llmdiag.v1.yaml "$$tmp/llmdiag.v1.yaml"; then echo "gen/ and openapi/ are up to date"; \
	else echo "gen/ or openapi/ drifted from proto/: run make generate and commit" >&2; exit 1; fi

## manifests: regenerate deploy/base/prometheusrule.yaml and the Helm chart's
## copy (deploy/helm/llmdiag/files/rules.yaml) from `llmdiag rules` with the
## flags in deploy/rules.args, and copy the base's fleet and thresholds files
## into the chart's files/; the deploy tests fail while any is stale
.PHONY: manifests
manifests:
	$(GO) test -count=1 -run '^(TestPrometheusRule|TestChartFiles)$$' ./deploy -update

## docs: regenerate the reference part of docs/configuration.md from
## `llmdiag serve --help` (between its marker lines; the prose around it
## stays); cli's tests fail while it is stale
docs:
	$(GO) test -count=1 -run '^TestConfigurationDoc$$' ./cli -update

## bench: the benchmarks behind docs/benchmarks.md, 5 runs each, as one
## table of medians (COUNT=3, ONLY=Unary to narrow it; raw output in bin/bench.txt)
bench: deps
	./scripts/bench.sh

## fuzz: every fuzz target (func FuzzX in a _test.go file) for FUZZTIME
## each (default 30s), one after another, stopping at the first failure and
## saying how to keep its input as a regression entry (ONLY=Webhook to
## narrow, PARALLEL=1 for one worker). make check and make test run only
## the targets' seed corpora.
FUZZTIME ?= 30s
fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) ./scripts/fuzz.sh

## chaos: the chaos run (about five minutes on two cores): 205 simulated nodes,
## a real Prometheus, three `llmdiag serve` replicas of the built binary on
## one Redis, 50 clients with tokens, a connection flood and a slow stream
## reader; the lease holder killed, Redis restarted, Prometheus paused, 10%
## of the targets hung, the tokens file changed, one after another and then
## together. Prints a table of figures (bin/chaos.md) and fails on a broken
## promise (README.md, Reliability). Needs prometheus and redis-server
## (make deps installs them). make test runs only its checkers' tests.
chaos:
	@mkdir -p bin
	CHAOS_TABLE=$(CURDIR)/bin/chaos.md $(GO) test -count=1 -timeout 20m -run '^TestChaos$$' -v ./internal/testing/chaos -chaos.full

## image: the container image llmdiag:VERSION (FROM scratch, user 65532,
## this machine's CA bundle) as an OCI archive, built offline with buildah:
## bin/llmdiag-image.oci.tar (VERSION=… OUT=… GOARCH=… to choose;
## docs/operations.md, Container image). Needs buildah (make deps installs it); offline.
image:
	./scripts/image.sh

clean:
	rm -rf bin
