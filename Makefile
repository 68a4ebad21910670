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
unit: ## unit and pure tests of every crate (no cluster)
	$(CARGO) test --workspace --exclude kruise-e2e

.PHONY: lint
lint: ## rustfmt, clippy (warnings are errors) and shellcheck
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	shellcheck hack/*.sh .ci/run

.PHONY: e2e
e2e: ## end-to-end suite against $$KUBECONFIG, or the local cluster (started and stopped here)
	hack/e2e.sh

.PHONY: test
test: ## the full test suite: unit tests, then the e2e suite on a local cluster brought up and down
	$(MAKE) unit
	hack/e2e.sh --cycle
