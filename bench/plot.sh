#!/usr/bin/env bash
# bench/plot.sh RESULTS_DIR -- PNG plots of the side-by-side bench with gnuplot
# (Debian package gnuplot-nox; `make bench-deps` installs it):
#   latency-vs-n.png          recall p50 of each system (colour) and mode (dash)
#                             against N, from every latency-n<N>.dat
#   recall-vs-latency.png     vector recall@10 against p50 at the largest N:
#                             agentmem, SQLite (exact), hnswlib at ef 64 and its
#                             ef sweep, LanceDB (HNSW-SQ, ef 64) and sqlite-vec
#                             (exact) when the peers ran
set -euo pipefail
dir=${1:-bench/results}
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot not found (make bench-deps)" >&2; exit 1; }
shopt -s nullglob
lat=("$dir"/latency-n*.dat)
[ ${#lat[@]} -gt 0 ] || { echo "plot.sh: no $dir/latency-n*.dat (run the bench first)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One series file per system and mode: "n p50 p99", sorted by n.
cat "${lat[@]}" | grep -v '^#' | awk -v t="$tmp" '{ print $3, $4, $5 > (t "/" $1 "-" $2 ".series") }'
plots=""
for f in "$tmp"/*.series; do
  sort -n "$f" -o "$f"
  name=$(basename "$f" .series)
  case $name in
    agentmem-*) lc='#1a9641' ;; sqlite-vec-*) lc='#fdae61' ;; sqlite-*) lc='#d7191c' ;;
    lancedb-*) lc='#7b3294' ;; *) lc='#2b83ba' ;;
  esac
  case $name in *-hybrid) pt=7 dt=1 ;; *-bm25) pt=5 dt=2 ;; *) pt=9 dt=4 ;; esac
  plots+="'$f' using 1:2 with linespoints lw 2 lc rgb '$lc' pt $pt dt $dt title '$name', "
done
gnuplot <<EOF
set terminal pngcairo size 1000,640
set output '$dir/latency-vs-n.png'
set termoption noenhanced
set title 'recall top-10, p50 latency against N (one thread)'
set xlabel 'episodes (N)'
set ylabel 'p50 latency (ms, log scale)'
set logscale xy
set grid
set key outside right
plot ${plots%, }
EOF

# recall against latency at the largest N
rec=$(ls "$dir"/recall-latency-n*.dat | sed 's/.*-n\([0-9]*\)\.dat/\1 &/' | sort -n | tail -1 | cut -d' ' -f2)
if [ -n "$rec" ]; then
  n=$(basename "$rec" .dat | sed 's/.*-n//')
  grep '^hnswlib-ef ' "$rec" | sort -k2 -n > "$tmp/sweep" || true
  for s in agentmem sqlite hnswlib lancedb sqlite-vec; do grep "^$s " "$rec" > "$tmp/$s.pt" || true; done
  # the peers' points, where they ran
  peers=""
  [ -s "$tmp/lancedb.pt" ] && peers+=", '$tmp/lancedb.pt' using 3:4 with points pt 11 ps 2 lc rgb '#7b3294' title 'LanceDB HNSW-SQ ef 64'"
  [ -s "$tmp/sqlite-vec.pt" ] && peers+=", '$tmp/sqlite-vec.pt' using 3:4 with points pt 13 ps 2 lc rgb '#fdae61' title 'sqlite-vec (exact)'"
  gnuplot <<EOF
set terminal pngcairo size 1000,640
set output '$dir/recall-vs-latency.png'
set termoption noenhanced
set title 'vector top-10: recall@10 against p50 latency, N = $n (384-d clustered)'
set xlabel 'p50 latency (ms, log scale)'
set ylabel 'recall@10 vs exact'
set logscale x
set grid
set key bottom right
plot '$tmp/sweep' using 3:4 with linespoints lw 2 title 'hnswlib, ef sweep', \
     '' using 3:4:(sprintf('ef %d', \$2)) with labels offset 0,1 notitle, \
     '$tmp/hnswlib.pt' using 3:4 with points pt 7 ps 2 title 'hnswlib ef 64', \
     '$tmp/sqlite.pt' using 3:4 with points pt 5 ps 2 title 'SQLite cosine UDF (exact)', \
     '$tmp/agentmem.pt' using 3:4 with points pt 9 ps 2.5 title 'agentmem (ef 64)'$peers
EOF
fi
echo "plot.sh: wrote $dir/latency-vs-n.png and $dir/recall-vs-latency.png"
