# conch: see README.md. `make demo` runs the main job, `make test` the tests.
SHELL := /bin/bash
GO ?= go
VERSION ?= $(shell scripts/version.sh)
# BUILD_ID: the source's identity, the same in conch and conch-guardian, which compare it
# before conch trusts the guardian (D7a): a hash of every Go source and the module files, and
# the Go version. (Without it a binary falls back on the VCS revision of a clean tree.)
BUILD_ID ?= $(shell { cat $$(git ls-files -co --exclude-standard '*.go' go.mod go.sum); $(GO) version; } 2>/dev/null | sha256sum | cut -c1-16)
LDFLAGS := -X main.version=$(VERSION) -X github.com/conch-project/conch/unitrun.buildID=$(BUILD_ID)

.PHONY: all build etcd demo test test-deps lint clean man package

all: build

# Static binaries (CGO_ENABLED=0), as scripts/package.sh ships them: no dynamic loader at each
# start, which conch and the guardian pay on every run (bench/analysis.md).
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/conch ./cmd/conch
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/conch-guardian ./cmd/conch-guardian

# A real etcd and etcdctl built from the etcd Go modules (tool dependencies in go.mod), static
# as etcd's own release builds are (CGO_ENABLED=0), so that `make bench` compares conch with the
# etcdctl operators download.
etcd: bin/etcd bin/etcdctl
bin/etcd: go.mod Makefile
	CGO_ENABLED=0 $(GO) build -o bin/etcd go.etcd.io/etcd/server/v3
bin/etcdctl: go.mod Makefile
	CGO_ENABLED=0 $(GO) build -o bin/etcdctl go.etcd.io/etcd/etcdctl/v3

demo: build etcd
	scripts/demo.sh

# Every test, with the race detector; prints "N passed, N failed, N skipped".
# With CI=true a skipped test fails the run.
test: test-deps
	set -o pipefail; $(GO) test -race -count=1 -timeout 45m -json ./... | $(GO) run ./internal/testsummary

# conch(1) in roff, generated from the binary's own flag parser (its hidden --man-page), with
# the last commit's date so it does not change from one build to the next.
man: build
	mkdir -p dist
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct) bin/conch --man-page > dist/conch.1

# dist/conch_<version>_amd64.deb and dist/conch-<version>.x86_64.rpm (nfpm.yaml), with nfpm
# from go.mod's tool dependencies (`go tool nfpm`): nothing to install but Go.
package:
	VERSION=$(VERSION) BUILD_ID=$(BUILD_ID) scripts/package.sh dist

# The distributions' checkers on `make package`'s output: rpmlint (no error), lintian
# --pedantic (no error or warning), shellcheck -S warning over the tree's scripts, piuparts'
# install/remove/purge in a Debian 12 chroot (scripts/check-packages.sh; ~20 s in all).
.PHONY: check-packages
check-packages: package
	scripts/check-packages.sh dist

# Benchmarks: conch against etcdctl lock on a throw-away etcd with /metrics; prints
# one table and writes docs/benchmarks.md. BENCHFLAGS=-quick reruns with fewer repetitions;
# `bin/bench -h` lists the other knobs (-only, -alt for an A/B of a patched conch, -perf4).
# Scenario 6 (bin/bench-scope, a test binary of bench/scope) boots a systemd node as the
# integration tests do: it needs root, systemd-nspawn and the nodes' root filesystem
# (`make test-deps`, built on first use).
.PHONY: bench
bench: build etcd
	$(GO) build -o bin/bench ./bench
	CGO_ENABLED=0 $(GO) build -o bin/bench-stamp ./bench/stamp
	CGO_ENABLED=0 $(GO) test -c -o bin/bench-scope ./bench/scope
	bin/bench $(BENCHFLAGS)

# Three systemd nodes on this machine with a 3-member etcd and the fresh .deb installed, to
# try conch by hand (docs/cluster.md; scripts/cluster.sh says how). NODE=n1..n3.
NODE ?= n1
.PHONY: cluster cluster-down cluster-shell
cluster: package etcd test-deps
	scripts/cluster.sh up
cluster-down:
	scripts/cluster.sh down
cluster-shell:
	scripts/cluster.sh shell $(NODE)

# Debian packages and the test nodes' root filesystem (quick when present).
test-deps:
	scripts/test-deps.sh

# Every fuzz target (func Fuzz*) of FUZZPKGS, each for FUZZTIME, after its seed corpus in
# testdata/fuzz; scripts/fuzz.sh says how it tells a finding from Go 1.26's
# fuzz-coordinator deadline race. A crash writes its input under testdata/fuzz: commit it, it
# is then a regular test case.
FUZZTIME ?= 10s
FUZZPKGS ?= ./cmd/conch ./internal/etcdconn ./sema/schema ./internal/who ./unitrun ./internal/systemd
.PHONY: fuzz
fuzz:
	GO=$(GO) scripts/fuzz.sh $(FUZZTIME) $(FUZZPKGS)

lint:
	test -z "$$(gofmt -l $$(git ls-files '*.go'))"
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	$(GO) test -count=1 -run '^TestLayering$$' ./internal/ci # sema, unitrun and cmd/conch import what the layout allows

clean:
	rm -rf bin dist

# The randomized fault suite (tests/vm TestNemesis) for one seed, as long as asked: 3 systemd
# nodes, 3 etcd members, random faults every few seconds. `make test` runs it on fixed seeds
# for a short time; this is for longer runs by hand. SEED=random draws one (printed);
# MINUTES is per seed; STRICT=1 makes the outcomes of known bugs violations; FAULTS=kind,...
# draws from those kinds only (tests/vm/README.md lists them). Root only.
SEED ?= random
MINUTES ?= 5
STRICT ?=
FAULTS ?=
.PHONY: nemesis
nemesis: test-deps
	CONCH_NEMESIS_SEED=$(SEED) CONCH_NEMESIS_MINUTES=$(MINUTES) CONCH_NEMESIS_STRICT=$(STRICT) CONCH_NEMESIS_FAULTS=$(FAULTS) \
		$(GO) test -race -count=1 -v -timeout 0 -run 'TestNemesis$$' ./tests/vm
