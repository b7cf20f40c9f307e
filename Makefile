# The two commands a newcomer needs: `make demo` and `make test`. Everything else is a helper.
SHELL := /bin/bash
JOBS ?= 2
REPEAT ?= 10
CLUSTER := deploy/local/cluster.sh

.PHONY: all deps configure build test test-unit test-integration test-node test-asan test-tsan \
        sanitizers test-repeat fuzz bench bench-micro bench-compare bench-busy bench-scale bench-apf bench-quick demo demo-breaker demo-down \
        conformance conformance-kcm image release install-plugin format format-check lint lint-changed clean

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake --preset default >/dev/null

build: configure
	@cmake --build --preset default -j $(JOBS)

# Every test, in timed stages (scripts/test.sh; the table of stages is printed at the end and
# kept in build/test-stages.txt): the unit, integration, e2e (in TEC_E2E_LANES control planes
# side by side) and e2e-node tests of the default preset, with the deploy/Dockerfile image build,
# clang-tidy on what changed since its last clean run and the ASan and TSan builds beside them at
# the lowest CPU priority; then the unit tests under ASan+UBSan and TSan. The unit tests include
# fuzz.<target>: every fuzz target run once over each input of its committed corpus
# (fuzz/corpus/), so a fixed crash stays fixed.
test:
	@JOBS=$(JOBS) scripts/test.sh

test-unit: build
	@cd build && ctest --output-on-failure -j $(JOBS) -L unit

test-integration: build
	@cd build && ctest --output-on-failure -L integration

# The tests on a real node (kubelet + containerd, the controller in-cluster): ctest -L e2e-node.
test-node: build
	@cd build && ctest --output-on-failure -L e2e-node

# Upstream's NoExecuteTaintManager e2e (Kubernetes 1.20, 6 tests) on a real node of its own:
# against this controller (make test runs it too, e2e-node.upstream_taints_test), and against
# kube-controller-manager's taint manager with the controller scaled to 0, for comparison.
# Root; about 7 minutes each (a minute of it the cluster), plus a one-time build of upstream's
# e2e.test. docs/upstream-e2e.md.
conformance: configure
	@cmake --build --preset default -j $(JOBS) --target taint-eviction-controller
	@scripts/conformance.sh build/bin/taint-eviction-controller

conformance-kcm: configure
	@cmake --build --preset default -j $(JOBS) --target taint-eviction-controller
	@scripts/conformance.sh --kcm build/bin/taint-eviction-controller

sanitizers: test-asan test-tsan

test-asan: deps
	@cmake --preset asan >/dev/null
	@cmake --build --preset asan -j $(JOBS)
	@ctest --preset asan -j $(JOBS)

test-tsan: deps
	@cmake --preset tsan >/dev/null
	@cmake --build --preset tsan -j $(JOBS)
	@ctest --preset tsan -j $(JOBS)

# The unit tests under ASan+UBSan and TSan, REPEAT times each (default 10), while a throw-away
# build keeps both cores busy (scripts/test-repeat.sh): a test that depends on timing fails
# here. Prints "asan: k/N passed, tsan: k/N passed"; logs of failed runs in build/test-repeat/.
test-repeat: deps
	@scripts/test-repeat.sh $(REPEAT)

# The fuzz targets (fuzz/): built with clang, libFuzzer, ASan and UBSan in build-fuzz, then
# each run for FUZZ_SECONDS with its committed corpus. New inputs go to build-fuzz/corpus/,
# crashes to build-fuzz/crashes/; fails when any target crashed. FUZZ_TARGETS picks targets.
FUZZ_SECONDS ?= 60
fuzz:
	@scripts/install-deps.sh --fuzz
	@cmake --preset fuzz >/dev/null
	@cmake --build --preset fuzz -j $(JOBS)
	@FUZZ_SECONDS=$(FUZZ_SECONDS) fuzz/run.sh

# All benchmarks: the microbenchmarks, then kube-controller-manager and ours side by side on a
# local API server (bench/compare.sh; about 30 minutes; results in build/bench/). Run it on an
# idle machine.
bench: bench-micro bench-compare

# The microbenchmarks (Google Benchmark). k8sclient_sync_bench needs an API server: see README.md.
bench-micro: build
	@for b in build/bin/*_bench; do \
	  case "$$b" in *k8sclient_sync_bench) continue ;; esac; \
	  echo "== $$b"; "$$b" || exit 1; done

bench-compare: build
	@bench/compare.sh

# The same side by side with two busy loops beside everything (contention mode): run
# it and bench-compare one after the other and report both (BENCHMARKS.md).
bench-busy: build
	@bench/compare.sh --busy 2 $(ARGS)

# Scenario 7 alone (issue 16): 5,000 nodes and 150,000 pods, a zone outage, a pod churn.
# Takes a long while; eviction_compare's --scale-* flags after ARGS= make it smaller.
bench-scale: build
	@bench/compare.sh --scenarios scale $(ARGS)

# Scenario 8 alone (issue 31): API Priority and Fairness. Each controller under its in-cluster
# identity (ours: its ServiceAccount token, with and without deploy/flowschema.yaml; KCM:
# system:kube-controller-manager with --use-service-account-credentials) while 80 LIST loops
# from other service accounts flood workload-low on an API server with scarce seats. ~15 min.
bench-apf: build
	@TEC_APISERVER_ARGS="--max-requests-inflight=40 --max-mutating-requests-inflight=20" \
	  bench/compare.sh --scenarios apf $(ARGS)

# The side-by-side comparison at a small scale (a few minutes): checks that it all works.
bench-quick: build
	@bench/compare.sh --quick

# The project's image from deploy/Dockerfile, unchanged (buildah; no registry needed):
# localhost/taint-eviction-controller:latest in the store under
# ~/.cache/taint-eviction-controller/images. deploy/local/images.sh builds the other images.
image: deps
	@deploy/local/images.sh project

# A versioned release of the commit checked out (scripts/release.sh; README "Release"): dist/<version>/
# with the image archive tagged <version>, the manifests rendered with that tag, the Helm chart
# (when there is one), the image's SBOM and SHA256SUMS. <version>: `git describe --tags
# --match 'v*' --dirty`. Builds deploy/Dockerfile (root, buildah), not the tests.
release: deps
	@scripts/release.sh

# The kubectl plugin on a workstation: $(PREFIX)/bin/kubectl-taint_eviction (`kubectl
# taint-eviction ...` once that directory is on PATH). Builds it alone, not the tests.
PREFIX ?= /usr/local
install-plugin: configure
	@cmake --build --preset default -j $(JOBS) --target kubectl-taint_eviction
	@cmake --install build --component kubectl-plugin --prefix "$(PREFIX)"

# The demo: a local cluster you can poke at with kubectl; with a real node when the machine
# can run one (scripts/demo.sh says which). Builds the daemon only (no tests, no benchmarks):
# the kube binaries build beside it.
# deps, configure, prepare (what the demo runs), up: each stage timed, the table at the end.
demo:
	@scripts/demo.sh cold $(JOBS)

# The eviction policy holding a mass eviction (a mistyped `kubectl taint --all`): the rate limit
# and the storm breaker, on a control plane of its own.
demo-breaker: configure
	@cmake --build --preset default -j $(JOBS) --target taint-eviction-controller
	@scripts/demo.sh breaker

demo-down:
	@scripts/demo.sh down

# clang-tidy over all the production code (not tests/, bench/, fuzz/: see scripts/lint.sh) with
# every check .clang-tidy enables as an error. Uses build/compile_commands.json (written by the
# configure step). It costs about 24 CPU-minutes (about 12 minutes on 2 idle cores), and
# rewrites scripts/lint-clean.txt with the keys of the units it found clean: commit it. `make
# test` runs it with --changed: only the translation units whose text (the file, every header
# it includes, its compile command, .clang-tidy, clang-tidy's version) has no clean run on
# record, in scripts/lint-clean.txt or in ~/.cache/taint-eviction-controller/lint.
lint: configure
	@JOBS=$(JOBS) scripts/lint.sh build

# The same record at the cost of the changed units only: the units with no clean run on record
# are checked, and scripts/lint-clean.txt is rewritten when every unit is clean (commit it).
# Needs a built build/ (the keys come from its dependency records).
lint-changed: build
	@JOBS=$(JOBS) scripts/lint.sh --changed --write-record build

format:
	@git ls-files '*.cpp' '*.hpp' | xargs -r clang-format -i

format-check: deps
	@git ls-files '*.cpp' '*.hpp' | xargs -r clang-format --dry-run -Werror

clean:
	@rm -rf build build-asan build-tsan build-fuzz
