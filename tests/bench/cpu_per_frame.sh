#!/usr/bin/env bash
# Where veth_bench's gap to the raw AF_XDP ceiling goes: the CPU time (user and kernel, from
# getrusage via /usr/bin/time) that our sending client and the raw sender
# (stack/examples/veth_rate.rs) spend per frame, side by side, over the same veth pair as
# tests/bench/veth_bench.sh (link MTU 4200, copy-mode AF_XDP, the default --spin).
#
# Both senders are CPU-bound there, and in copy mode the kernel does the receiving side's
# work (veth, the XDP program, the copy into the receiver's UMEM) inside the sender's
# `sendto`, so a sender's CPU per frame is what sets its rate: what ours spends beyond the raw
# sender's is the cost of its RoCE work.
#
# Each round runs, in fresh namespaces: our client sending WRITEs of 64 KiB (16 frames of
# 4154 bytes each) and the raw sender of 4154-byte frames (window 2048); then our client
# sending 64-byte SENDs (122-byte frames) and the raw sender of 122-byte frames (window 128).
# Ours: 40,000 WRITEs, 400,000 SENDs; raw: 3 s, its receiver counting for 3 s. Prints each
# pair, then per case the medians of usec per frame (user, kernel) and of the rates.
#
# Usage: sudo tests/bench/cpu_per_frame.sh [ROUNDS (default 5)]
# ROCE_BENCH_NS (default roce-cpu) prefixes the two namespaces' names.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
roce=$here/target/release/roce
rate=$here/target/release/examples/veth_rate
NS=${ROCE_BENCH_NS:-roce-cpu}
A="$NS-a"
B="$NS-b"
rounds=5
case ${1:-} in
  -h | --help)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
    ;;
  '') ;;
  *)
    [[ $1 =~ ^[1-9][0-9]*$ ]] || {
      echo "cpu_per_frame: error: ROUNDS must be a positive integer, got '$1'" >&2
      exit 2
    }
    rounds=$1
    ;;
esac
die() { echo "cpu_per_frame: error: $*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || die "needs root (namespaces, AF_XDP)"
[[ -x /usr/bin/time ]] || die "needs /usr/bin/time (Debian: apt-get install time)"

MTU=4200
# shellcheck source=tests/bench/veth_pair.sh
. "$here/tests/bench/veth_pair.sh"

(cd "$here" && cargo build --release --locked -p roce-tools &&
  cargo build --release --locked -p roce --example veth_rate) >"$work/build.log" 2>&1 ||
  die "build failed (see $work/build.log)"

# usec of user and of kernel time per frame from /usr/bin/time's "%U %S" in file $1.
per_frame() { awk -v n="$2" '{ printf "%.3f %.3f\n", $1 / n * 1e6, $2 / n * 1e6 }' "$1"; }

# ours CASE FRAMES_PER_MESSAGE MESSAGES ARGS...: our server in B, our client in A under
# /usr/bin/time; appends "rate user kernel" (rate in M frames/s) to $work/CASE.
ours() {
  local case=$1 per=$2 msgs=$3 spid
  shift 3
  ip netns exec "$B" "$roce" "$@" --iface xdp:vb --ip 10.88.0.2/24 >"$work/server.log" 2>&1 &
  spid=$!
  until ip netns exec "$B" ss -Hltn 'sport = :18515' | grep -q . || ! kill -0 $spid 2>/dev/null; do
    sleep 0.05
  done
  /usr/bin/time -f "%U %S %e" -o "$work/time" ip netns exec "$A" "$roce" "$@" \
    --iface xdp:va --ip 10.88.0.1/24 10.88.0.2 >"$work/client.log" 2>&1 ||
    die "$case client failed: $(tail -n 3 "$work/client.log")"
  wait $spid || die "$case server failed: $(tail -n 3 "$work/server.log")"
  # perftest's table: MsgRate (M messages/s) is the fifth column.
  local mpps
  mpps=$(awk -v f="$per" '$1 ~ /^[0-9]+$/ && NF >= 5 { printf "%.4f\n", $5 * f }' \
    "$work/client.log" | tail -n 1)
  [[ -n $mpps ]] || die "$case: no result row in the client's output: $(tail -n 3 "$work/client.log")"
  echo "$mpps $(per_frame "$work/time" $((per * msgs)))" >>"$work/$case"
}

# raw CASE SIZE WINDOW: veth_rate's receiver in B for 3 s, its sender in A under
# /usr/bin/time for 3 s; frames counted by the receiver.
raw() {
  local case=$1 size=$2 window=$3 rpid frames secs
  ip netns exec "$B" "$rate" recv xdp:vb 3 >"$work/raw.log" 2>"$work/raw.err" &
  rpid=$!
  until grep -q '^ready' "$work/raw.log" 2>/dev/null; do
    kill -0 $rpid 2>/dev/null || die "raw receiver failed: $(tail -n 3 "$work/raw.err")"
    sleep 0.05
  done
  /usr/bin/time -f "%U %S %e" -o "$work/time" ip netns exec "$A" "$rate" send xdp:va "$size" 3 \
    "$window" 2>"$work/raw.send.err" || die "raw sender failed: $(tail -n 3 "$work/raw.send.err")"
  wait $rpid || die "raw receiver failed: $(tail -n 3 "$work/raw.err")"
  read -r frames _ secs < <(grep -v ready "$work/raw.log")
  # The sender's CPU per frame counts the frames it sent (the receiver may miss some).
  local sent
  sent=$(grep -o 'sent [0-9]*' "$work/raw.send.err" | awk '{ print $2 }')
  echo "$(awk -v f="$frames" -v s="$secs" 'BEGIN { printf "%.4f", f / s / 1e6 }') \
$(per_frame "$work/time" "$sent")" >>"$work/$case"
}

median() {
  sort -g | awk '{ v[NR] = $1 } END { printf "%.3f", (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}

echo "cpu_per_frame: $rounds rounds; usec of CPU per frame sent (user, kernel) and M frames/s"
for round in $(seq "$rounds"); do
  plain
  ours write 16 40000 perf write -s 65536 -n 40000
  raw raw_write 4154 2048
  ours send 1 400000 perf send -s 64 -n 400000
  raw raw_send 122 128
  printf '  round %d:' "$round"
  for case in write raw_write send raw_send; do
    read -r r u k < <(tail -n 1 "$work/$case")
    printf ' %s %s M/s user %s kernel %s;' "$case" "$r" "$u" "$k"
  done
  echo
done
teardown

echo
printf '%-36s %10s %10s %10s\n' "medians" "M frames/s" "user usec" "kernel"
for case in write raw_write send raw_send; do
  case $case in
    write) what="roce RC WRITE 64 KiB (4154-byte frames)" ;;
    raw_write) what="raw AF_XDP, 4154-byte frames" ;;
    send) what="roce RC SEND 64 bytes (122-byte frames)" ;;
    raw_send) what="raw AF_XDP, 122-byte frames" ;;
  esac
  printf '%-36s %10s %10s %10s\n' "$what" \
    "$(awk '{ print $1 }' "$work/$case" | median)" \
    "$(awk '{ print $2 }' "$work/$case" | median)" \
    "$(awk '{ print $3 }' "$work/$case" | median)"
done
