# grid-wrapper — make targets. `make demo` shows it working; `make test` runs every test.
CARGO ?= cargo
SHELL := /bin/bash

.PHONY: all build test lint demo run clean

all: build

build:
	$(CARGO) build --release --bins

## test: format check, clippy (warnings are errors), unit + integration tests.
test:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets -- -D warnings
	$(CARGO) test --all-targets

lint:
	$(CARGO) clippy --all-targets -- -D warnings

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
