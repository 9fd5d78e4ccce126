#!/usr/bin/env bash
# Runs every doctest suite of a build and prints one total line:
#   N passed, M failed
# (test cases, all suites together). Exits non-zero if any case failed or any
# suite did not finish. Usage: tests/run_all.sh BUILD_DIR
set -uo pipefail
build=${1:-build}
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
for suite in format_tests index_tests engine_tests sql_tests cli_tests reliability_tests python_tests; do
  exe="$build/tests/$suite"
  [ -x "$exe" ] || exe="$build/tests/${suite%_tests}/$suite"  # suites built in their own folder
  [ -x "$exe" ] || continue
  echo "== $suite"
  log=$(mktemp)
  "$exe" --no-intro=false 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  line=$(grep -E '^\[(doctest|pytest)\] test cases:' "$log" | tail -n 1)
  p=$(sed -E 's/.*\| *([0-9]+) passed.*/\1/' <<<"$line")
  f=$(sed -E 's/.*\| *([0-9]+) failed.*/\1/' <<<"$line")
  if [ -z "$line" ]; then
    echo "$suite did not finish (exit $rc)"
    failed=$((failed + 1))
    status=1
  else
    passed=$((passed + p))
    failed=$((failed + f))
    [ "$rc" -eq 0 ] || status=1
  fi
  rm -f "$log"
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$status" -eq 0 ]
