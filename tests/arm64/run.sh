#!/usr/bin/env bash
# tests/arm64/run.sh NATIVE_BUILD ARM64_BUILD -- the checks of make test-arm64:
#   1. the format, index, engine and sql doctest suites of ARM64_BUILD (a
#      cross build for aarch64, cross/aarch64-linux-gnu.ini) under
#      qemu-aarch64, less the exhaustive sweeps of ARM64_EXCLUDE below;
#      format_tests reads the committed golden file (tests/golden/);
#   2. the cross-architecture file checks: a file written natively (x86-64)
#      gives under qemu the same recall results as natively, and a file
#      written under qemu gives natively the same results as under qemu
#      (tests/arm64/arm64_files.cc prints them). With the scalar distance
#      kernels on both sides the results must be identical to the last bit;
#      with each side's widest kernels (AVX2/AVX-512 against NEON) the ids
#      and ranks must be identical and the scores equal within 1e-6
#      (relative), the difference of their float summation orders.
# Prints each suite's counts and ends with the line "arm64: N passed, M failed"
# (doctest cases plus one case per file check); exits non-zero on a failure.
set -uo pipefail
native=${1:?usage: tests/arm64/run.sh NATIVE_BUILD ARM64_BUILD}
arm=${2:?usage: tests/arm64/run.sh NATIVE_BUILD ARM64_BUILD}
cd "$(dirname "$0")/../.."
# The loader and libc must come from one glibc build. -L makes the guest's
# loader /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 (the cross
# toolchain's libc6-arm64-cross), but a library path it does not find under
# the prefix falls through to the host's /lib/aarch64-linux-gnu, where
# `dpkg --add-architecture arm64` put Debian's libc6:arm64 (another build of
# glibc 2.36). A loader of one build with a libc of the other corrupts the
# loader's thread-stack list: the first pthread_create spins for ever.
# LD_LIBRARY_PATH keeps libc, libstdc++ and the loader together; the other
# libraries (sqlite3, zstd, ...) still come from /lib/aarch64-linux-gnu.
QEMU=(qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib)
command -v qemu-aarch64 >/dev/null || { echo "qemu-aarch64 not found (make deps-arm64 installs qemu-user)"; exit 1; }

# Left out under qemu (each runs natively in make test): the exhaustive
# sweeps over crash points, byte offsets, flipped bits and failing I/O calls,
# the 100,000-episode and reference-baseline data runs, the timing printouts,
# and the cases that start other processes (qemu-user runs one aarch64
# process; a child it execs would be run by the host). And index_tests' two
# BM25 runs over the real conversations of ../shared/data ("on real
# conversations a top-k across users…", "at 100k real turns…"): 200 s under
# qemu, and the same code runs on the smaller data cases.
ARM64_EXCLUDE='*real conversations a top-k across users*,*100k real turns*,*hundred thousand*,*reference baseline*,*flipped bit in any page*,*power loss at every sync point*,*truncated at every byte offset*,*failing the Nth I/O call*,*HNSW recall@10 on*,*persistence timings*,*among thousands*,*other processes*,*another process*,*throughput*,*timings*'

# A suite that has not finished after this many seconds fails (and is killed).
SUITE_TIMEOUT=${ARM64_SUITE_TIMEOUT:-600}

passed=0
failed=0
status=0
start=$SECONDS

# run_suite LABEL EXE [DOCTEST ARGS...]: runs one suite under qemu and adds
# its case counts to the totals.
run_suite() {
  local label=$1 exe=$2
  shift 2
  local log t0=$SECONDS
  log=$(mktemp)
  timeout "$SUITE_TIMEOUT" "${QEMU[@]}" "$exe" "$@" >"$log" 2>&1
  local rc=$?
  local line p f
  line=$(grep -E '^\[doctest\] test cases:' "$log" | tail -n 1)
  if [ -z "$line" ]; then
    tail -n 40 "$log"
    echo "== arm64 $label: did not finish (exit $rc)"
    failed=$((failed + 1))
    status=1
  else
    p=$(sed -E 's/.*\| *([0-9]+) passed.*/\1/' <<<"$line")
    f=$(sed -E 's/.*\| *([0-9]+) failed.*/\1/' <<<"$line")
    [ "$f" -eq 0 ] && [ "$rc" -eq 0 ] || { grep -E 'ERROR|FAILED|SKIPPED' "$log" | head -n 40; status=1; }
    echo "== arm64 $label: $p passed, $f failed ($((SECONDS - t0)) s under qemu)"
    passed=$((passed + p))
    failed=$((failed + f))
  fi
  rm -f "$log"
}

run_suite format_tests "$arm/tests/format_tests" -tce="$ARM64_EXCLUDE"
# index_tests runs as two processes, the text cases and the vector cases: in
# one process under qemu the vector cases, run after the text cases, did not
# finish within 15 minutes, while each half finishes in a few.
run_suite "index_tests (text)" "$arm/tests/index_tests" -sf='*text*' -tce="$ARM64_EXCLUDE"
run_suite "index_tests (vector)" "$arm/tests/index_tests" -sf='*vector*' -tce="$ARM64_EXCLUDE"
run_suite engine_tests "$arm/tests/engine_tests" -tce="$ARM64_EXCLUDE"
run_suite sql_tests "$arm/tests/sql/sql_tests" -tce="$ARM64_EXCLUDE"

# ---- cross-architecture files
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
x86_tool=("$native/tests/arm64/arm64_files")
arm_tool=("${QEMU[@]}" "$arm/tests/arm64/arm64_files")

# check NAME COMMAND...: one file check, counted as one case.
check() {
  local name=$1
  shift
  if "$@"; then
    echo "ok   $name"
    passed=$((passed + 1))
  else
    echo "FAIL $name"
    failed=$((failed + 1))
    status=1
  fi
}

# same_results A B EXACT: A and B (arm64_files recall outputs) list the same
# hits in the same order; EXACT=1 also requires identical scores, EXACT=0
# scores within 1e-6 relative. Prints the largest score difference.
same_results() {
  python3 - "$1" "$2" "$3" <<'PY'
import sys
a = [l.split() for l in open(sys.argv[1])]
b = [l.split() for l in open(sys.argv[2])]
exact = sys.argv[3] == "1"
if len(a) != len(b) or not a:
    print(f"  {len(a)} hits against {len(b)}"); sys.exit(1)
worst = 0.0
for x, y in zip(a, b):
    if x[:5] != y[:5]:
        print("  first difference:", " ".join(x), "|", " ".join(y)); sys.exit(1)
    for u, v in zip(x[5:], y[5:]):
        u, v = float.fromhex(u), float.fromhex(v)
        worst = max(worst, abs(u - v) / max(abs(u), abs(v), 1e-30))
print(f"  {len(a)} hits, same ids and ranks; largest relative score difference {worst:.3g}")
sys.exit(0 if (worst == 0 if exact else worst <= 1e-6) else 1)
PY
}

files_ok=1
"${x86_tool[@]}" write "$work/x86.agentmem" || files_ok=0
"${arm_tool[@]}" write "$work/arm64.agentmem" || files_ok=0
if [ "$files_ok" -eq 1 ]; then
  for f in x86 arm64; do
    "${x86_tool[@]}" recall "$work/$f.agentmem" >"$work/$f.on-x86" 2>/dev/null
    "${x86_tool[@]}" recall "$work/$f.agentmem" --scalar >"$work/$f.on-x86.scalar" 2>/dev/null
    "${arm_tool[@]}" recall "$work/$f.agentmem" >"$work/$f.on-arm64" 2>/dev/null
    "${arm_tool[@]}" recall "$work/$f.agentmem" --scalar >"$work/$f.on-arm64.scalar" 2>/dev/null
  done
  check "a file written on x86-64 recalls under arm64 what it recalls on x86-64 (scalar kernels, identical scores)" \
    same_results "$work/x86.on-x86.scalar" "$work/x86.on-arm64.scalar" 1
  check "a file written on x86-64 recalls under arm64 what it recalls on x86-64 (widest kernels)" \
    same_results "$work/x86.on-x86" "$work/x86.on-arm64" 0
  check "a file written on arm64 recalls on x86-64 what it recalls under arm64 (scalar kernels, identical scores)" \
    same_results "$work/arm64.on-arm64.scalar" "$work/arm64.on-x86.scalar" 1
  check "a file written on arm64 recalls on x86-64 what it recalls under arm64 (widest kernels)" \
    same_results "$work/arm64.on-arm64" "$work/arm64.on-x86" 0
else
  echo "FAIL writing the cross-architecture files"
  failed=$((failed + 1))
  status=1
fi

echo "make test-arm64 checks took $((SECONDS - start)) s"
echo "arm64: $passed passed, $failed failed"
exit $status
