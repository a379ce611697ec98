# nodekit — build, test and run targets. Every target that needs host packages runs `deps` first.
SHELL := /bin/bash
GO ?= go
BIN := bin/nodekit
IMAGES_DIR ?= _output/images
GOTEST_FLAGS ?= -count=1 -p 2 -timeout 28m
# Upstream crictl, built from the module proxy outside the repo, for crictl's parity table.
CRICTL_UPSTREAM_VERSION ?= v1.37.0
CRICTL_UPSTREAM_DIR ?= /var/cache/nodekit/crictl-$(CRICTL_UPSTREAM_VERSION)
# containerd 2.x built from the module proxy, cached outside the repo so CI can reuse it.
CONTAINERD2_VERSION ?= v2.4.2
CONTAINERD2_DIR ?= /var/cache/nodekit/containerd-$(CONTAINERD2_VERSION)
# The version stamped into every binary (version/ and k8s.io/component-base/version, which client-go's
# User-Agent reads): the Kubernetes release followed, "+nodekit" and the commit, e.g.
# v1.37.2+nodekit.0123456789ab (.dirty with uncommitted changes). A plain `go build` reports
# v1.37.2+nodekit.
KUBE_VERSION := $(shell sed -n 's/^const KubernetesVersion = "\(.*\)"/\1/p' version/version.go)
GIT_COMMIT := $(shell git rev-parse HEAD 2>/dev/null)
GIT_TREE_STATE := $(if $(GIT_COMMIT),$(if $(shell git status --porcelain --untracked-files=no 2>/dev/null),dirty,clean))
VERSION ?= $(KUBE_VERSION)+nodekit$(if $(GIT_COMMIT),.$(shell git rev-parse --short=12 HEAD))$(if $(filter dirty,$(GIT_TREE_STATE)),.dirty)
BUILD_DATE := $(shell TZ=UTC git show -s --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ HEAD 2>/dev/null || echo 1970-01-01T00:00:00Z)
KUBE_MINOR := $(word 2,$(subst ., ,$(KUBE_VERSION)))
LDFLAGS := $(foreach v,version.Version=$(VERSION) version.GitCommit=$(GIT_COMMIT) version.GitTreeState=$(GIT_TREE_STATE) \
	version.BuildDate=$(BUILD_DATE),-X github.com/nodekit/nodekit/$(v)) \
	$(foreach v,gitVersion=$(VERSION) gitMajor=1 gitMinor=$(KUBE_MINOR) gitCommit=$(GIT_COMMIT) gitTreeState=$(GIT_TREE_STATE) \
	buildDate=$(BUILD_DATE),-X k8s.io/component-base/version.$(v))

.PHONY: all deps build images vm-test test test-race test-containerd2 test-conformance containerd2 faults crictl-upstream-flags kube-proxy-upstream up bench conformance clean

all: build

deps:
	@hack/install-deps.sh

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/nodekit
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/nodekit-cni ./cmd/nodekit-cni
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/crictl ./cmd/crictl

images: build
	$(BIN) images build --out $(IMAGES_DIR)

# What CI runs: the main leg (every package, on containerd 1.6 from apt), then the containerd 2.x leg
# (containerd 2.x built into /var/cache/nodekit first when absent), the race detector over the
# unit-test packages, and the conformance subset (e2e.test and its images built into
# /var/cache/nodekit/conformance first when absent: ~10 min on an idle machine, then cached). `make fuzz` (not in CI: a newly found input would make CI fail at random) fuzzes
# every target; their seed corpora and kept crashers run as plain tests in the main leg.
test: deps build
	$(GO) vet ./...
	$(GO) test $(GOTEST_FLAGS) ./...
	$(MAKE) --no-print-directory test-containerd2
	$(MAKE) --no-print-directory test-race
	$(MAKE) --no-print-directory test-conformance

# The race detector over the pure unit-test packages (those whose tests run no real containerd, etcd or
# other child process; the e2e packages run real processes and are left to the plain leg).
RACE_PKGS ?= ./internal/... ./kubelet/config/... ./kubelet/fieldpath/... ./kubelet/metrics/... ./kubelet/nodestatus/... \
	./kubelet/podworkers/... ./kubelet/prober/... ./kubelet/server/... ./kubelet/certmanager/... ./kubelet/cgroups/... ./kubelet/static/... \
	./kubelet/status/... ./kubelet/volumes/... ./controlplane/controllers/... ./controlplane/scheduler/... \
	./controlplane/jointoken/... ./controlplane/apiserver/authn/... ./controlplane/apiserver/authz/... \
	./controlplane/apiserver/registry/... ./controlplane/apiserver/validation/... ./controlplane/quota/... ./cni/config/... ./cni/ipam/... \
	./cni/netconf/... ./cni/routes/... ./proxy/state/... ./proxy/conntrack/... ./runtime/cri/... ./crictl/ ./probes/... ./version/...
test-race:
	$(GO) test -race -count=1 -p 2 -timeout 15m $(RACE_PKGS)

# Native Go fuzzing of the parsers of untrusted input, each target for FUZZTIME (their seed corpora, and
# the crashers kept under testdata/fuzz, also run as plain tests in `go test ./...`). A crash fails the
# target and leaves the input under the package's testdata/fuzz/<target>/. See docs/access-control.md.
FUZZTIME ?= 10s
FUZZ_TARGETS ?= ./cni/netconf:FuzzParse ./kubelet/config:FuzzDecode ./kubelet/config:FuzzParseTaints \
	./kubelet/config:FuzzParseLabels ./kubelet/fieldpath:FuzzExtract ./runtime/cri:FuzzReadLogs \
	./proxy/iptables:FuzzParseSave ./controlplane/apiserver/validation:FuzzPod ./kubelet/server:FuzzQueryParams \
	./controlplane/jointoken:FuzzSecret ./kubelet/bootstrap:FuzzConfig ./kubelet/eviction:FuzzParseThresholds
.PHONY: fuzz
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		echo "fuzz $${t%%:*} $${t##*:} for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$${t##*:}\$$" -fuzztime $(FUZZTIME) "$${t%%:*}"; \
	done

# The containerd 2.x leg against containerd $(CONTAINERD2_VERSION) (built into $(CONTAINERD2_DIR) first
# when absent): the runtime, crictl, CNI and probes e2e packages whole, and the tests of the kubelet and
# up e2e where the runtime's behaviour shows (CONTAINERD2_RUN: pod lifecycle and restart policies, start
# errors, init/sidecar containers with exec, graceful termination and hooks, probes, adoption of running
# pods after a kubelet restart, static pods, log rotation, image GC and eviction, and `nodekit up` with
# its demo; the whole ./kubelet/ package takes over 6 min, the labs of ./test/e2e/up/ as long again).
CONTAINERD2_PKGS ?= ./runtime/... ./crictl/... ./test/framework/containerd/... ./test/e2e/runtime/... ./test/e2e/crictl/... \
	./test/e2e/cni/... ./test/e2e/probes/...
CONTAINERD2_RUN ?= ^(TestRestartPolicies|TestStartErrors|TestInitAndSidecarContainers|TestGracefulTermination|TestHostPortAndHTTPHooks|TestProbeHook|TestRestartAdoptsRunningPods|TestStaticPods|TestLongRunningNode|TestUpDemoAndPurge)$$
test-containerd2: build containerd2
	PATH=$(CONTAINERD2_DIR)/bin:$$PATH NODEKIT_CONTAINERD=$(CONTAINERD2_DIR)/bin/containerd \
		$(GO) test $(GOTEST_FLAGS) $(CONTAINERD2_PKGS)
	PATH=$(CONTAINERD2_DIR)/bin:$$PATH NODEKIT_CONTAINERD=$(CONTAINERD2_DIR)/bin/containerd \
		$(GO) test $(GOTEST_FLAGS) -run '$(CONTAINERD2_RUN)' ./kubelet/ ./test/e2e/up/

# Builds containerd $(CONTAINERD2_VERSION) (cgo: gcc from install-deps; modules from the proxy; ~3.5 min on
# 2 cores) unless its three binaries are already in $(CONTAINERD2_DIR)/bin.
containerd2: deps
	@if [ -x $(CONTAINERD2_DIR)/bin/containerd ] && [ -x $(CONTAINERD2_DIR)/bin/containerd-shim-runc-v2 ] && [ -x $(CONTAINERD2_DIR)/bin/ctr ]; then \
		echo "containerd $(CONTAINERD2_VERSION) is in $(CONTAINERD2_DIR)"; else \
	mkdir -p $(CONTAINERD2_DIR)/bin && \
	GOBIN=$(abspath $(CONTAINERD2_DIR))/bin CGO_ENABLED=1 nice -n 10 $(GO) install -tags "no_btrfs no_devmapper no_zfs" \
		github.com/containerd/containerd/v2/cmd/containerd@$(CONTAINERD2_VERSION) \
		github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$(CONTAINERD2_VERSION) \
		github.com/containerd/containerd/v2/cmd/ctr@$(CONTAINERD2_VERSION); fi

# The whole fault-injection suite (test/e2e/faults, docs/reliability.md): every fault and 1000 pod
# create/delete cycles on one `nodekit up` cluster. FAULT_CYCLES sets the number of cycles.
FAULT_CYCLES ?= 1000
faults: deps build
	NODEKIT_BIN=$(abspath bin) NODEKIT_FAULTS=all NODEKIT_FAULT_CYCLES=$(FAULT_CYCLES) NODEKIT_FAULT_CYCLE_TIME=90m \
		$(GO) test -count=1 -v -timeout 150m ./test/e2e/faults/

# Regenerates crictl/testdata/upstream-flags.txt (every command and flag of upstream crictl, which
# crictl's TestUpstreamParity checks nodekit's crictl against) from the help of upstream crictl.
crictl-upstream-flags:
	@[ -x $(CRICTL_UPSTREAM_DIR)/bin/crictl ] || GOBIN=$(abspath $(CRICTL_UPSTREAM_DIR))/bin nice -n 10 \
		$(GO) install sigs.k8s.io/cri-tools/cmd/crictl@$(CRICTL_UPSTREAM_VERSION)
	CRICTL_VERSION=$(CRICTL_UPSTREAM_VERSION) hack/crictl-upstream-flags.sh $(CRICTL_UPSTREAM_DIR)/bin/crictl > crictl/testdata/upstream-flags.txt

# Upstream kube-proxy v1.37.2, built from the module proxy in a throwaway module outside the repo, for the
# side-by-side proxy benchmark (bench/proxy TestCompareUpstream, docs/proxy.md).
kube-proxy-upstream:
	hack/kube-proxy-upstream.sh

# One command to a running single-node cluster with the demo: the server and the agent (kubelet and proxy) under `nodekit up`
# (Ctrl-C stops it, a rerun resumes; `bin/nodekit down --purge` removes everything). UP_FLAGS adds flags.
up: deps images
	$(BIN) up --images-dir $(IMAGES_DIR) $(UP_FLAGS)

bench: deps build
	bench/run.sh

# The upstream conformance suite (e2e.test of k8s.io/kubernetes v1.37.2) against a two-node lab; FOCUS,
# SKIP, WALL_MINUTES, PROCS and more are read from the environment (docs/conformance.md).
conformance: deps
	hack/conformance/run.sh

# The CI subset of the conformance suite: the specs of hack/conformance/ci-specs.txt (ones that pass
# and are quick), each of which must pass.
test-conformance: deps
	SPECS_FILE=hack/conformance/ci-specs.txt STRICT=1 CHUNK=100 WALL_MINUTES=15 OUT=$(CURDIR)/_output/conformance-ci hack/conformance/run.sh

# The VM test leg (docs/vm-test.md): a server and two agent VMs under qemu (software emulation), nodekit
# installed in them by hack/provision.sh (install.sh and the systemd units, as Vagrant does), then its
# checks, the kubelet's cgroup v2 e2e tests (built here with `go test -c`) among them, run in a guest.
# The Debian 12 guest image is built into /var/cache/nodekit/vm first when absent (~7 min);
# under software emulation the guests alone take 6-16 min to boot here, so it is not part of `make test`.
vm-test: deps images
	@command -v qemu-system-x86_64 >/dev/null && command -v qemu-img >/dev/null && command -v debootstrap >/dev/null || \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-system-x86 qemu-utils debootstrap >/dev/null
	$(GO) test -c -o _output/vm/kubelet.test ./kubelet
	hack/vm/run.sh

clean:
	rm -rf bin _output
