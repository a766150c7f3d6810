#!/usr/bin/env bash
# `roce view` on a capture of a million RoCEv2 frames: how long the page takes to write, how
# big it is, and how quickly headless chromium opens it and answers a click
# (tests/browser/view_bench.py). A benchmark that prints figures, not a test.
#
# Usage: tests/bench/view_1m.sh [FRAMES (default 1000000)] [RUNS (default 3)]
# The capture is the one analyze_vs_tshark.sh uses (target/bench/analyze-FRAMES.pcap, made
# from pcaps/ with PSNs moved on each round). Needs chromium, chromium-driver and
# python3-selenium (tests/browser/run.sh installs them).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
frames=${1:-1000000}
runs=${2:-3}
file=target/bench/analyze-$frames.pcap

cargo build --release -q -p roce-tools --bin roce
cargo build --release -q -p roce-tests --example bench_capture
if [[ ! -s $file ]]; then
  mkdir -p target/bench
  target/release/examples/bench_capture "$file" "$frames"
fi
for count in 20000 100000; do
  page=target/bench/view-$frames-$count.html
  cat "$file" >/dev/null
  start=$(date +%s.%N)
  target/release/roce view "$file" --count "$count" -o "$page" >/dev/null
  end=$(date +%s.%N)
  printf 'roce view --count %s: %.2f s to write, %s bytes (%.0f per frame of the page)\n' \
    "$count" "$(echo "$end - $start" | bc)" "$(stat -c %s "$page")" \
    "$(echo "$(stat -c %s "$page") / $count" | bc)"
  /usr/bin/python3 tests/browser/view_bench.py "$page" "$runs"
done
