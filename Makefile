# agentmem -- the two commands a user runs:
#   make test   install what is missing, build, run every test suite
#   make demo   install what is missing, build, create and print demo.agentmem
# Other targets: build, deps, asan, clean; bench (the recall benchmark at
# N = 100,000, results in bench/results/) and bench-quick (N = 10,000).
SHELL := /bin/bash
BUILD ?= build
DEBIAN_PACKAGES := g++ meson ninja-build pkg-config cmake libsqlite3-dev libhnswlib-dev \
                   libxsimd-dev libzstd-dev doctest-dev nlohmann-json3-dev strace libedit-dev
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps build test demo asan clean

all: build

# $(call install_missing,PACKAGES): installs only the Debian packages that are
# missing, non-interactively (with sudo when not root); never asks questions.
define install_missing
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -q && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	fi
endef

deps:
	$(call install_missing,$(DEBIAN_PACKAGES))

$(BUILD)/build.ninja: | deps
	meson setup $(BUILD) --buildtype=release -Dtest_hooks=true

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

test: build
	tests/run_all.sh $(BUILD)

demo: build
	$(BUILD)/cli/agentmem-demo demo/sample_conversation.tsv demo.agentmem

# The quick suites under AddressSanitizer and UndefinedBehaviorSanitizer.
asan: deps
	[ -f build-asan/build.ninja ] || meson setup build-asan --buildtype=debug \
	  -Db_sanitize=address,undefined -Db_lundef=false -Dtest_hooks=true
	ninja -C build-asan
	tests/run_all.sh build-asan

clean:
	rm -rf $(BUILD) build-asan demo.agentmem

# ---------------------------------------------------------------- benchmarks
# make bench        the recall benchmark at N = 100,000 episodes x 384-d; writes
#                   bench/results/recall-n100000.{md,csv} and prints the table
# make bench-quick  the same at N = 10,000 (well under a minute)
# BENCH_ARGS passes more options (see `build/bench/recall_bench --help`).
BENCH_DEBIAN_PACKAGES := wordnet-base
BENCH_ARGS ?=

.PHONY: bench bench-quick bench-deps bench-build

bench-deps: deps
	$(call install_missing,$(BENCH_DEBIAN_PACKAGES))

bench-build: bench-deps $(BUILD)/build.ninja
	ninja -C $(BUILD) bench/recall_bench

bench: bench-build
	$(BUILD)/bench/recall_bench --n 100000 --out bench/results $(BENCH_ARGS)

bench-quick: bench-build
	$(BUILD)/bench/recall_bench --n 10000 --out bench/results $(BENCH_ARGS)
