#!/usr/bin/env bash
# Runs every doctest suite of a build and prints one total line:
#   N passed, M failed
# (test cases, all suites together), after a line "FAILED <suite>: <case>" for
# each case or suite that failed. Exits non-zero if any case failed or any
# suite did not finish.
#
# Usage: tests/run_all.sh [BUILD_DIR] [--sanitizers SAN_DIR] [--fuzz SAN_DIR SECONDS]
#                         [--tsan TSAN_DIR] [--valgrind]
#   BUILD_DIR     runs every suite of this build (none if left out)
#   --sanitizers  also runs the quick suites of SAN_DIR (a clang-14 ASan + UBSan
#                 build, `make test` uses build-fuzz), leaving out the few
#                 exhaustive sweeps listed in SAN_EXCLUDE below; their cases
#                 count into the total. If SAN_DIR is built with source-based
#                 coverage, prints the branch coverage of format/ and engine/
#                 over those runs (tests/coverage_report.sh)
#   --fuzz        also runs each libFuzzer target of SAN_DIR for SECONDS (libFuzzer
#                 seed AGENTMEM_FUZZ_SEED, default 1, so that a run is repeatable;
#                 make fuzz explores with random seeds) on a
#                 copy of its kept corpus (tests/fuzz/corpus/<target>/); each
#                 target counts as one case, failed on a crash, a sanitizer
#                 report or a broken invariant (the input is kept in
#                 SAN_DIR/fuzz-artifacts/<target>/)
#   --tsan        runs the threaded cases of TSAN_DIR (a clang-14 ThreadSanitizer
#                 build): R7's handles in threads, the graph's concurrent
#                 searches and inserts, hybrid recalls with the worker
#                 thread, sql_tests (one handle shared by
#                 threads) and, when TSAN_DIR has engine_tests (make tsan),
#                 two writer handles in one process
#   --valgrind    runs format_tests and sql_tests of BUILD_DIR under valgrind
#                 memcheck (any error or leak fails the suite)
# With BUILD_DIR and --sanitizers, the ASan + UBSan suites run beside the
# others when the machine has two cores or more (AGENTMEM_TEST_JOBS, default
# nproc; 1 runs them one after the other), and print their output after them.
set -uo pipefail
build=""
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then
  build=$1
  shift
fi
san_dir=""
fuzz_dir=""
fuzz_seconds=0
tsan_dir=""
valgrind=0
while [ $# -gt 0 ]; do
  case "$1" in
    --sanitizers) san_dir=$2; shift 2 ;;
    --fuzz) fuzz_dir=$2; fuzz_seconds=$3; shift 3 ;;
    --tsan) tsan_dir=$2; shift 2 ;;
    --valgrind) valgrind=1; shift ;;
    *) echo "run_all.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
for d in "${AGENTMEM_DATA_DIR:-}" ../shared/data /work/shared/data; do
  if [ -n "$d" ] && [ -f "$d/bm25_baseline.py" ]; then
    echo "evaluation data: $d"
    export AGENTMEM_DATA_DIR=$(cd "$d" && pwd)
    break
  fi
done
[ -n "${AGENTMEM_DATA_DIR:-}" ] || echo "evaluation data: not found (../shared/data); the tests that need it say so and skip"
passed=0
failed=0
status=0
failures=()

# failed_cases LOG: the names of the doctest cases that reported an error in a
# suite's output (the case's "TEST CASE:" line before its first ERROR).
failed_cases() {
  awk '/^TEST CASE:/ { name = substr($0, 12); sub(/^ +/, "", name); seen = 0; next }
       /^=+$/ { name = ""; seen = 0; next }
       /(ERROR|FATAL ERROR): / { if (name != "" && !seen) { print name; seen = 1 } }' "$1"
}

# run_suite LABEL EXE [DOCTEST ARGS...]: runs one doctest executable and adds
# its case counts to the totals.
run_suite() {
  local label=$1 exe=$2
  shift 2
  echo "== $label"
  local log started=$SECONDS
  log=$(mktemp)
  "$exe" "$@" --no-intro=false 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  echo "== $label: $((SECONDS - started)) s"
  local line p f
  line=$(grep -E '^\[(doctest|pytest|node|layering|functions)\] test cases:' "$log" | tail -n 1)
  p=$(sed -E 's/.*\| *([0-9]+) passed.*/\1/' <<<"$line")
  f=$(sed -E 's/.*\| *([0-9]+) failed.*/\1/' <<<"$line")
  if [ -z "$line" ]; then
    echo "$label did not finish (exit $rc)"
    failed=$((failed + 1))
    status=1
    failures+=("$label: did not finish (exit $rc)")
  else
    passed=$((passed + p))
    failed=$((failed + f))
    [ "$rc" -eq 0 ] || status=1
    if [ "$f" -gt 0 ] || [ "$rc" -ne 0 ]; then
      local name named=0
      while IFS= read -r name; do
        failures+=("$label: $name")
        named=$((named + 1))
      done < <(failed_cases "$log")
      [ "$named" -gt 0 ] || failures+=("$label: $f failed, exit $rc")
    fi
  fi
  rm -f "$log"
}

# not_built LABEL DIR: counts LABEL, which build DIR lacks, as a failed suite.
not_built() {
  echo "$1 is not built in $2"
  failed=$((failed + 1))
  status=1
  failures+=("$1: not built")
}

# The suite's executable in a build: BUILD/tests/NAME, BUILD/tests/<dir>/NAME
# or, for sync_lib_tests, BUILD/tests/replication/NAME.
suite_exe() {
  local exe="$1/tests/$2"
  [ -x "$exe" ] || exe="$1/tests/${2%_tests}/$2"
  [ -x "$exe" ] || exe="$1/tests/replication/$2"
  echo "$exe"
}

# The plain build's suites, then format_tests and sql_tests under valgrind.
plain_lane() {
  [ -n "$build" ] || return 0
  for suite in format_tests index_tests engine_tests sql_tests cli_tests reliability_tests python_tests \
               install_tests mcp_tests replication_tests sync_lib_tests; do
    exe=$(suite_exe "$build" "$suite")
    [ -x "$exe" ] || continue
    if [ "$suite" = replication_tests ] || [ "$suite" = sync_lib_tests ]; then
      # Against a throwaway PostgreSQL, started and stopped around the suite.
      run_suite "$suite" tests/replication/pg_run.sh "$exe"
    else
      run_suite "$suite" "$exe"
    fi
  done
  # The include layering, on the build's own compile commands.
  if [ -f "$build/compile_commands.json" ]; then
    run_suite layering_test tests/layering_test.py "$build"
  fi
  # No function of engine/ over 100 lines.
  run_suite function_lengths tests/function_lengths.py
  # valgrind memcheck on the format and SQL suites (the engine suite takes
  # over an hour there: it runs under ASan + UBSan instead).
  if [ "$valgrind" = 1 ]; then
    for suite in format_tests sql_tests; do
      exe=$(suite_exe "$build" "$suite")
      run_suite "$suite (valgrind)" valgrind --error-exitcode=99 --leak-check=full \
        --errors-for-leak-kinds=definite,indirect -q "$exe"
    done
  fi
}

# Under ASan + UBSan: the quick suites, without the exhaustive sweeps that
# take minutes there (each runs in the plain build above; `make asan` and the
# pre-release budget run them sanitized). Any sanitizer report fails the case.
SAN_EXCLUDE='*hundred thousand*,*reference baseline*,*flipped bit in any page*,*power loss at every sync point*,*truncated at every byte offset*,*failing the Nth I/O call*,*HNSW recall@10 on*,*persistence timings*,*among thousands*'
# reliability_tests runs under the sanitizers only for the cases listed in
# SAN_RELIABILITY: the fuzz corpus replay, the lifecycle power-loss sweep, the
# crash between a VACUUM's rename and its directory sync, and the reader/writer
# processes and threads. Left out: the sweep of a close that compacts 1,050
# episodes (80 s there; the same code runs in the other sweep), the 200 SIGKILLs and the
# 10k-episode open (their cost is the processes, not the code), the shell's
# strace cases (they run the plain build's shell) and the allocation-failure
# cases (clang's sanitizer runtimes own operator new, so nomem_test cannot
# replace it there; `make asan` runs them under gcc's ASan and LSan).
SAN_RELIABILITY='*kept fuzz corpus*,*sync point of a workload that forgets*,*rename of a VACUUM*,*kind that takes none*,*four reader processes*,*writer process is killed*,*threads of one process*'
# The ASan + UBSan suites and the coverage report over their runs.
sanitizer_lane() {
  if [ -n "$san_dir" ]; then
    local lane_started=$SECONDS
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
    # The sanitizer build also carries clang's source-based coverage: each
    # process writes its counters here, and the report below reads them (R12).
    rm -rf "$san_dir/profiles"
    export LLVM_PROFILE_FILE="$(cd "$san_dir" && pwd)/profiles/%p-%m.profraw"
    # index_tests is left out: clang-14 cannot build it (C++20 structured
    # bindings captured by lambdas, tests/index/text/english_test.cc); the index
    # code runs sanitized inside engine_tests and the fuzz targets.
    for suite in format_tests engine_tests sql_tests reliability_tests; do
      exe=$(suite_exe "$san_dir" "$suite")
      if [ ! -x "$exe" ]; then
        not_built "$suite (ASan+UBSan)" "$san_dir"
        continue
      fi
      if [ "$suite" = reliability_tests ]; then
        run_suite "$suite (ASan+UBSan)" "$exe" -tc="$SAN_RELIABILITY"
      else
        run_suite "$suite (ASan+UBSan)" "$exe" -tce="$SAN_EXCLUDE"
      fi
    done
    tests/coverage_report.sh "$san_dir"
    echo "== the ASan + UBSan lane, coverage report included: $((SECONDS - lane_started)) s"
  fi
}

# The fuzz targets, then the ThreadSanitizer suites.
fuzz_and_tsan() {
  # A short libFuzzer budget per target, on a copy of the kept corpus. Their
  # counters go elsewhere than the suites': they are not part of the report.
  if [ -n "$fuzz_dir" ]; then
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
    export LLVM_PROFILE_FILE="$(cd "$fuzz_dir" && pwd)/fuzz-profiles/%p-%m.profraw"
    for corpus in tests/fuzz/corpus/*/; do
      t=$(basename "$corpus")
      exe="$fuzz_dir/tests/reliability/fuzz/fuzz_$t"
      echo "== fuzz_$t ($fuzz_seconds s, ASan+UBSan)"
      if [ ! -x "$exe" ]; then
        not_built "fuzz_$t" "$fuzz_dir"
        continue
      fi
      work="$fuzz_dir/fuzz-corpus/$t" artifacts="$fuzz_dir/fuzz-artifacts/$t"
      rm -rf "$work" && mkdir -p "$work" "$artifacts"
      cp "$corpus"* "$work/"
      UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 "$exe" -max_total_time="$fuzz_seconds" \
        -seed="${AGENTMEM_FUZZ_SEED:-1}" -timeout=30 -rss_limit_mb=2048 -max_len=16384 -print_final_stats=1 \
        -artifact_prefix="$artifacts/" "$work" > "$artifacts/log.txt" 2>&1
      rc=$?
      grep -E '^(#[0-9]+ +DONE|Done|stat::number_of_executed_units|==[0-9]+==|SUMMARY|fuzz invariant|artifact)' \
        "$artifacts/log.txt"
      if [ "$rc" -eq 0 ]; then
        passed=$((passed + 1))
      else
        echo "fuzz_$t FAILED (exit $rc): see $artifacts/log.txt and the input saved there"
        failed=$((failed + 1))
        status=1
        failures+=("fuzz_$t: exit $rc, input in $artifacts")
      fi
    done
  fi

  # ThreadSanitizer: the cases that run threads. detect_deadlocks=0: potential
  # lock-order inversions are not reported; data races are, and fail.
  if [ -n "$tsan_dir" ]; then
    export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:detect_deadlocks=0}
    export AGENTMEM_R7_TXNS=${AGENTMEM_R7_TXNS:-200}
    for spec in "reliability/reliability_tests|*threads of one process*" \
                "reliability/hnsw_threads_tests|*searches running during*,*several threads*" \
                "recall_threads_tests|*" \
                "sql/sql_tests|*" "?engine_tests|*take turns as writers*"; do
      exe="$tsan_dir/tests/${spec%%|*}"
      exe=${exe/\?/}
      # "?": run when built (make tsan builds engine_tests; make test does not).
      [ "${spec#\?}" != "$spec" ] && [ ! -x "$exe" ] && continue
      if [ ! -x "$exe" ]; then
        not_built "$(basename "$exe") (TSan)" "$tsan_dir"
        continue
      fi
      run_suite "$(basename "$exe") (TSan)" "$exe" -tc="${spec#*|}"
    done
  fi
}

# Two lanes run side by side on a machine of two cores or more (most suites
# use one): the ASan + UBSan suites in the background, their output printed
# after the others'. AGENTMEM_TEST_JOBS=1 runs one after the other.
jobs=${AGENTMEM_TEST_JOBS:-$(nproc)}
if [ "$jobs" -ge 2 ] && [ -n "$build" ] && [ -n "$san_dir" ]; then
  lane=$(mktemp -d)
  echo "== the ASan + UBSan suites run beside these; their output follows"
  (
    sanitizer_lane
    { echo "$passed $failed $status"; for f in "${failures[@]}"; do echo "$f"; done; } > "$lane/state"
  ) > "$lane/log" 2>&1 &
  lane_pid=$!
  plain_lane
  fuzz_and_tsan
  wait "$lane_pid"
  cat "$lane/log"
  if [ -f "$lane/state" ]; then
    read -r p f st < "$lane/state"
    passed=$((passed + p))
    failed=$((failed + f))
    [ "$st" -eq 0 ] || status=1
    while IFS= read -r f; do failures+=("$f"); done < <(tail -n +2 "$lane/state")
  else
    failed=$((failed + 1))
    status=1
    failures+=("the sanitizer lane did not finish")
  fi
  rm -rf "$lane"
else
  plain_lane
  sanitizer_lane
  fuzz_and_tsan
fi

echo "== the suites: $SECONDS s"
# What failed, named just above the total, where the end of a long log shows it.
for f in "${failures[@]}"; do echo "FAILED $f"; done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$status" -eq 0 ]
