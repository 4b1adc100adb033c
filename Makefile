# dbfleet: every target installs or builds what it needs itself.
SHELL := /usr/bin/env bash -o pipefail
.DEFAULT_GOAL := help

GO ?= go
# envtest and the integration suites find kube-apiserver and etcd here.
export KUBEBUILDER_ASSETS ?= $(CURDIR)/bin/k8s
CONTROLLER_GEN := $(GO) tool controller-gen

.PHONY: help
help: ## Show the targets.
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

.PHONY: demo
demo: k8s-bins images ## Bring up the local federation, place a database, stop the primary's agent (writes go on), partition its member and watch the failover (DEMO_EXIT=1: tear down and exit when done).
	@echo "[demo] building bin/hub, bin/agent, bin/localfed, bin/demo"
	@$(GO) build -o bin/ ./cmd/hub ./cmd/agent ./hack/localfed ./hack/demo
	@bin/demo

.PHONY: test
# The end-to-end suite runs after the others, alone: its primaries run on real nodes and fence
# themselves when the machine is starved (on 2 cores, next to the integration suites, a fresh-clone
# run saw primaries fence and re-promote, and the latency and placement tests time out).
# The install suite runs last, alone too: it brings up a federation of its own (never two at once).
test: k8s-bins images ## Run unit, integration and end-to-end tests: real kube-apiserver/etcd, real PostgreSQL, a local federation on real nodes (builds what it needs on first use).
	$(GO) test -count=1 -timeout 40m $$($(GO) list ./... | grep -v -e '/test/e2e$$' -e '/test/install$$')
	$(GO) test -count=1 -timeout 50m ./test/e2e
	$(MAKE) --no-print-directory test-install

.PHONY: test-install
test-install: k8s-bins images helm ## Install dbfleet with its Helm charts on a local federation whose hub cluster has a real node: hub as 2 pods with leader election, agents as pods; kill the leader, helm upgrade to a rebuilt image; no database moves.
	$(GO) test -count=1 -v -timeout 25m ./test/install

.PHONY: test-unit
test-unit: ## Run only the unit tests (no API server).
	$(GO) test -count=1 -short ./...

.PHONY: build
build: ## Build bin/hub, bin/agent and bin/dbfleet-instance.
	$(GO) build -o bin/ ./cmd/hub ./cmd/agent
	$(GO) build -o bin/dbfleet-instance ./cmd/instance

.PHONY: images
images: ## Build the OCI image archives of the real member nodes into bin/images/ (pause, postgres-15 from this machine's PostgreSQL 15, agent, hub); no Docker.
	@echo "[images] building bin/images/{pause,postgres-15,agent,hub}.tar"
	@$(GO) run ./hack/images --out bin/images

.PHONY: generate
generate: ## Generate deepcopy code for api/.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: ## Generate the CRDs into deploy/crds and the hub's ClusterRole into deploy/hub/rbac.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:dir=deploy/crds
	$(GO) run ./hack/crdbounds deploy/crds
	$(CONTROLLER_GEN) rbac:roleName=dbfleet-hub paths=./pkg/hub/... output:rbac:dir=deploy/hub/rbac

.PHONY: verify-generated
verify-generated: generate manifests ## Fail when generated files are out of date.
	@if [ -n "$$(git status --porcelain -- api deploy/crds deploy/hub/rbac)" ]; then git status --short -- api deploy/crds deploy/hub/rbac; git diff -- api deploy/crds deploy/hub/rbac | head -50; \
		echo "generated files are stale: run 'make generate manifests' and commit"; exit 1; fi

# make bench-scale CLUSTERS=100 DATABASES=1000; BENCH_FLAGS="--steady 1m --no-failover" for a shorter run;
# BENCH_DOCS=docs/performance.md to replace the benchmark's section there.
CLUSTERS ?= 1000
DATABASES ?= 10000
BENCH_FLAGS ?=
BENCH_DOCS ?=

.PHONY: bench-scale
bench-scale: k8s-bins ## Scale benchmark: real etcd, hub API server and hub run, CLUSTERS simulated members (default 1000), DATABASES (default 10000); report in _output/bench-scale.
	@$(GO) build -o bin/ ./hack/benchscale
	bin/benchscale --clusters $(CLUSTERS) --databases $(DATABASES) --out _output/bench-scale $(if $(BENCH_DOCS),--docs $(BENCH_DOCS)) $(BENCH_FLAGS)

# Write unavailability and rows lost as a client sees them when the primary's member fails, on
# real nodes (the e2e suite's TestFailoverUnderWrites), at the suite's short timings and at the
# product's defaults; one FIGURE line per case and timing.
.PHONY: bench-failover
bench-failover: k8s-bins images ## Failover figures from a writer's side on real nodes, at short timings and at the defaults (about 30 min).
	@mkdir -p _output
	for timings in suite defaults; do \
		echo "== timings: $$timings"; \
		DBFLEET_E2E_TIMINGS=$$timings $(GO) test -count=1 -timeout 40m -run 'TestFailoverUnderWrites' -v ./test/e2e/ | tee _output/bench-failover-$$timings.log | grep -E 'FIGURE|^(--- |ok|FAIL)'; \
	done

# Replication lag across clusters under pgbench load (asynchronous and synchronous required) and
# ten databases failing over at once, on real nodes: the e2e suite's TestReplicationLagUnderPgbench
# and TestTenDatabasesFailingOver, which skip unless DBFLEET_E2E_BENCH=1. BENCH_REPLICATION_RUN
# picks one (e.g. TestTenDatabasesFailingOver); DBFLEET_E2E_BENCH_REPLICAS=2 gives the ten
# databases 2 replicas each.
BENCH_REPLICATION_RUN ?= TestReplicationLagUnderPgbench|TestTenDatabasesFailingOver

.PHONY: bench-replication
bench-replication: k8s-bins images ## Replication lag under pgbench (async and synchronous required) and ten databases failing over at once, on real nodes (about 20 min); FIGURE lines, log in _output/.
	@mkdir -p _output
	DBFLEET_E2E_BENCH=1 $(GO) test -count=1 -timeout 45m -run '$(BENCH_REPLICATION_RUN)' -v ./test/e2e/ | tee _output/bench-replication.log | grep -E 'FIGURE|^(--- |ok|FAIL)'

# Five healthy databases on real nodes while stress-ng holds the machine at a load average of at
# least 20 for 10 minutes (BUSY_FOR): primaries fenced and epoch changes, target 0 and 0 (the e2e
# suite's TestHealthyPrimariesOnABusyMachine, which skips unless DBFLEET_E2E_BENCH=1).
BUSY_FOR ?= 10m
# The product's defaults (fenceAfter 15 s, heartbeat 5 s), as a real install runs; BUSY_TIMINGS=
# (empty) gives the end-to-end suite's short timings (fenceAfter 8 s, heartbeat 1 s).
BUSY_TIMINGS ?= defaults

.PHONY: bench-busy
bench-busy: k8s-bins images ## Five healthy databases on a machine held at load average 20+ for BUSY_FOR (10m): fencings and epoch changes (target 0); FIGURE line, log in _output/.
	@mkdir -p _output
	@command -v stress-ng >/dev/null || apt-get install -y -q stress-ng
	DBFLEET_E2E_BENCH=1 DBFLEET_E2E_TIMINGS=$(BUSY_TIMINGS) DBFLEET_E2E_BUSY_FOR=$(BUSY_FOR) $(GO) test -count=1 -timeout 60m -run 'TestHealthyPrimariesOnABusyMachine' -v ./test/e2e/ | tee _output/bench-busy.log | grep -E 'FIGURE|fenced|^(--- |ok|FAIL)'

# make bench-latency: apply → StatefulSets → Available on a local federation with kwok nodes (its own
# state directory, _output/bench-latency/fed, brought up and down); BENCH_LATENCY_FLAGS="--one 20 --burst 20".
BENCH_LATENCY_FLAGS ?=

.PHONY: bench-latency
bench-latency: k8s-bins ## Latency benchmark: localfed up --nodes kwok, 100 databases one at a time then a burst of 100; prints p50/p99/max of apply → StatefulSets, → Pods Ready, → Available.
	@$(GO) build -o bin/ ./cmd/hub ./cmd/agent ./hack/localfed ./hack/benchlatency
	bin/benchlatency $(BENCH_LATENCY_FLAGS)

# dbfleet vs Karmada v1.16 placement (module bench/karmada, not part of `make test`).
KARMADA_BENCH_FLAGS ?=

.PHONY: bench-karmada
bench-karmada: ## Time pkg/placement against Karmada's scheduler, interleaved rounds; prints RATIO <strategy> <clusters> <dbfleet ns/op> <karmada ns/op> <ratio>.
	cd bench/karmada && $(GO) run . $(KARMADA_BENCH_FLAGS)

.PHONY: bench-karmada-check
bench-karmada-check: ## Agreement check: pkg/placement and Karmada's scheduler give the same shares except the known differences.
	cd bench/karmada && $(GO) test -count=1 ./...

.PHONY: lint
lint: ## go vet, gofmt, and the layering check (no import runs back up: hack/layering/rules.go).
	$(GO) vet ./...
	$(GO) run ./hack/layering
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# Flags for localfed up, e.g. LOCALFED_FLAGS="--members east,west --cluster-grace-period 10s".
LOCALFED_FLAGS ?=

.PHONY: localfed-up
localfed-up: k8s-bins images ## Start a local federation in the background (etcd, hub, 3 members on real nodes, agents); returns once every member is Ready.
	@echo "[localfed] building bin/hub, bin/agent, bin/localfed"
	@$(GO) build -o bin/ ./cmd/hub ./cmd/agent ./hack/localfed
	@bin/localfed up $(LOCALFED_FLAGS)

.PHONY: localfed-down
localfed-down: ## Stop every process of the local federation by its pid file and remove .localfed/.
	@$(GO) build -o bin/ ./hack/localfed
	@bin/localfed down

.PHONY: k8s-bins
k8s-bins: ## Build kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, etcd and kwok into bin/k8s (cached).
	@hack/k8s-bins.sh

# Publishing: make push IMAGE_REPO=registry.example.com/dbfleet [IMAGE_TAG=v0.1.0]. The version
# labels and the default tag come from git describe; credentials from docker/podman login files.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE_REPO ?=
IMAGE_TAG ?= $(VERSION)
IMAGE_PUSH_FLAGS ?=

.PHONY: push
push: ## Build the hub and agent images (labels: VERSION) and push them as IMAGE_REPO/hub:IMAGE_TAG and IMAGE_REPO/agent:IMAGE_TAG (go-containerregistry, no Docker).
	@if [ -z "$(IMAGE_REPO)" ]; then echo "make push needs IMAGE_REPO, e.g. make push IMAGE_REPO=registry.example.com/dbfleet"; exit 1; fi
	@echo "[images] building bin/images/{agent,hub}.tar, version $(VERSION)"
	@$(GO) run ./hack/images --out bin/images --only agent,hub --version $(VERSION)
	@$(GO) run ./hack/images push --from bin/images --repo $(IMAGE_REPO) --tag $(IMAGE_TAG) $(IMAGE_PUSH_FLAGS)

.PHONY: helm
helm: ## Build helm from the Go module proxy into ~/.cache/dbfleet/tools (cached) and link it to bin/helm.
	@hack/helm.sh >/dev/null

.PHONY: helm-lint
helm-lint: ## helm lint --strict both charts and render them at their defaults (helm built by hack/helm.sh; make test runs the same in deploy/charts).
	@helm="$$(hack/helm.sh)"; for c in deploy/charts/*/; do "$$helm" lint --strict "$$c" && "$$helm" template "$$(basename $$c)" "$$c" >/dev/null || exit 1; done
