#!/usr/bin/env bash
# `roce analyze` on captures shaped to cost it the most (issue 14), side by side in one run:
# - 200,000 one-packet flows (58-byte RC SENDs, each to a QP of its own): target under 1 GB
#   and under 1 s;
# - 200,000 flows of five packets that make each flow take on all it can (about 12 KB each):
#   --max-memory (default 384 MiB) must keep the whole run under 1 GB;
# - a CNP flood (N requests on N QPs, then N CNPs on N other QPs, each looking for its
#   reverse among the unpaired flows) and an rdma_cm flood (N REQs, then a REP each), at N
#   and 2N (the rdma_cm one at 30,000 at most): linear time means the 2N run takes about
#   twice as long (quadratic: four times).
#
# Usage: tests/bench/analyze_hostile.sh [N (default 100000)]
#
# Captures are written to target/bench/hostile-*.pcap (not committed) by
# `cargo run --release -p roce-tests --example bench_capture -- --flows|--cnp|--cm OUT N`.
# Figures are medians of 3 runs of `roce analyze --json --threads 1`, each after reading the
# file into the page cache: CPU time (user + system; wall time on a shared machine says more
# about the others' load) and peak resident memory (/usr/bin/time).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
n=${1:-100000}
runs=3
cargo build --release -q -p roce-tools
cargo build --release -q -p roce-tests --example bench_capture
mkdir -p target/bench

capture() { # MODE N -> path
  local file=target/bench/hostile$1-$2.pcap
  [[ -s $file ]] || target/release/examples/bench_capture "$1" "$file" "$2" >/dev/null
  echo "$file"
}

# Prints "CPU_MEDIAN_S PEAK_RSS_MB" for `roce analyze` on FILE.
measure() {
  local file=$1 i
  for ((i = 0; i < runs; i++)); do
    cat "$file" >/dev/null
    /usr/bin/time -f '%U %S %M' target/release/roce analyze --json --threads 1 "$file" 2>&1 >/dev/null | tail -1
  done | python3 -c '
import statistics, sys
rows = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
print(statistics.median(r[0] + r[1] for r in rows), statistics.median(r[2] for r in rows) / 1024)'
}

flows=$(capture --flows 200000)
read -r w m < <(measure "$flows")
printf '200000 one-packet flows (%s bytes): %.2f s CPU, %.0f MB peak (targets: < 1 s, < 1024 MB)\n' \
  "$(stat -c %s "$flows")" "$w" "$m"
fat=$(capture --fat 200000)
read -r w m < <(measure "$fat")
printf '200000 flows of five packets (%s bytes): %.2f s CPU, %.0f MB peak (target: < 1024 MB)\n' \
  "$(stat -c %s "$fat")" "$w" "$m"
# The rdma_cm flood stays under the tracker's 65,536 connections at 2N.
for mode in --cnp --cm; do
  m=$n
  [[ $mode == --cm ]] && ((m > 30000)) && m=30000
  small=$(capture $mode "$m")
  big=$(capture $mode $((2 * m)))
  read -r w1 m1 < <(measure "$small")
  read -r w2 m2 < <(measure "$big")
  python3 -c "
n, w1, w2, m1, m2 = $m, $w1, $w2, $m1, $m2
print(f'${mode#--} flood: N={n}: {w1:.2f} s CPU, {m1:.0f} MB; 2N: {w2:.2f} s, {m2:.0f} MB; '
      f'time ratio 2N/N {w2 / max(w1, 0.01):.1f} (linear 2, quadratic 4)')"
done
