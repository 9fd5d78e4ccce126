#!/usr/bin/env bash
# Branch coverage (R12) of format/ and engine/ from the raw profiles that the
# tests of a clang build with source-based coverage
# (-fprofile-instr-generate -fcoverage-mapping) wrote to BUILD/profiles/.
#
# Usage: tests/coverage_report.sh BUILD [EXE...]
#   EXE  the instrumented executables whose runs wrote the profiles (default:
#        the format, engine, sql and reliability suites found in BUILD)
#
# Prints llvm-cov's per-file table (lines, functions and branches, where a
# branch is one outcome of a condition in the source: `if (a && b)` has four)
# and writes it to BUILD/coverage/summary.txt, with a browsable report in
# BUILD/coverage/html/. The goal is >= 90 % on the format/ decoders and the
# commit and recovery files (docs/testing.md, R12); the report says which fall
# short but does not fail: coverage is reported, not asserted.
set -uo pipefail
build=${1:?usage: tests/coverage_report.sh BUILD [EXE...]}
shift
cd "$(dirname "$0")/.."
profdata=llvm-profdata-14
cov=llvm-cov-14
if ! command -v "$cov" >/dev/null; then
  echo "coverage: $cov not found (Debian package llvm-14)"
  exit 0
fi
shopt -s nullglob
raw=("$build"/profiles/*.profraw)
if [ ${#raw[@]} -eq 0 ]; then
  echo "coverage: no profiles in $build/profiles (is $build built with -fprofile-instr-generate?)"
  exit 0
fi
exes=("$@")
if [ ${#exes[@]} -eq 0 ]; then
  for e in tests/format_tests tests/engine_tests tests/sql/sql_tests tests/reliability/reliability_tests \
           tests/reliability/reliability_worker; do
    [ -x "$build/$e" ] && exes+=("$build/$e")
  done
fi
out="$build/coverage"
mkdir -p "$out"
# A profile cut short (a child process killed mid-write) is skipped, not fatal.
if ! "$profdata" merge -sparse --failure-mode=all "${raw[@]}" -o "$out/merged.profdata" 2>"$out/merge.log"; then
  echo "coverage: llvm-profdata merge failed (see $out/merge.log)"
  exit 0
fi
objects=()
for e in "${exes[@]:1}"; do objects+=(-object "$e"); done
filter='(^|/)(tests|index|cli|bench|layering|include)/|^/usr/|\.h$'
# llvm-cov's columns: regions (3), functions (3), lines (3), branches (3).
"$cov" report "${exes[0]}" "${objects[@]}" -instr-profile="$out/merged.profdata" \
  -ignore-filename-regex="$filter" -show-branch-summary 2>"$out/report.log" |
  awk 'NF == 13 && $1 != "Filename" {
         printf "%-28s lines %7s   branches %5s  missed %4s  %7s\n", $1, $10, $11, $12, $13 }' \
  > "$out/summary.txt"
"$cov" show "${exes[0]}" "${objects[@]}" -instr-profile="$out/merged.profdata" \
  -ignore-filename-regex="$filter" -show-branches=count -format=html \
  -output-dir="$out/html" 2>>"$out/report.log"
echo "== branch coverage of format/ and engine/ (R12; $out/summary.txt, html in $out/html)"
cat "$out/summary.txt"
