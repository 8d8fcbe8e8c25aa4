# mcs-syncer. `make help` lists the targets.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# Where `make tools` builds the real Kubernetes components, the testbed's
# state folder, and our own binaries. Set MCS_TOOLS_DIR to use binaries you
# already have instead of building them (see hack/tools/build.sh).
CACHE       ?= $(CURDIR)/.cache
TOOLS_BIN   := $(if $(MCS_TOOLS_DIR),$(MCS_TOOLS_DIR),$(CACHE)/bin)
STATE_DIR   ?= $(CACHE)/testbed
MODE        ?= central
IN_CLUSTER  ?=
BIN         := $(CURDIR)/bin
# The EndpointSlice reconciler library, a Go module of its own.
LIBRARY     := pkg/reconciler
STATICCHECK := $(CACHE)/lint/staticcheck
GOCYCLO     := $(CACHE)/lint/gocyclo
# The most cyclomatic complexity a product function may have (the
# examples of pkg/reconciler and tests aside).
MAX_COMPLEXITY := 15
CONTROLLER_GEN := $(CACHE)/controller-gen/controller-gen
# What controller-gen generates from the API types (api/v1alpha1).
GENERATE_ARGS = object paths=./api/... crd:crdVersions=v1 paths=./api/...

# The e2e package brings a clusterset up once and runs every scenario on it;
# go test's default 10-minute timeout is too short for that on 2 cores.
E2E_TIMEOUT ?= 45m
GO_TEST     ?= go test -count=1

.PHONY: help
help: ## List the targets.
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

.PHONY: tools
tools: ## Build kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kubelet, kube-proxy, kubeadm, etcd, kwok, kwokctl, CoreDNS and the real nodes' images into .cache/bin (idempotent).
	MCS_TOOLS_CACHE=$(CACHE)/bin bash hack/tools/build.sh

# The version mcs-syncer --version prints and the image's tag: the newest
# tag of the commit (git describe), else the short commit.
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION    ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
IMAGE       ?= mcs-syncer:$(VERSION)
IMAGE_ARCHIVE ?= $(BIN)/mcs-syncer.tar
VERSION_PKG := github.com/mcs-syncer/mcs-syncer/internal/version
LDFLAGS     := -s -w -buildid= -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).Revision=$(REVISION)

.PHONY: build
build: ## Build every package; mcs-syncer (as the image has it, version stamped), the kubectl plugin kubectl-mcs (and kubectl_complete-mcs, its completion for kubectl) and the testbed CLI into bin/.
	CGO_ENABLED=0 go build -trimpath ./...
	CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "$(LDFLAGS)" -o $(BIN)/mcs-syncer ./cmd/mcs-syncer
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/kubectl-mcs ./cmd/kubectl-mcs
	cp cmd/kubectl-mcs/kubectl_complete-mcs $(BIN)/
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/testbed ./test/testbed/cmd/testbed

.PHONY: image
image: ## Build the image $(IMAGE) into $(IMAGE_ARCHIVE), an OCI archive, without a container engine (load it with ctr images import, docker load or kind load image-archive).
	@mkdir -p $(BIN)
	go run ./hack/image -out $(IMAGE_ARCHIVE) -name $(IMAGE) -version $(VERSION) -revision $(REVISION)

.PHONY: unit
unit: ## The tests that need no testbed, with the race detector: no `make tools` before them (-short skips the testbed's tests).
	cd $(LIBRARY) && $(GO_TEST) -race ./...
	$(GO_TEST) -race -short $$(go list ./... | grep -v /test/e2e)
	cd bench && $(GO_TEST) ./e2e/
	cd hack/walk && $(GO_TEST) ./...

# The packages whose tests start a testbed: test/testbed itself and those
# whose tests import it (the end-to-end packages have targets of their own).
INTEGRATION_PKGS = $(shell go list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... | \
	awk '$$1 ~ /\/test\/e2e/ { next } $$1 ~ /\/test\/testbed$$/ || / github.com\/mcs-syncer\/mcs-syncer\/test\/testbed( |$$)/ { print $$1 }')

# -timeout 30m: go test's default (10 min for a package) was no bound on a
# slow day: in CI (2026-11-30) these packages ran five times slower than in
# a rehearsal, test/testbed alone 5 minutes.
.PHONY: test
test: unit tools ## make unit, then the integration tests on real API servers and real nodes (the race detector on), the alerting rules' unit tests (promtool), and make chart-test.
	MCS_TOOLS_DIR=$(TOOLS_BIN) $(GO_TEST) -race -timeout 30m $(INTEGRATION_PKGS)
	$(GO_TEST) -run TestAlertRules ./cmd/mcs-syncer/
	$(MAKE) chart-test

# A cold build of mcs-syncer and its dependencies takes minutes on 2 cores,
# more beside other work: go test's default 10 minutes is no bound for it.
IMAGE_REPRO_TIMEOUT ?= 40m
.PHONY: image-repro
image-repro: ## The image is reproducible: built twice from this tree (the second time every package rebuilt, -a), the digests are equal (a cold build: timeout IMAGE_REPRO_TIMEOUT, 40m).
	$(GO_TEST) -tags reproducibility -v -timeout $(IMAGE_REPRO_TIMEOUT) ./hack/image/

.PHONY: e2e
e2e: tools ## End-to-end tests on local 3-cluster testbeds (hack/e2e.sh: two processes at once, a testbed each; E2E_SHARDS=1: one; E2E_GENERIC_HUB=1: make e2e-generic-hub's tests too, in the second's time).
	MCS_TOOLS_DIR=$(TOOLS_BIN) GO_TEST="$(GO_TEST)" E2E_TIMEOUT=$(E2E_TIMEOUT) CACHE=$(CACHE) E2E_GENERIC_HUB=$(E2E_GENERIC_HUB) HUB_TESTS='$(HUB_TESTS)' bash hack/e2e.sh

E2E_GENERIC_HUB ?=
HUB_TESTS = TestHubMode|TestHubRefusesPublishingAsAnother|TestDirectToHubSwitch|TestHubOutageWithdrawsNothing|TestStoppedMemberIsWithdrawnThroughTheHub|TestWipedHubRepublishes|TestRevokedThenRotatedHubToken
.PHONY: e2e-generic-hub
e2e-generic-hub: tools ## The end-to-end tests of hub mode with the hub served by the KEP-4080 generic control plane.
	MCS_E2E_HUB=generic MCS_TOOLS_DIR=$(TOOLS_BIN) $(GO_TEST) -p 1 -v -timeout $(E2E_TIMEOUT) -run '$(HUB_TESTS)' ./test/e2e/

DIFFKCM_STEPS ?= 2000
.PHONY: diff-kcm
diff-kcm: tools ## The long differential test: the library's EndpointSlice and mirroring examples against kube-controller-manager for DIFFKCM_STEPS (2,000) seeded random steps (DIFFKCM_SEED=n replays one).
	MCS_TOOLS_DIR=$(TOOLS_BIN) DIFFKCM_STEPS=$(DIFFKCM_STEPS) $(GO_TEST) -v -timeout 4h -run TestEndpointSliceControllerMatchesKCM ./test/e2e/diffkcm/

.PHONY: bench
bench: ## Go benchmarks of every package, then pkg/reconciler against k8s.io/endpointslice (bench/).
	cd $(LIBRARY) && go test -run '^$$' -bench . -benchmem ./...
	go test -run '^$$' -bench . -benchmem $$(go list ./... | grep -v /test/)
	cd bench && go run .

.PHONY: bench-scale
bench-scale: tools ## Scale benchmark on the testbed: central, direct and hub mode at N = 3, 6, 10 members, then Services of 10, 1,000 and 10,000 endpoints and an import of 50,000 at N = 3, then hub loads of 255 members (on kube-apiserver, then on the KEP-4080 generic control plane) and 1,000 with one importer (~1 h on 2 cores; BENCH_SCALE_ARGS=-quick for a smoke run).
	cd bench && MCS_TOOLS_DIR=$(TOOLS_BIN) go run ./e2e growth $(BENCH_SCALE_ARGS)

.PHONY: bench-e2e
bench-e2e: tools ## End-to-end benchmark on the testbed: mcs-syncer against floors measured in the same run (~15 min; BENCH_E2E_ARGS=-quick for a smoke run).
	cd bench && MCS_TOOLS_DIR=$(TOOLS_BIN) go run ./e2e $(BENCH_E2E_ARGS)

.PHONY: demo
demo: tools build ## Run it: 3 clusters, mcs-syncer, a sample app exported from two of them, and what the third imports (MODE=hub: through a hub; IN_CLUSTER=1: mcs-syncer as Pods from its image, installed as docs/user-guide.md says, MODE=central, per-cluster or hub).
	STATE_DIR=$(STATE_DIR) MCS_TOOLS_DIR=$(TOOLS_BIN) MODE=$(MODE) IN_CLUSTER=$(IN_CLUSTER) bash hack/demo.sh

.PHONY: demo-down
demo-down: ## Stop the demo (mcs-syncer and the clusters) and remove its state.
	go run ./test/testbed/cmd/testbed down --state $(STATE_DIR) --bin $(TOOLS_BIN)

.PHONY: kind-images
kind-images: tools ## Build the kind node image mcs-kind-node:v1.36.3 (Debian's packages, the components of make tools, the control plane's images preloaded) into the Docker engine of hack/kind (cached in .cache/kind).
	MCS_TOOLS_DIR=$(TOOLS_BIN) bash hack/kind/clusterset.sh images

.PHONY: kind-up
kind-up: tools ## A 3-cluster clusterset on kind with mcs-syncer installed from its image as docs/user-guide.md says (hack/kind/README.md).
	MCS_TOOLS_DIR=$(TOOLS_BIN) bash hack/kind/clusterset.sh up

.PHONY: kind-down
kind-down: ## Delete the kind clusterset and the Docker engine hack/kind started.
	MCS_TOOLS_DIR=$(TOOLS_BIN) bash hack/kind/clusterset.sh down

.PHONY: krew
krew: ## kubectl-mcs's krew manifest and its archives (linux, darwin: amd64, arm64; windows: amd64) into $(BIN)/krew, for VERSION (hack/krew/release.sh).
	bash hack/krew/release.sh $(VERSION) $(BIN)/krew

.PHONY: krew-test
krew-test: ## krew itself (built from hack/tools/krew) installs kubectl-mcs from the manifest and archive that `make krew` writes.
	CACHE=$(CACHE) bash hack/krew/test.sh

KIND_E2E_MODES ?= per-cluster hub
.PHONY: kind-e2e
kind-e2e: tools ## The kind clusterset up, the demo's traffic check, and down, in each of KIND_E2E_MODES (per-cluster: installed with kustomize; hub: with Helm); fails unless the host's network is left as it was.
	MCS_TOOLS_DIR=$(TOOLS_BIN) KIND_E2E_MODES="$(KIND_E2E_MODES)" bash hack/kind/clusterset.sh e2e

.PHONY: lint
lint: $(STATICCHECK) $(GOCYCLO) $(CONTROLLER_GEN) ## gofmt, go vet, staticcheck, no product function over MAX_COMPLEXITY (gocyclo), and that the generated files are current.
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	go vet ./...
	go vet -tags reproducibility ./hack/image/
	$(STATICCHECK) ./...
	$(STATICCHECK) -tags reproducibility ./hack/image/
	cd $(LIBRARY) && go vet ./... && $(STATICCHECK) ./...
	cd bench && go vet ./... && $(STATICCHECK) ./...
	cd hack/walk && go vet ./... && $(STATICCHECK) ./...
	@over=$$($(GOCYCLO) -over $(MAX_COMPLEXITY) -ignore '_test\.go|/examples/' cmd internal pkg api || true); \
	if [ -n "$$over" ]; then echo "functions over cyclomatic complexity $(MAX_COMPLEXITY) (split them):"; echo "$$over"; exit 1; fi
	@out=$$(mktemp -d); trap 'rm -rf "$$out"' EXIT; \
	$(CONTROLLER_GEN) $(GENERATE_ARGS) output:object:dir=$$out output:crd:dir=$$out && \
	for f in api/v1alpha1/zz_generated.deepcopy.go config/crd/mcs-syncer.io_publishedexports.yaml; do \
		cmp -s "$$out/$$(basename $$f)" $$f || { echo "$$f is not what api/v1alpha1 generates: run make generate"; diff "$$out/$$(basename $$f)" $$f | head -20; exit 1; }; \
	done
	@for f in $(CHART_COPIES); do \
		cmp -s config/$$f $(CHART)/files/$$f || { echo "$(CHART)/files/$$f is not config/$$f: run make generate"; exit 1; }; \
	done
	@if command -v shellcheck >/dev/null; then shellcheck hack/*.sh hack/lib/*.sh hack/lib/adopting-helm/helm cmd/kubectl-mcs/kubectl_complete-mcs hack/krew/*.sh hack/tools/*.sh hack/tools/kubernetes/*.sh hack/kind/*.sh hack/kind/runc-without-sys-resource hack/kind/node/usr/local/bin/entrypoint test/testbed/teardown.sh .ci/run; \
	else echo "lint: shellcheck not installed, shell scripts not checked (apt-get install shellcheck)"; fi

$(STATICCHECK): hack/tools/lint/go.mod hack/tools/lint/go.sum
	cd hack/tools/lint && go build -o $@ honnef.co/go/tools/cmd/staticcheck

$(GOCYCLO): hack/tools/lint/go.mod hack/tools/lint/go.sum
	cd hack/tools/lint && go build -o $@ github.com/fzipp/gocyclo/cmd/gocyclo

.PHONY: generate
generate: $(CONTROLLER_GEN) ## DeepCopy of the API types and PublishedExport's CRD from api/v1alpha1 (controller-gen), and the chart's copies of config/ (make lint checks they are current).
	$(CONTROLLER_GEN) $(GENERATE_ARGS) output:crd:dir=config/crd
	@for f in $(CHART_COPIES); do cp config/$$f $(CHART)/files/$$f; done

# The chart's files that are config/'s (config/ is their one source; the
# chart's templates render them as kustomize does): the CRDs, the roles, the
# hub's objects, the alerting rules and the dashboard.
CHART        := charts/mcs-syncer
CHART_COPIES := $(patsubst config/%,%,$(filter-out %/kustomization.yaml,$(wildcard config/crd/*.yaml))) \
	rbac/identities.yaml rbac/role.yaml rbac/leader_election_role.yaml rbac/bindings.yaml \
	hub/role.yaml hub/admission.yaml hub/member-binding.yaml \
	monitoring/prometheusrule.yaml monitoring/dashboard.json
CHART_MODES  := central per-cluster member hub
HELM         := $(TOOLS_BIN)/helm
# A chart's version is SemVer: VERSION without its v (v0.1.0 -> 0.1.0), or
# for a commit with no tag a pre-release of 0.0.0 (90fc38a -> 0.0.0-g90fc38a).
CHART_VERSION = $(shell echo '$(VERSION)' | sed -E 's/^v([0-9]+\.[0-9]+\.[0-9]+)/\1/; /^[0-9]+\.[0-9]+\.[0-9]+/!s/^/0.0.0-g/')

.PHONY: chart
chart: tools ## The Helm chart charts/mcs-syncer packaged into $(BIN)/ with VERSION as its version and appVersion (helm package).
	@mkdir -p $(BIN)
	$(HELM) package $(CHART) --version $(CHART_VERSION) --app-version $(VERSION) --destination $(BIN)

.PHONY: chart-test
chart-test: tools ## helm lint --strict and helm template of the chart in every mode (its ci/ values), then the chart against kustomize's rendering of config/ (config's TestChart*).
	@for m in $(CHART_MODES); do \
		echo "helm lint, helm template: mode $$m"; \
		$(HELM) lint --strict --quiet $(CHART) -f $(CHART)/ci/$$m-values.yaml; \
		$(HELM) template mcs-syncer $(CHART) -n mcs-system -f $(CHART)/ci/$$m-values.yaml >/dev/null; \
	done
	MCS_TOOLS_DIR=$(TOOLS_BIN) $(GO_TEST) -run 'TestChart' ./config/

$(CONTROLLER_GEN): hack/tools/controller-gen/go.mod hack/tools/controller-gen/go.sum
	cd hack/tools/controller-gen && go build -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

.PHONY: clean
clean: ## Stop the demo's testbed and remove every built or cached file.
	-[ -d $(STATE_DIR) ] && go run ./test/testbed/cmd/testbed down --state $(STATE_DIR) --bin $(TOOLS_BIN)
	rm -rf $(CACHE) $(BIN)

# The walk of the calls from each side's entry point (hack/walk): stops,
# files and returns to a file already left, at every depth and at depth 3
# (docs/architecture.md, "One way through each side").
.PHONY: walk
walk: ## Print the call walk of a change on the import and the publish side.
	@cd hack/walk && for depth in -1 3; do \
		go run . -q -depth $$depth -dir ../.. -entry '(*internal/imports.Controller).reconcile' -scope internal/imports; \
		go run . -q -depth $$depth -dir ../.. -entry '(*internal/publish.Publisher).sync' -scope internal/publish; \
	done
