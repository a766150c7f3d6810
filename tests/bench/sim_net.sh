#!/usr/bin/env bash
# `roce sim net` speed (issue 18), a benchmark that prints figures, not a test:
#   (b) 2:1 incast at 40 Gb/s, DCQCN (the paper's parameters) and PFC, 1 s simulated;
#       target < 1 s on one core (the DCQCN authors' ns-3 takes "a few minutes");
#   a 4x4x16 leaf-spine (64 hosts, every link 100 Gb/s), WebSearch at 30 % load, DCQCN (as the
#       HPCC authors ran it), 100 ms simulated; target < 60 s on one core.
# Each runs RUNS times; the medians of the simulation's wall time and of its thread's CPU
# time (what one core spends, whatever else the machine runs) are printed with events/s.
#
# Usage: tests/bench/sim_net.sh [RUNS (default 3)] [which: all|incast|leafspine]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
runs=${1:-3}
which=${2:-all}
cargo build --release -q -p roce-tools --bin roce
roce=target/release/roce

median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

bench() {
  local name=$1 target=$2
  shift 2
  local out walls=() cpus=() events=
  for _ in $(seq "$runs"); do
    out=$("$roce" sim net --json "$@" | jq -c '{events, wall_s, cpu_s}')
    events=$(jq .events <<<"$out")
    walls+=("$(jq .wall_s <<<"$out")")
    cpus+=("$(jq .cpu_s <<<"$out")")
  done
  local wall cpu
  wall=$(printf '%s\n' "${walls[@]}" | median)
  cpu=$(printf '%s\n' "${cpus[@]}" | median)
  printf '%-52s median of %s: wall %6.2f s, CPU %6.2f s (target < %s s), %s events, %.1f M events/s of CPU\n' \
    "$name" "$runs" "$wall" "$cpu" "$target" "$events" "$(echo "$events / $cpu / 1000000" | bc -l)"
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
if [[ $which == all || $which == incast ]]; then
  bench "(b) incast:2, 40 Gb/s, DCQCN paper, PFC, 1 s" 1 \
    --topology incast:2 --link-gbps 40 --cc dcqcn --duration-ms 1000 --ack-every 256
  bench "    the same, an ACK per packet" 1 \
    --topology incast:2 --link-gbps 40 --cc dcqcn --duration-ms 1000
fi
if [[ $which == all || $which == leafspine ]]; then
  bench "leafspine:4,4,16, 100 Gb/s, WebSearch 30%, 100 ms" 60 \
    --topology leafspine:4,4,16 --link-gbps 100 --workload websearch --load 0.3 \
    --cc dcqcn --preset ns3 --duration-ms 100
fi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
