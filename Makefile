# Kruise-rs developer entry points. `make help` lists them.
SHELL := /bin/bash
.DEFAULT_GOAL := help
CARGO ?= cargo

.PHONY: help
help: ## this list
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-16s %s\n", $$1, $$2}'

.PHONY: deps
deps: ## install the Debian packages the cluster and build need (root)
	hack/install-deps.sh

.PHONY: k8s-binaries
k8s-binaries: ## build the pinned Kubernetes binaries and etcd into ~/.cache/kruise-rs
	hack/build-k8s.sh

.PHONY: cluster-up
cluster-up: ## start the local cluster (idempotent); KUBECONFIG=.cluster/kubeconfig
	hack/cluster.sh up

.PHONY: cluster-down
cluster-down: ## stop the local cluster and remove its state
	hack/cluster.sh down

.PHONY: cluster-status
cluster-status: ## which local cluster components run
	@hack/cluster.sh status

.PHONY: build
build: ## build every crate
	$(CARGO) build --workspace --bins

.PHONY: unit
unit: ## unit, property and snapshot tests of every crate, the e2e crate's own, the CRI test that needs no runtime (no cluster)
	hack/test.sh unit

.PHONY: lint
lint: ## rustfmt, clippy (warnings are errors), shellcheck, the module layout and the documents' paths and links (hack/layout-check.py), markdown (hack/md-lint.py)
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	shellcheck hack/*.sh kind/*.sh kind/bin/docker kind/node/entrypoint .ci/run
	python3 hack/layout-check.py
	python3 hack/md-lint.py

.PHONY: fmt
fmt: ## format every crate (rustfmt)
	$(CARGO) fmt --all

.PHONY: crds
crds: ## regenerate deploy/crds/ from the API types (api's crdgen binary)
	$(CARGO) run -p kruise-api --bin crdgen -- --write deploy/crds

.PHONY: helm-chart
helm-chart: ## regenerate the Helm chart deploy/helm/kruise-rs from deploy/
	python3 hack/helm-chart.py

.PHONY: docs
docs: ## regenerate docs/feature-gates.md and cli/README.md's gate list from api/src/features.rs
	KRUISE_UPDATE_DOCS=1 $(CARGO) test -p kruise-api --test feature_gates_doc

.PHONY: e2e
e2e: ## every e2e stage (smoke gate, behaviour suite, serial phase, plugin, dev mode, kwok, CRI, cycle); with KUBECONFIG set, the suite against that cluster
	hack/test.sh e2e

.PHONY: chaos
chaos: SEED ?=
chaos: KILLS ?= 10
chaos: ## the seeded fault campaign on the local cluster running Kruise-rs (RELIABILITY.md): SEED= (drawn and printed if empty), KILLS=10
	$(CARGO) run -q -p kruise-e2e --bin kruise-e2e-chaos -- --seed "$(SEED)" --kills $(KILLS)

.PHONY: stages
stages: ## the stages of make test and what each does (run some with hack/test.sh STAGE…)
	@hack/test.sh --list

.PHONY: kind-up
kind-up: ## a kind cluster built here (no pulls) running Kruise-rs from deploy/; KUBECONFIG=.cluster/kind/kubeconfig
	kind/up.sh

.PHONY: kind-down
kind-down: ## remove the kind cluster and what kind/up.sh started
	kind/down.sh

.PHONY: kind-e2e
kind-e2e: ## the behaviour suite (smoke, suite, serial) on a kind cluster, which is removed afterwards
	kind/up.sh --e2e; status=$$?; kind/down.sh; exit $$status

.PHONY: test
test: ## every stage: unit tests, then the behaviour suite against Kruise-rs installed from deploy/ on a local cluster, dev mode, kwok, CRI, cycle; prints a table of stages
	hack/test.sh

.PHONY: dev-up
dev-up: cluster-up ## run kruise-manager and kruise-daemon from this tree as host processes
	hack/dev-up.sh

.PHONY: dev-down
dev-down: ## stop the host-process manager and daemon
	hack/dev-up.sh down

.PHONY: images
images: ## build the manager and daemon images (release binaries; PROFILE=dev for debug ones; no Docker) and push them to the local registry
	hack/build-images.sh

.PHONY: install
install: ## install Kruise-rs from deploy/ (release images, PROFILE=dev for debug) on KUBECONFIG (default: the local cluster) and wait until ready
	hack/install.sh

.PHONY: uninstall
uninstall: ## remove Kruise-rs and everything it created
	hack/install.sh uninstall

.PHONY: bench
bench: bench-scale bench-node cluster-up ## every benchmark; the rollout one (in-place vs recreate vs Deployment vs bare Pods, 3 interleaved runs, release manager); appends to BENCHMARKS.md
	hack/dev-up.sh down
	KRUISE_PROFILE=release hack/dev-up.sh
	$(CARGO) run --release -p kruise-e2e --bin kruise-bench -- --runs 3 --append BENCHMARKS.md
	hack/dev-up.sh down

.PHONY: bench-scale
bench-scale: ## controller at scale: 1,000 and 5,000 Pods on kwok nodes, manager vs. floor, RSS, CPU; appends to BENCHMARKS.md
	hack/bench-scale.sh --append BENCHMARKS.md

.PHONY: bench-openkruise
bench-openkruise: ## side by side with OpenKruise v1.9.0 (built from its Go module, cached): rollout, manager RSS/CPU, daemon RSS, webhook latency, ABBA turns on the local cluster; then 1,000 Pods on kwok nodes (scale cluster), both managers in ABBA turns; appends to BENCHMARKS.md
	hack/bench-openkruise.sh --append BENCHMARKS.md

# The daemon pull bench starts its own release daemon (the dev-mode manager keeps running for its
# NodeImage webhook), so the dev-mode daemon is stopped for it and started again after.
.PHONY: bench-node
bench-node: cluster-up ## live-view render at 1,000 Pods, CLI first status line, daemon pull vs direct CRI; appends to BENCHMARKS.md
	$(CARGO) build --release -p kubectl-kruise -p kruise-daemon
	$(CARGO) build -p kruise-e2e --bin kruise-daemon-bench
	$(CARGO) bench -p kubectl-kruise --bench live_view -- --append $(CURDIR)/BENCHMARKS.md
	hack/dev-up.sh
	KRUISE_SKIP_BUILD=1 hack/bench-cli.sh --append BENCHMARKS.md
	source hack/lib.sh && stop kruise-daemon 15
	$${CARGO_TARGET_DIR:-target}/debug/kruise-daemon-bench --append BENCHMARKS.md
	KRUISE_SKIP_BUILD=1 hack/dev-up.sh

# The probe bench measures the daemon installed from deploy/ (a release build unless PROFILE=dev).
.PHONY: bench-probe
bench-probe: cluster-up ## kruise-daemon RSS with 100 PodProbeMarker probes on its node against the same daemon idle, in cluster; appends to BENCHMARKS.md
	hack/install.sh
	$(CARGO) build -p kruise-e2e --bin kruise-probe-bench
	KRUISE_E2E_INCLUSTER=1 $${CARGO_TARGET_DIR:-target}/debug/kruise-probe-bench --build "$${PROFILE:-release}" --append BENCHMARKS.md

.PHONY: demo
demo: ## fresh machine to a live in-place rollout: cluster, Kruise-rs in cluster, demo CloneSet
	hack/demo.sh
