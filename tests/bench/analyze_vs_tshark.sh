#!/usr/bin/env bash
# `roce analyze` beside tshark on the same capture of about a million RoCEv2 frames, in one run.
# Issue 7's targets: roce analyze >= 5 M frames/s on one core, and >= 100x faster than tshark
# extracting the RoCE fields of every frame.
#
# Usage: tests/bench/analyze_vs_tshark.sh [FRAMES (default 1000000)] [--1k]
#
# The capture (target/bench/analyze-FRAMES.pcap, not committed) is made from the real
# captures in pcaps/, repeated with PSNs moved on each round (tests/src/bench.rs). With
# --1k it is made from pcaps/rc_write_64k.pcap alone (1090-byte frames), every round a
# connection of its own (QPNs moved), as issue 14's target asks (target/bench/analyze-1k-FRAMES.pcap). Every run
# of either program starts with the file read into the page cache (on these VMs the cache
# loses an idle file within seconds). With hyperfine (apt package `hyperfine`) the figures
# are its medians of wall time, and its means of user+system CPU time; without it, medians
# of repeated /usr/bin/time runs.
#
# `roce analyze` runs as users run it (on two threads where there are two cores: one reads
# records, one analyses) for the comparison with tshark, and with `--threads 1` for the
# one-core figure. tshark's own work is on one thread.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
frames=${1:-1000000}
mode=${2:-}
case $mode in
  '') file=target/bench/analyze-$frames.pcap ;;
  --1k) file=target/bench/analyze-1k-$frames.pcap ;;
  *) echo "usage: $0 [FRAMES] [--1k]" >&2; exit 2 ;;
esac
roce_runs=10
tshark_runs=3

cargo build --release -q -p roce-tools -p roce-tests --example bench_capture
if [[ ! -s $file ]]; then
  mkdir -p target/bench
  target/release/examples/bench_capture $mode "$file" "$frames"
fi
cat "$file" >/dev/null

roce_cmd="target/release/roce analyze --json $file"
roce1_cmd="target/release/roce analyze --json --threads 1 $file"
tshark_cmd="tshark -r $file -T fields -e ip.src -e ip.dst -e infiniband.bth.destqp -e infiniband.bth.psn -e infiniband.bth.opcode -e infiniband.aeth.syndrome"

# The analysis must have seen every frame, or the timing means nothing.
seen=$($roce_cmd | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["roce_packets"])' || true)
if [[ $seen != "$frames" ]]; then
  echo "analyze_vs_tshark: roce analyze saw $seen RoCEv2 frames of $frames" >&2
  exit 1
fi

# Prints "WALL_MEDIAN CPU" in seconds for `runs` runs of a command (output discarded).
measure() {
  local runs=$1 cmd=$2
  if command -v hyperfine >/dev/null; then
    local json
    json=$(mktemp)
    hyperfine --runs "$runs" --warmup 1 --style none --export-json "$json" \
      --prepare "cat $file" --output null "$cmd" >/dev/null 2>&1
    python3 - "$json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
print(r["median"], r["user"] + r["system"])
PY
    rm -f "$json"
  else
    local i
    for ((i = 0; i < runs; i++)); do
      cat "$file" >/dev/null
      /usr/bin/time -f '%e %U %S' $cmd 2>&1 >/dev/null | tail -1
    done | python3 -c '
import statistics, sys
rows = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
print(statistics.median(r[0] for r in rows), statistics.median(r[1] + r[2] for r in rows))'
  fi
}

read -r roce_wall roce_cpu < <(measure $roce_runs "$roce_cmd")
read -r roce1_wall roce1_cpu < <(measure $roce_runs "$roce1_cmd")
read -r tshark_wall tshark_cpu < <(measure $tshark_runs "$tshark_cmd")

python3 - "$frames" "$roce_wall" "$roce_cpu" "$roce1_wall" "$roce1_cpu" "$tshark_wall" \
  "$tshark_cpu" "$(stat -c %s "$file")" <<'PY'
import sys
frames = int(sys.argv[1])
rw, rc, r1w, r1c, tw, tc = map(float, sys.argv[2:8])
size = int(sys.argv[8])
print(f"capture: {frames} RoCEv2 frames, {size / 1e6:.0f} MB ({size / frames:.0f} bytes a frame)")
print(f"roce analyze --threads 1: {r1w:.3f} s wall (median), {r1c:.3f} s CPU: "
      f"{frames / r1c / 1e6:.2f} M frames/s on one core (target >= 5)")
print(f"roce analyze: {rw:.3f} s wall (median), {rc:.3f} s CPU (both threads): "
      f"{frames / rw / 1e6:.2f} M frames/s")
print(f"tshark fields: {tw:.3f} s wall (median), {tc:.3f} s CPU: {frames / tw / 1e6:.3f} M frames/s")
print(f"ratio: roce analyze is {tw / rw:.0f}x faster than tshark by wall time "
      f"(target >= 100x); {tw / r1w:.0f}x on one thread; {tc / r1c:.0f}x by CPU time on one thread")
PY
