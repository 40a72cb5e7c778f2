# ovn-transparent. `make sandbox` and `make test` are the two commands a new machine needs;
# both install what is missing first (Debian packages as root, Kubernetes binaries built once
# from the Go module proxy into $(OVNT_CACHE_DIR)).

GO          ?= go
OUT         := _output
BIN         := $(OUT)/bin
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT      ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS     := -X github.com/ovn-transparent/ovn-transparent/internal/cliapp.version=$(VERSION) \
               -X github.com/ovn-transparent/ovn-transparent/internal/cliapp.commit=$(COMMIT)
TEST_FLAGS  ?= -count=1 -timeout 30m
export OVNT_CACHE_DIR ?= /var/cache/ovn-transparent

.PHONY: first-run-note all build build-windows models lint lint-deploy images deploy-test deps kube-binaries test test-unit test-unit-nonroot test-integration bench bench-services bench-netpol conformance conformance-k8s e2e-binaries sandbox sandbox-down clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/ovnt-master ./cmd/ovnt-master
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/ovnt-node ./cmd/ovnt-node
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/ovnt-cni ./cmd/ovnt-cni
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/ovnt-workload ./test/cmd/ovnt-workload
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/ovnt-sandbox ./test/cmd/ovnt-sandbox
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/pause ./test/cmd/pause

build-windows:
	GOOS=windows GOARCH=amd64 CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/windows/ovnt-node.exe ./cmd/ovnt-node
	GOOS=windows GOARCH=amd64 CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/windows/ovnt-cni.exe ./cmd/ovnt-cni

models:
	bash ovsdb-models/generate.sh

lint:
	@bad=$$(gofmt -l .); \
	  if [ -n "$$bad" ]; then echo "gofmt needed:"; echo "$$bad"; exit 1; fi
	$(GO) vet ./...
	GOOS=windows $(GO) vet ./...
	GOOS=windows $(GO) build ./...
	GOOS=darwin $(GO) build ./...
	@$(GO) mod tidy -diff >/dev/null || { echo "go.mod/go.sum are not tidy: run go mod tidy"; $(GO) mod tidy -diff; exit 1; }

# The Ansible playbooks: ansible-lint (production profile), syntax checks, and the master and
# Linux node playbooks in check mode against this machine; offline, from Debian packages.
lint-deploy: build
	bash ansible/ci.sh

# The Linux image, from images/linux/Dockerfile, into $(OUT)/images/ovnt-linux.tar (a docker
# archive); with Debian's buildah and a Debian 12 base made here (hack/build-images.sh), as
# no registry is needed. With Docker: the `docker build` line of images/README.md.
# The Windows image, $(OUT)/images/ovnt-windows.tar, is written directly (images/windows).
images: build build-windows
	GO=$(GO) bash hack/build-images.sh

# The image deployed for real (test/deployreal): `make images`, then a cluster of real nodes
# with nothing of ours on them, the image imported into their containerd and
# images/manifests/ applied; pods, a Service, a NetworkPolicy, a rolling restart of the
# DaemonSet and the master's failover are checked. Then playbooks/ovn_central.yml over SSH
# on three machines booted with systemd (a RAFT cluster), twice, and the NB leader's machine
# killed. Not part of make test: minutes, and over 1 GB of disk (images/README.md#verified).
# DEPLOY_RUN picks some of the tests (.ci/run runs a subset).
DEPLOY_RUN ?= TestLinuxManifestsOnBareNodes|TestManifests|TestMachineCredentials|TestAnsibleCentral|TestAnsibleSite
deploy-test: deps images kube-binaries
	bash hack/install-deps.sh deploy
	OVNT_BIN_DIR=$(abspath $(BIN)) OVNT_IMAGE_ARCHIVE=$(abspath $(OUT))/images/ovnt-linux.tar OVNT_ANSIBLE_MACHINES=1 \
	  $(GO) test -count=1 -timeout 45m -v -run '$(DEPLOY_RUN)' ./test/deployreal/

# With OVNT_OVN=26.03, also the pinned OVN/OVS rootfs the tests then run with
# (test/harness/ovnrootfs.go; the harness would build it too, inside a test's deadline).
deps:
	bash hack/install-deps.sh
	@if [ -n "$$OVNT_OVN" ]; then $(GO) run ./test/cmd/ovn-rootfs >/dev/null; fi

# Also links kubectl into $(BIN), for use against the sandbox.
kube-binaries:
	@mkdir -p $(BIN)
	dir=$$($(GO) run ./test/cmd/kube-binaries) && ln -sf "$$dir/kubectl" $(BIN)/kubectl

# Tests that skip themselves for a missing program or missing root say so in $(SKIP_LOG);
# the targets print the list at the end (internal/testing/testenv). On CI such a skip fails.
SKIP_LOG    := $(abspath $(OUT))/skipped-tests.txt

# Every tier, the upstream [sig-network] Conformance set (test/upstream/suite) included. The
# end-to-end tests run the binaries just built (OVNT_BIN_DIR) instead of building their own;
# e2e-binaries builds e2e.test first, so that no package spends its timeout on that build.
test: first-run-note deps lint build build-windows kube-binaries e2e-binaries
	@mkdir -p $(OUT); rm -f $(SKIP_LOG)
	@OVNT_SKIP_LOG=$(SKIP_LOG) OVNT_BIN_DIR=$(abspath $(BIN)) $(GO) test $(TEST_FLAGS) ./...; rc=$$?; \
	  bash hack/skip-report.sh $(SKIP_LOG); exit $$rc

# Figures for the README's performance section (not a test: nothing asserts a time).
bench: deps build kube-binaries
	OVNT_BIN_DIR=$(abspath $(BIN)) $(GO) test -count=1 -run '^$$' -bench PodStartup -benchtime 1x ./test/e2e/

# Services at scale against the real NB and API server (no data plane): 5,000 Services x 10
# endpoints on 10 then 100 nodes; sizes from SVCBENCH_* (test/bench/services).
bench-services: deps build kube-binaries
	OVNT_BIN_DIR=$(abspath $(BIN)) $(GO) test -count=1 -timeout 40m -run '^$$' -bench Services -benchtime 1x ./test/bench/services/

# NetworkPolicy at scale against a real NB and API server (figures, nothing asserted).
bench-netpol: deps build kube-binaries
	OVNT_BIN_DIR=$(abspath $(BIN)) $(GO) test -count=1 -timeout 45m -run '^$$' -bench NetworkPolicy -benchtime 1x ./test/bench/netpol/

# Every NetworkPolicy case cyclonus generates, judged by its truth table against real packets
# (make test runs a subset with every tag); prints pass/fail counts per tag at the end.
conformance: deps build kube-binaries
	OVNT_BIN_DIR=$(abspath $(BIN)) OVNT_CONFORMANCE=all $(GO) test -count=1 -timeout 240m -v \
	  -run 'TestNoPolicyAllAllowed|TestCyclonus' ./test/conformance/

# The upstream Kubernetes e2e suite (e2e.test of the cluster's release) against a cluster of
# real nodes: UPSTREAM_SETS of conformance ([sig-network] Conformance, which make test runs
# too), netpol ([Feature:NetworkPolicy]) and network (all of [sig-network]);
# test/upstream/not-applicable.txt says what is left out and why. Prints per-set counts and the
# failing tests last; per test: $(OUT)/upstream/<set>/results.md, beside the JUnit report
# junit.xml and ginkgo.log. See docs/upstream-e2e.md.
# UPSTREAM_REMOTE=node2 runs that node as a remote chassis (docs/remote-chassis.md);
# UPSTREAM_NODES=6 runs six nodes, two per zone, for the three tests that need them.
UPSTREAM_SETS ?= conformance,netpol,network
UPSTREAM_REMOTE ?=
UPSTREAM_NODES ?= 3
conformance-k8s: deps build kube-binaries e2e-binaries
	@mkdir -p $(OUT)/upstream; rm -f $(OUT)/upstream/summary.txt
	@OVNT_BIN_DIR=$(abspath $(BIN)) OVNT_UPSTREAM_SETS=$(UPSTREAM_SETS) OVNT_UPSTREAM_OUT=$(abspath $(OUT))/upstream \
	  OVNT_UPSTREAM_REMOTE=$(UPSTREAM_REMOTE) OVNT_UPSTREAM_NODES=$(UPSTREAM_NODES) \
	  $(GO) test -count=1 -timeout 300m -v -run TestUpstream ./test/upstream/suite/; rc=$$?; \
	  cat $(OUT)/upstream/summary.txt 2>/dev/null; exit $$rc

# e2e.test and ginkgo of the cluster's release, built once into $(OVNT_CACHE_DIR) (about 15
# minutes cold), before the tests so that no package spends its timeout on the build.
e2e-binaries:
	$(GO) run ./test/cmd/kube-binaries -e2e >/dev/null

# The unit tier: no root, no Kubernetes binaries, no network namespace; its only daemon is an
# ovsdb-server in a temporary directory (Debian's openvswitch-common). Tests of the other
# tiers skip themselves under -short (testenv.Integration); the packages that hold nothing
# else are left out, rather than linked only to skip.
UNIT_PKGS    = $(shell $(GO) list ./... | grep -v -E '/test/(e2e|svcbench|npbench|bench|cluster|cmd|realnode|upstream/suite)(/|$$)|/node/integration$$')

test-unit:
	@mkdir -p $(OUT); rm -f $(SKIP_LOG)
	@OVNT_SKIP_LOG=$(SKIP_LOG) $(GO) test -count=1 -short $(TEST_UNIT_FLAGS) $(UNIT_PKGS); rc=$$?; \
	  bash hack/skip-report.sh $(SKIP_LOG); exit $$rc

# The unit tier as the user nobody (run as root): what a developer without root gets.
test-unit-nonroot:
	bash hack/test-unit-nonroot.sh

# The integration and end-to-end tiers alone (root, OVS, the Kubernetes binaries).
test-integration: deps build kube-binaries e2e-binaries
	@mkdir -p $(OUT); rm -f $(SKIP_LOG)
	@OVNT_SKIP_LOG=$(SKIP_LOG) OVNT_BIN_DIR=$(abspath $(BIN)) $(GO) test $(TEST_FLAGS) -run "$${RUN:-.}" ./...; rc=$$?; \
	  bash hack/skip-report.sh $(SKIP_LOG); exit $$rc

# Before a first run (no Kubernetes build in the cache yet), what it costs. The builds print
# their progress every 30 s.
first-run-note:
	@[ -d "$(OVNT_CACHE_DIR)/kube" ] || echo "First run: about 40 minutes on 2 cores (Debian packages, then Kubernetes built once from source into $(OVNT_CACHE_DIR), about 30 minutes of it); later runs skip both."

# The sandbox runs in the background until `make sandbox-down`; kubectl works against
# $(OUT)/sandbox/kubeconfig and `$(BIN)/ovnt-sandbox exec node/node1 -- CMD` runs on a node.
sandbox: first-run-note deps kube-binaries build
	$(BIN)/ovnt-sandbox --state-dir $(OUT)/sandbox up

sandbox-down:
	@if [ -x $(BIN)/ovnt-sandbox ]; then $(BIN)/ovnt-sandbox --state-dir $(OUT)/sandbox down; else echo "no sandbox binary: nothing runs"; fi

clean:
	rm -rf $(OUT)
