# grid-wrapper — make targets. `make demo` shows it working; `make test` runs every test,
# `make lint` the format check and clippy.
CARGO ?= cargo
SHELL := /bin/bash

.PHONY: all build test lint demo run clean fuzz bench cross cross-test image image-test loadbench snapbench relaybench relayflood fleetbench e2e helm-check

all: build

build:
	$(CARGO) build --release --bins

## test: the builds and every test: unit tests of both packages, the integration tests (tests/it,
## one binary) run TEST_THREADS wide (most of them wait on child processes; the ones that load
## the machine take a lock and run one at a time; RUST_TEST_THREADS, not `--test-threads`, which
## the criterion bench's harness refuses), then the doc tests (`--all-targets` skips
## them; the read-only view's `compile_fail` check is one). The integration tests start
## target/debug/grid-wrapper-sim, the binary of the sim/ package (no CARGO_BIN_EXE_ path for
## another package's binary): `cargo build --bins` builds it first. The CRI client's tests talk
## to a real grpc-go CRI server built from e2e/'s pinned Go module (scripts/cri-fake-build.sh,
## reused while unchanged); without Go they say they skip.
TEST_THREADS ?= 16
test:
	$(CARGO) build --bins
	if command -v go >/dev/null; then bash scripts/cri-fake-build.sh >/dev/null; else echo "go not on PATH: the CRI client's tests against a real server will skip"; fi
	RUST_TEST_THREADS=$(TEST_THREADS) $(CARGO) test --all-targets
	$(CARGO) test --doc

## lint: format check, then clippy (warnings are errors) on every target and on the library
## without default features.
lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets -- -D warnings
	$(CARGO) clippy --no-default-features --lib -- -D warnings

## demo: a simulated 3-zone cluster, grid-wrapper in front of it, pruning and a live relabel.
demo:
	$(CARGO) build --release --bins
	bash scripts/demo.sh target/release

## run: grid-wrapper against the simulated apiserver, in the foreground (Ctrl-C stops both).
run:
	$(CARGO) build --release --bins
	bash scripts/run.sh target/release

clean:
	$(CARGO) clean

## fuzz: every cargo-fuzz target for FUZZ_SECS seconds (skips cleanly without nightly).
FUZZ_SECS ?= 30
fuzz:
	FUZZ_SECS=$(FUZZ_SECS) bash scripts/fuzz.sh

## bench: criterion benches of the hot paths (figures in BENCHMARKS.md).
bench:
	$(CARGO) bench --bench core

## cross: static aarch64 / armv7 / x86_64 binaries (size profile) under out/edge/.
cross:
	bash scripts/cross.sh

## cross-test: each ARM binary under qemu-user: --version, then a smoke run against the simulator.
cross-test:
	bash scripts/cross-test.sh

## image: a multi-architecture OCI image (linux/amd64, linux/arm64, linux/arm/v7) of the `make
## cross` binaries, written as an OCI layout to out/image (no Docker daemon: python3 only; push
## it with `skopeo copy --all oci:out/image:VERSION docker://REGISTRY/grid-wrapper:VERSION`).
image:
	python3 scripts/oci-image.py

## image-test: skopeo reads out/image back: platforms, entrypoint, non-root user; each layer's
## binary runs --version (qemu-user for ARM); a rebuild gives the same digests.
image-test:
	bash scripts/image-test.sh

## loadbench: release grid-wrapper vs the simulator at scale S: memory, LIST vs nginx, watch
## fan-out, sustained change rate, readiness, the loop during writer work (out/loadbench.md),
## then the same cluster ×10: sync, RSS, LIST, relabel, fan-out (out/loadbench-x10.md; a
## 3.6 GiB simulator). Two tables, ≤ 9 min. LOADBENCH_X10=0 skips the ×10 table.
## The grid-wrapper measured is what users run on x86_64: the static musl build (scripts/
## musl-build.sh, built when missing or stale); GW_BIN=PATH measures another (the simulator and
## the bench client are the glibc release builds either way).
LOADBENCH_X10 ?= 1
GW_BIN ?=
loadbench:
	$(CARGO) build --release --bins --example loadbench
	gw="$(GW_BIN)"; [ -n "$$gw" ] || gw=$$(bash scripts/musl-build.sh); \
	bash scripts/loadbench.sh target/release --gw-bin "$$gw" && \
	if [ "$(LOADBENCH_X10)" != 0 ]; then bash scripts/loadbench.sh target/release --scale x10 --gw-bin "$$gw"; fi

## relaybench: the site relay (issue 27), three runs folded into medians (out/relaybench.md):
## the relay's fan-out to 100 follower watches over TLS (rate sweep, CPU), then what a site of 10
## followers at scale S costs the cloud over 5 minutes of churn without a relay and with one
## (requests, watches, bytes). About 13 min a run; RELAYBENCH_RUNS, GW_BIN as for loadbench.
relaybench:
	$(CARGO) build --release --bins --example loadbench
	gw="$(GW_BIN)"; [ -n "$$gw" ] || gw=$$(bash scripts/musl-build.sh); \
	bash scripts/relaybench.sh target/release --gw-bin "$$gw"

## relayflood: the kube-proxy port's LIST latency while the relay port is flooded (issue 43): 24
## sources x 100 sockets, each sending a TLS ClientHello and reopened as soon as it is closed;
## RELAYFLOOD_RUNS runs (3) in out/relayflood.md with their medians. The static musl build
## (GW_BIN as for loadbench); RELAYFLOOD_BEFORE=PATH measures another build beside it, run for
## run. About 1 min a run and binary; every knob in scripts/relayflood.sh.
RELAYFLOOD_BEFORE ?=
relayflood:
	$(CARGO) build --release --bins
	gw="$(GW_BIN)"; [ -n "$$gw" ] || gw=$$(bash scripts/musl-build.sh); \
	bash scripts/relayflood.sh target/release "$$gw" $(RELAYFLOOD_BEFORE)

## fleetbench: a fleet after a WAN outage (issue 38): FLEET_N grid-wrappers (200; the static musl
## build, GW_BIN as for loadbench) and one simulated cloud, a FLEET_OUTAGE-second outage (30)
## and the return, with and without throttling (429 + Retry-After) and a site relay; medians of
## FLEET_RUNS runs (3) in out/fleetbench.md and the cloud's requests/s over time in
## out/fleetbench.png. About 30 min; every knob in scripts/fleetbench.py.
fleetbench:
	$(CARGO) build --release --bins
	gw="$(GW_BIN)"; [ -n "$$gw" ] || gw=$$(bash scripts/musl-build.sh); \
	bash scripts/fleetbench.sh target/release "$$gw"

## snapbench: the --cache-dir snapshot at scale S: file size, write time and writer CPU, LIST
## latency with and without snapshot writes, offline start from it; one table, also in
## out/snapbench.md (≤ 4 min).
snapbench:
	$(CARGO) build --release --bins --example loadbench
	gw="$(GW_BIN)"; [ -n "$$gw" ] || gw=$$(bash scripts/musl-build.sh); \
	bash scripts/snapbench.sh target/release --gw-bin "$$gw"

## e2e: grid-wrapper between a real kube-apiserver + etcd and a real kube-proxy (nftables), with
## packets, in network namespaces it makes and removes (root; skips with one line without). The
## components are built from e2e/'s pinned Go modules into out/e2e/bin (scripts/e2e-build.sh,
## reused while go.sum is unchanged). Twice: kube-proxy over plain http as the DaemonSet ships it,
## then over https (E2E_GW_TLS=1), the way its own Events keep its identity.
e2e:
	$(CARGO) build --bins
	bash scripts/e2e.sh target/debug/grid-wrapper
	E2E_GW_TLS=1 bash scripts/e2e.sh target/debug/grid-wrapper

## helm-check: the Helm chart (deploy/helm/grid-wrapper) and its monitoring, by the real tools:
## helm lint and template of every preset, the default rendering against deploy/ object by object,
## each preset accepted by a real kube-apiserver (server-side dry run), promtool check and test of
## the alerts, the dashboard's queries parsed, every metric name in a live /metrics. helm and
## promtool come from tools/ (scripts/helm-tools.sh), kubectl, etcd and kube-apiserver from e2e/.
helm-check:
	$(CARGO) build --bins
	bash scripts/helm-check.sh target/debug
