# One entry point for people and CI. `make demo` and `make test` work on a
# fresh Debian machine: they install what is missing first.
SWIFT ?= swift
PYTHON ?= python3
BIN := .build/debug/scopefs
# libsystemd-dev: sd_notify and the journal; systemd: systemd-analyze for
# the units' test; patchelf, man-db: the installed binary's run path and
# `man`, for `make install`/`make deb` and their test; shared-mime-info:
# the content types of pick requests; lintian: the package's own check;
# debootstrap: the fresh Debian 12 root the package is installed in
# (Tests/integration/test_fresh_debian.py); python3-pip: the PyPI packages
# below; rclone: the rclone extension and the remotes its tests serve;
# iproute2, iptables: those remotes in network namespaces with faults on
# their links (Tests/integration/netns_link.py; iptables stands in for
# the netem qdisc, which Debian's cloud kernels lack); s3fs: the remote
# benchmark's s3fs-fuse column (bench/remote.py); dbus (dbus-daemon),
# flatpak (its document-* commands), python3-dbus, libglib2.0-bin (gdbus):
# `scopefs portal` on a real session bus (Tests/integration/test_portal.py);
# xdg-desktop-portal (the frontend), xdg-dbus-proxy (`scopefs run
# --portal-bus`), python3-gi (the apps' GDBus client): the FileChooser
# backend end to end (Tests/integration/test_portal_chooser.py);
# chromium: the browser Playwright drives in the settings page's tests
# (Tests/settings; its bundled browser download is not used);
# postgresql-15, openssl: the fleet's shared store and its TLS in `make
# test-fleet` (Tests/fleet); rsync: a backup tool run in scope with `run
# --hold-scopes` (Tests/integration/test_held_scopes.py); bash-completion:
# what the completion script `make install` puts in place needs; vim: an
# editor's atomic save (backupcopy=no) through the document layout
# (Tests/integration/test_portal_saves.py); python3-pyqt5: Qt's QSaveFile
# saving a granted file through the mount (Tests/integration/test_atomic_saves.py);
# xvfb, gir1.2-gtk-3.0: a GTK app drawn on a virtual display, opening a file
# through the portal (Tests/integration/test_portal_gtk_app.py); zlib1g-dev:
# the CRC-32 of previews kept in the owner's freedesktop cache (Documents);
# liburing-dev: FUSE over io_uring, `mount --io-uring` (Sources/CFuseRing).
APT_PACKAGES := fuse3 libfuse3-dev pkg-config libjson-c-dev libsqlite3-dev libseccomp-dev libsystemd-dev bubblewrap attr util-linux strace \
	systemd patchelf man-db shared-mime-info lintian debootstrap python3-pip rclone iproute2 iptables s3fs \
	dbus flatpak python3-dbus libglib2.0-bin chromium xdg-desktop-portal xdg-dbus-proxy python3-gi \
	postgresql-15 openssl rsync bash-completion vim python3-pyqt5 xvfb gir1.2-gtk-3.0 zlib1g-dev \
	liburing-dev
# The Python provider extensions and their tests (boto3, moto's S3 server),
# pinned; installed when a pinned version is missing. Debian 12's own
# python3-boto3 and python3-moto predate S3's conditional writes.
# PIP_BREAK_SYSTEM_PACKAGES lets Debian 12's pip install for the system's
# python3 (PEP 668); a virtual environment's or pyenv's pip ignores it.
EXTENSION_REQUIREMENTS := extensions/requirements.txt
# Playwright for Python, pinned, for the settings page's browser tests.
SETTINGS_REQUIREMENTS := Tests/settings/requirements.txt
PINS_INSTALLED = import sys, importlib.metadata as m; \
	pins = [line.split("\#")[0].strip().split("==") for line in open("$(1)")]; \
	sys.exit(any(m.version(name.split("[")[0]) != version for name, version in (p for p in pins if p != [""])))

# The version lives in Sources/ScopeFSCLI/Version.swift; `scopefs --version`
# adds `git describe`, which Package.swift passes to the build.
VERSION := $(shell sed -n 's/.*static let package = "\(.*\)".*/\1/p' Sources/ScopeFSCLI/Version.swift)
export SCOPEFS_GIT_DESCRIBE := $(shell git describe --tags --always --dirty 2>/dev/null)
# `make install` and `make deb` build in release mode; CONFIG=debug packages
# the debug build instead (the package test does, to keep CI short).
CONFIG ?= release
PREFIX ?= /usr/local
STRIP ?= 1
PACKAGED_BIN := .build/$(CONFIG)/scopefs
GENERATED := .build/generated-$(CONFIG)
DIST := .build/dist

.PHONY: all build deps demo test test-unit test-extensions test-integration test-integration-both test-integration-postgresql test-settings test-fleet bench bench-fleet bench-fleet-scale bench-fleet-quick bench-portal-layout bench-remote bench-quick bench-requests bench-instructions bench-floor \
	install generated deb lint lint-deb hooks version swift-client clean

all: build

deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing) >/dev/null; \
	fi
	@$(PYTHON) -c 'import pytest, pexpect' >/dev/null 2>&1 || \
	  PIP_BREAK_SYSTEM_PACKAGES=1 $(PYTHON) -m pip install -q --root-user-action=ignore pytest pexpect
	@$(PYTHON) -c '$(call PINS_INSTALLED,$(EXTENSION_REQUIREMENTS))' >/dev/null 2>&1 || \
	  PIP_BREAK_SYSTEM_PACKAGES=1 $(PYTHON) -m pip install -q --root-user-action=ignore -r $(EXTENSION_REQUIREMENTS)
	@$(PYTHON) -c '$(call PINS_INSTALLED,$(SETTINGS_REQUIREMENTS))' >/dev/null 2>&1 || \
	  PIP_BREAK_SYSTEM_PACKAGES=1 $(PYTHON) -m pip install -q --root-user-action=ignore -r $(SETTINGS_REQUIREMENTS)
	@# Root's apps run as this system account, never as root (SECURITY.md).
	@./packaging/app-account.sh

build: deps
	$(SWIFT) build

demo: build
	./mount-scripts/demo.sh

# Lint first: it takes seconds and names a layout slip before the long suite.
# The groups run in this order; the time of each is printed at the end.
TEST_GROUPS := lint build test-unit test-extensions test-integration-both test-settings test-fleet
test:
	@MAKE=$(MAKE) tools/timed_groups.sh $(TEST_GROUPS)

# The integration suite on SQLite and on PostgreSQL, side by side: their
# tests mostly wait (on mounts, daemons, apps and timeouts), so together
# they take about what the longer one takes alone instead of the sum
# (~60 min of CI's 90 on a 2-core machine, serially). Each prints its
# output whole when it ends (--output-sync); each has the budget it has
# alone, raised for the shared cores.
test-integration-both: build
	SCOPEFS_IT_BUDGET=$${SCOPEFS_IT_BUDGET:-3300} $(MAKE) -j2 --output-sync=target --no-print-directory \
		test-integration test-integration-postgresql

test-unit: deps
	$(SWIFT) test
	$(PYTHON) -m pytest -q Tests/docs Tests/repo

# Provider extensions (docs/PROVIDERS.md): the protocol's conformance suite
# against the folder examples (Python, and Swift: built by `build` with
# everything else, so no extra build), the S3 extension on moto's server
# and the rclone extension on `rclone serve webdav`/`sftp`; the SDK's loop,
# the S3 and rclone mappings. Child processes and local servers only, no
# FUSE.
test-extensions: build
	$(PYTHON) -m pytest -q -p no:cacheprovider Tests/extensions

# The suite takes ~15 min on a quiet 2-core machine; the budget leaves room
# for the fresh-Debian test's one-time bootstrap (~5 min) on a new machine
# and stays well under CI's 90 minutes.
test-integration: build
	SCOPEFS_IT_BUDGET=$${SCOPEFS_IT_BUDGET:-2700} SCOPEFS_BIN=$(abspath $(BIN)) \
		tools/timed_line.sh "integration (SQLite)" $(PYTHON) -m pytest -q Tests/integration

# The same suite on the fleet's store (issue 34): each test world gets a
# PostgreSQL database of its own on one throwaway server (Debian's
# postgresql-15, started by the tests). Tests about what only the SQLite
# store does are skipped with their reason (the sqlite_store marker); the
# files that never use the harness's test world (a fresh Debian, the
# README's blocks, the harness's own waits, every sandbox's attack probes),
# the package's build and install (test_package.py: it builds the
# .deb in the repository's .build/dist, which the SQLite run beside it
# builds too) and the FUSE transport (test_fuse_ring.py: it flips the
# kernel's one enable_uring switch, and the store plays no part) ran in
# test-integration. ~25 min.
#
# It runs a copy of the binary: the SQLite run beside it builds the .deb,
# and that build links .build/debug/scopefs again while this run's
# daemons and apps start from it. The copy sits at the same depth, so it
# finds the repository's extensions as the original does.
IT_POSTGRESQL_BIN := .build/it-postgresql/scopefs
test-integration-postgresql: build
	mkdir -p $(dir $(IT_POSTGRESQL_BIN)) && cp $(BIN) $(IT_POSTGRESQL_BIN).new && mv -f $(IT_POSTGRESQL_BIN).new $(IT_POSTGRESQL_BIN)
	SCOPEFS_IT_STORE=postgresql SCOPEFS_IT_BUDGET=$${SCOPEFS_IT_BUDGET:-2700} SCOPEFS_BIN=$(abspath $(IT_POSTGRESQL_BIN)) \
		tools/timed_line.sh "integration (PostgreSQL)" $(PYTHON) -m pytest -q -p no:cacheprovider Tests/integration --ignore=Tests/integration/test_fresh_debian.py \
		--ignore=Tests/integration/test_readme.py --ignore=Tests/integration/test_wait_for.py \
		--ignore=Tests/integration/test_attacks_every_sandbox.py --ignore=Tests/integration/test_package.py \
		--ignore=Tests/integration/test_fuse_ring.py

# The settings page end to end (issue 36): a real mount and daemon, app
# processes, `scopefs settings`, and Debian's chromium driven by Playwright.
# Its own target, outside the integration suite's time budget (~1 min).
# Screenshots of every page land in .build/test-artifacts/settings.
test-settings: build
	SCOPEFS_BIN=$(abspath $(BIN)) $(PYTHON) -m pytest -q -p no:cacheprovider Tests/settings

# A fleet on one machine (SPEC S44): a real PostgreSQL server started by
# the tests (Debian's postgresql-15, as the postgres user, in a temp
# folder), two hosts with their own daemons and mounts, one of them in a
# network namespace whose link the tests cut. About 2 minutes.
test-fleet: build
	SCOPEFS_BIN=$(abspath $(BIN)) $(PYTHON) -m pytest -q -p no:cacheprovider -p no:benchmark Tests/fleet

# BENCH_ARGS go to bench/run.py: BENCH_ARGS="--set remote" runs the
# cloud-storage set (bench/remote.py), as `make bench-remote` does.
bench: deps
	$(SWIFT) build -c release
	SCOPEFS_BIN=$(abspath .build/release/scopefs) $(PYTHON) bench/run.py $(BENCH_ARGS)

# Revocation propagation across a fleet (issue 34): hosts in network
# namespaces on one PostgreSQL, 1,000 revokes, plain and with 20 ms delay.
bench-fleet: deps
	$(SWIFT) build -c release
	SCOPEFS_BIN=$(abspath .build/release/scopefs) $(PYTHON) bench/fleet.py $(BENCH_ARGS)

# Grants at scale (issue 34): 100 apps x 10,000 grants on a throwaway
# PostgreSQL and on SQLite: install time, daemon RSS, revoke to EPERM.
# BENCH_ARGS="--apps 10 --grants 1000" scales it down.
bench-fleet-scale: deps
	$(SWIFT) build -c release
	SCOPEFS_BIN=$(abspath .build/release/scopefs) $(PYTHON) bench/fleet_scale.py $(BENCH_ARGS)

# The portal layout's per-read policy check on each store (decision 65).
bench-portal-layout: deps
	$(SWIFT) build -c release
	SCOPEFS_BIN=$(abspath .build/release/scopefs) $(PYTHON) bench/portal_layout.py $(BENCH_ARGS)

# The quick bench with ScopeFS on the fleet's store beside SQLite's (it
# starts a PostgreSQL server, which plain `make bench` does not).
bench-fleet-quick: deps
	$(SWIFT) build -c release
	SCOPEFS_BIN=$(abspath .build/release/scopefs) $(PYTHON) bench/run.py --quick --systems native,scopefs,scopefs-fleet $(BENCH_ARGS)

bench-remote: deps
	$(SWIFT) build -c release
	SCOPEFS_BIN=$(abspath .build/release/scopefs) $(PYTHON) bench/run.py --set remote $(BENCH_ARGS)

bench-quick: deps
	$(SWIFT) build -c release
	SCOPEFS_BIN=$(abspath .build/release/scopefs) $(PYTHON) bench/run.py --quick

bench-requests: deps
	$(SWIFT) build -c release
	SCOPEFS_BIN=$(abspath .build/release/scopefs) $(PYTHON) bench/requests.py

bench-instructions: deps
	$(SWIFT) build -c release
	SCOPEFS_BIN=$(abspath .build/release/scopefs) $(PYTHON) bench/instructions.py

# The per-request floor: µs and instructions per LOOKUP, GETATTR, OPEN, OPENDIR,
# READ 4 KiB and GETXATTR, ScopeFS beside passthrough_ll and native.
bench-floor: deps
	$(SWIFT) build -c release
	SCOPEFS_BIN=$(abspath .build/release/scopefs) $(PYTHON) bench/floor.py

# Layout and lint checks, configured in .swift-format and ruff.toml, and
# the messages of the commits since tools/commit_messages.py's BASE. They
# read only; `swift format -i -r Sources Tests Package.swift clients/swift`
# and `ruff format && ruff check --fix` rewrite.
lint: deps
	@$(PYTHON) -m ruff --version >/dev/null 2>&1 || $(PYTHON) -m pip install -q ruff
	$(SWIFT) format lint --strict --parallel --recursive Sources Tests Package.swift clients/swift docs/examples/extensions
	$(PYTHON) -m ruff check
	$(PYTHON) -m ruff format --check
	$(PYTHON) tools/commit_messages.py

# Once per clone: git checks each new commit message as CONTRIBUTING.md
# asks (tools/commit_messages.py, the same check `make lint` runs in CI).
hooks:
	git config core.hooksPath .githooks

version:
	@echo $(VERSION)

# The Swift client's own history (clients/swift/README.md): apps depend on
# it by URL and version, and SwiftPM wants a package at a repository's root.
swift-client:
	git subtree split --prefix=clients/swift -b swift-client

# The man page from the binary's argument parser and docs/CLI.md
# (packaging/manpage.py: one source for the exit codes, environment, files
# and examples), completion scripts from the binary itself. Nothing is
# built twice: swift-argument-parser's manual plugin, used before, built its
# own tool and then the product again, which made `make install` take
# minutes after a finished release build.
MANUAL_DATE = $(shell LC_ALL=C date -u -d @$$(git log -1 --format=%ct 2>/dev/null || date +%s) '+%B %-d, %Y')

generated: deps
	$(SWIFT) build -c $(CONFIG) --product scopefs
	@$(MAKE) --no-print-directory $(GENERATED)/.stamp

# The man page and completions of the binary built last, made again only
# when it or what they are made from changed.
$(GENERATED)/.stamp: $(PACKAGED_BIN) docs/CLI.md packaging/manpage.py
	rm -rf $(GENERATED) && mkdir -p $(GENERATED)/man $(GENERATED)/completions
	$(PYTHON) packaging/manpage.py $(PACKAGED_BIN) docs/CLI.md "$(MANUAL_DATE)" $(GENERATED)/man/scopefs.1
	for shell in bash zsh fish; do \
	  $(PACKAGED_BIN) --generate-completion-script $$shell > $(GENERATED)/completions/scopefs.$$shell || exit 1; \
	done
	touch $@

# A checkout not built yet is built here; once it is, install only installs.
$(PACKAGED_BIN):
	@$(MAKE) --no-print-directory generated

# DESTDIR and PREFIX work as usual; the mount helper goes to /sbin. Besides
# the binary (stripped; STRIP=0 keeps its symbols): the C client library
# with its header and pkg-config file, the Python client and pytest plugin
# (for the system's python3), the man pages, completions, units, and the
# documentation with its examples (packaging/install.sh lists them). After
# a build it takes seconds: no second build, no check of the packages
# (issue 50: a no-op `swift build` and `deps` made it a minute).
install: $(GENERATED)/.stamp
	DESTDIR=$(DESTDIR) PREFIX=$(PREFIX) STRIP=$(STRIP) ./packaging/install.sh $(PACKAGED_BIN) $(GENERATED)

deb: generated
	./packaging/deb/build-deb.sh $(PACKAGED_BIN) $(GENERATED) $(DIST)

lint-deb: deb
	lintian --info $(DIST)/scopefs_$(VERSION)_amd64.deb

clean:
	$(SWIFT) package clean
