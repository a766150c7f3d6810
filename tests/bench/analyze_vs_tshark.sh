#!/usr/bin/env bash
# `roce analyze` beside tshark on the same capture, in one run.
# Targets: roce analyze >= 5 M frames/s and >= 100x faster than tshark extracting the RoCE
# fields of every frame (issue 7 on the million-frame capture; issue 14 on 1 KiB frames).
#
# Usage: tests/bench/analyze_vs_tshark.sh [FRAMES (default 1000000)] [--1k]
#
# The capture (target/bench/analyze-FRAMES.pcap, not committed) is made from the real
# captures in pcaps/, repeated with PSNs moved on each round (tests/src/bench.rs). With
# --1k it is made from pcaps/rc_write_64k.pcap alone (913 bytes a frame on average), every
# round a connection of its own (QPNs moved), as issue 14's target asks
# (target/bench/analyze-1k-FRAMES.pcap).
#
# Before every timed run of any program the file is dropped from the page cache and read
# back (`dd iflag=nocache count=0`, then `cat`): the page cache then holds it as it holds
# any capture read from disk (in folios as large as readahead makes them, up to 2 MiB with
# this VM's 8 MiB read_ahead_kb, which the kernel maps into a process a PMD at a time).
# Without the drop, a capture written moments ago stays cached in the 4 KiB pages of its
# writer, each mapped and unmapped on its own, and every reader of the file pays that: for
# roce analyze on 1 KiB frames it was a third of the time. (And these VMs drop an idle
# file's page cache within seconds anyway, so the state of an undropped file is chance.)
#
# The programs run in rounds, each round every command once in turn, so that a change in the
# machine's load hits them all alike (it is shared with builds): 10 rounds (tshark in 3 of
# them). Figures are medians of wall time and of CPU time (user + system, all threads).
# `roce analyze` runs as users run it (two threads where there are two cores: one reads
# records, one analyses), and with `--threads 1` for the one-core figure; tshark's own work
# is on one thread. The ceiling is `touch_capture` (tests/examples/touch_capture.rs): the
# same mapped reader walking every record and adding up every byte of every frame, and
# nothing else, the least any analysis that checks every ICRC has to do.
#
# BEFORE=PATH (another build of roce, say of an earlier commit) adds it to every round,
# `analyze --json` as above, for a before/after comparison in the same run.
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
rounds=10
tshark_rounds=3

cargo build --release -q -p roce-tools
cargo build --release -q -p roce-tests --example bench_capture --example touch_capture
if [[ ! -s $file ]]; then
  mkdir -p target/bench
  target/release/examples/bench_capture $mode "$file" "$frames"
fi

roce_cmd="target/release/roce analyze --json $file"
roce1_cmd="target/release/roce analyze --json --threads 1 $file"
touch_cmd="target/release/examples/touch_capture $file"
tshark_cmd="tshark -r $file -T fields -e ip.src -e ip.dst -e infiniband.bth.destqp -e infiniband.bth.psn -e infiniband.bth.opcode -e infiniband.aeth.syndrome"

# The analysis must have seen every frame, or the timing means nothing.
seen=$($roce_cmd | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["roce_packets"])' || true)
if [[ $seen != "$frames" ]]; then
  echo "analyze_vs_tshark: roce analyze saw $seen RoCEv2 frames of $frames" >&2
  exit 1
fi

before_cmd=${BEFORE:+$BEFORE analyze --json $file}
python3 - "$file" "$frames" "$rounds" "$tshark_rounds" "$roce_cmd" "$roce1_cmd" "$touch_cmd" \
  "$tshark_cmd" "$before_cmd" <<'PY'
import os, statistics, subprocess, sys, time

path, frames, rounds, tshark_rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
names = ["roce", "roce1", "touch", "tshark", "before"]
cmds = dict(zip(names, (c.split() for c in sys.argv[5:10])))
if not cmds["before"]:
    names.remove("before")

def prepare():
    # Out of the page cache, then back in as a file read from disk is.
    subprocess.run(["dd", f"if={path}", "iflag=nocache", "count=0", "status=none"], check=True)
    subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)

def timed(cmd):
    prepare()
    start = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        sys.exit(f"analyze_vs_tshark: {' '.join(cmd)} failed ({status})")
    return wall, usage.ru_utime + usage.ru_stime

for name in names:  # warm-up: the binaries into the page cache
    if name != "tshark":
        timed(cmds[name])
runs = {n: [] for n in names}
for r in range(rounds):
    # Each round starts with the next command: a command's place in the round matters (with
    # BEFORE set to a copy of the same build, the fixed order measured it 1.09x slower).
    for n in names[r % len(names):] + names[:r % len(names)]:
        if n != "tshark" or r < tshark_rounds:
            runs[n].append(timed(cmds[n]))

wall = {n: statistics.median(w for w, _ in runs[n]) for n in names}
cpu = {n: statistics.median(c for _, c in runs[n]) for n in names}
size = os.path.getsize(path)
rate = lambda s: frames / s / 1e6
print(f"capture: {frames} RoCEv2 frames, {size / 1e6:.0f} MB ({size / frames:.0f} bytes a frame); "
      f"medians of {rounds} rounds ({tshark_rounds} for tshark), file dropped and re-read before each run")
print(f"roce analyze:             {wall['roce']:.3f} s wall, {cpu['roce']:.3f} s CPU (both threads): "
      f"{rate(wall['roce']):.2f} M frames/s, {size / wall['roce'] / 1e9:.2f} GB/s (target >= 5 M frames/s)")
print(f"roce analyze --threads 1: {wall['roce1']:.3f} s wall, {cpu['roce1']:.3f} s CPU: "
      f"{rate(cpu['roce1']):.2f} M frames/s on one core")
print(f"ceiling (touch_capture):  {wall['touch']:.3f} s wall, {cpu['touch']:.3f} s CPU: "
      f"{rate(wall['touch']):.2f} M frames/s; roce analyze takes {wall['roce'] / wall['touch']:.1f}x its wall time")
if "before" in names:
    print(f"before (BEFORE=...):      {wall['before']:.3f} s wall, {cpu['before']:.3f} s CPU: "
          f"{rate(wall['before']):.2f} M frames/s; now {wall['before'] / wall['roce']:.2f}x as fast")
print(f"tshark fields:            {wall['tshark']:.3f} s wall, {cpu['tshark']:.3f} s CPU: "
      f"{rate(wall['tshark']):.3f} M frames/s")
print(f"ratio: roce analyze is {wall['tshark'] / wall['roce']:.0f}x faster than tshark by wall time "
      f"(target >= 100x); {wall['tshark'] / wall['roce1']:.0f}x on one thread; "
      f"{cpu['tshark'] / cpu['roce1']:.0f}x by CPU time on one thread")
PY
