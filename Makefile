# One entry point for people and CI. `make demo` and `make test` work on a
# fresh Debian machine: they install what is missing first.
SWIFT ?= swift
PYTHON ?= python3
BIN := .build/debug/scopefs
APT_PACKAGES := fuse3 libfuse3-dev pkg-config libsqlite3-dev libseccomp-dev bubblewrap attr util-linux shared-mime-info

.PHONY: all build deps demo test test-unit test-integration bench bench-quick bench-requests bench-instructions install clean

all: build

deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing) >/dev/null; \
	fi
	@$(PYTHON) -c 'import pytest, pexpect' >/dev/null 2>&1 || $(PYTHON) -m pip install -q pytest pexpect

build: deps
	$(SWIFT) build

demo: build
	./mount-scripts/demo.sh

test: build test-unit test-integration

test-unit: deps
	$(SWIFT) test
	$(PYTHON) -m pytest -q Tests/docs

test-integration: build
	SCOPEFS_IT_BUDGET=$${SCOPEFS_IT_BUDGET:-1500} SCOPEFS_BIN=$(abspath $(BIN)) $(PYTHON) -m pytest -q Tests/integration

bench: deps
	$(SWIFT) build -c release
	SCOPEFS_BIN=$(abspath .build/release/scopefs) $(PYTHON) bench/run.py

bench-quick: deps
	$(SWIFT) build -c release
	SCOPEFS_BIN=$(abspath .build/release/scopefs) $(PYTHON) bench/run.py --quick

bench-requests: deps
	$(SWIFT) build -c release
	SCOPEFS_BIN=$(abspath .build/release/scopefs) $(PYTHON) bench/requests.py

bench-instructions: deps
	$(SWIFT) build -c release
	SCOPEFS_BIN=$(abspath .build/release/scopefs) $(PYTHON) bench/instructions.py

install: deps
	$(SWIFT) build -c release
	install -m 0755 .build/release/scopefs /usr/local/bin/scopefs

clean:
	$(SWIFT) package clean
