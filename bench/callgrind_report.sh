#!/usr/bin/env bash
# bench/callgrind_report.sh DUMP_DIR OUT.md -- summarises the dumps of
# `recall_bench --callgrind` run under valgrind --tool=callgrind
# --collect-atstart=no (make bench-callgrind): instructions per operation for
# each system and phase, and agentmem's hottest functions (self cost) for
# each phase. Instruction counts do not move with the load of a shared
# machine, unlike wall-clock time.
set -euo pipefail
dir=$1
out=$2
shopt -s nullglob
files=()
for f in "$dir"/callgrind.out.*; do
  grep -aq '^desc: Trigger: Client Request: ' "$f" && files+=("$f")
done
[ ${#files[@]} -gt 0 ] || { echo "callgrind_report.sh: no client-request dumps in $dir" >&2; exit 1; }
cmd=$(grep -a -m1 '^cmd:' "${files[0]}" | sed 's/^cmd: *//')
{
  echo "# Instruction counts (valgrind --tool=callgrind)"
  echo
  echo "$(date -u '+%Y-%m-%d %H:%M UTC') · commit $(git rev-parse --short HEAD 2>/dev/null || echo '?') · \`$cmd\`"
  echo
  echo "Counted: only the bracketed operations (ingest: Begin/Add/Commit of the last batch of 1,000, into a store already holding the rest; no close;"
  echo "recall: the recall call and reading every hit, after 10 warm-up queries). Instructions are"
  echo "the same on a loaded machine; cache misses and fdatasync waits are not in them."
  echo
  echo "| system | phase | operations | instructions | instructions / operation |"
  echo "|---|---|---:|---:|---:|"
  for f in "${files[@]}"; do
    read -r sys phase ops < <(grep -a -m1 '^desc: Trigger: Client Request: ' "$f" | sed 's/^desc: Trigger: Client Request: //')
    ir=$(grep -a -m1 '^totals:' "$f" | awk '{print $2}')
    echo "$sys|$phase|$ops|$ir"
  done | sort -t'|' -k2,2 -k1,1 | awk -F'|' '
    function sep(n,  s, o) { s = sprintf("%.0f", n); o = ""; while (length(s) > 3) { o = "," substr(s, length(s) - 2) o; s = substr(s, 1, length(s) - 3) } return s o }
    { printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, sep($4), sep($3 > 0 ? $4 / $3 : 0) }'
  echo
  echo "## agentmem: hottest functions by self cost, per phase"
  for f in "${files[@]}"; do
    read -r sys phase ops < <(grep -a -m1 '^desc: Trigger: Client Request: ' "$f" | sed 's/^desc: Trigger: Client Request: //')
    [ "$sys" = agentmem ] || continue
    echo
    echo "### $phase ($ops operations)"
    echo
    echo "| share | instructions | function |"
    echo "|---:|---:|---|"
    # self cost: cost lines of each fn= block, except the inclusive cost
    # that follows a calls= line (needs --compress-strings=no)
    awk '/^fn=/ { fn = substr($0, 4); next }
         /^calls=/ { skip = 1; next }
         /^[0-9+-]/ { if (skip) { skip = 0; next } self[fn] += $2; total += $2; next }
         END { for (k in self) printf "%.0f\t%.1f\t%s\n", self[k], 100 * self[k] / total, k }' "$f" |
      sort -rn | awk 'NR <= 12' |
      awk -F'\t' '
        function sep(n,  s, o) { s = sprintf("%.0f", n); o = ""; while (length(s) > 3) { o = "," substr(s, length(s) - 2) o; s = substr(s, 1, length(s) - 3) } return s o }
        { printf "| %s%% | %s | `%s` |\n", $2, sep($1), $3 }' |
      sed -E 's/std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >/std::string/g; s/std::basic_string_view<char, std::char_traits<char> >/std::string_view/g'
  done
} > "$out"
echo "callgrind_report.sh: wrote $out"
