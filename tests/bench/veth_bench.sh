#!/usr/bin/env bash
# Our endpoint to our endpoint over a veth pair between two network namespaces, beside
# kernel TCP over the same pair. Needs root and ethtool. Prints one table of medians; the
# namespaces are removed at the end (and on any failure or interrupt).
#
#   goodput: RC WRITE of 64 KiB messages (`roce perf write`, 128 outstanding) over AF_XDP
#            (the receiver sleeping in epoll, then busy polling) and over TAP, and one kernel TCP connection moving the same bytes
#            (stack/examples/tcp_goodput.rs), twice: with the kernel's defaults (TSO/GSO on:
#            64 KiB segments cross the veth whole) and with TSO, GSO and GRO off (every
#            segment at most one MTU, as every one of our frames is)
#   message rate: 64-byte RC SEND over AF_XDP (`roce perf send`)
#   latency: 64-byte RC pingpong over AF_XDP (`roce pingpong`), ibv_rc_pingpong's lines
#
# The machine is noisy (2 cores shared with builds and guests), so every measurement runs
# ROUNDS times, the order of our endpoint and TCP alternating between rounds; the table
# gives medians, and the ratios are the medians of each round's side-by-side ratio.
#
# Topologies (link MTU 4200 everywhere: RoCE's path MTU is 4096 in every case, frames of
# 4174 bytes, which AF_XDP carries as two descriptors (multi-buffer, Linux 6.6); TCP's MSS
# is 4148):
#
#   xdp, tcp:  [roce-bench-a] va 10.88.0.1 <== veth ==> vb 10.88.0.2 [roce-bench-b]
#              AF_XDP on va and vb (native XDP, copy mode); the kernel keeps the addresses,
#              ARP and the TCP of both the out-of-band exchange and the baseline
#   tap:       [a] tap ta (endpoint 10.88.0.11) - bridge bra (10.88.0.1) - va <== veth ==>
#              vb - bridge brb (10.88.0.2) - tap tb (endpoint 10.88.0.12) [b]
#              a TAP joins a link only through a bridge; the endpoints are hosts of their
#              own behind the TAPs, the kernel's addresses on the bridges carry the TCP
#
# Knobs: ROCE_BENCH_ROUNDS (default 5), ROCE_BENCH_ITERS (64 KiB WRITEs, default 20000),
# ROCE_BENCH_MSGS (64-byte SENDs, default 200000), ROCE_BENCH_PINGS (round trips, default
# 20000), ROCE_BENCH_BUSY_POLL=1 (pingpong polls instead of sleeping; on 2 shared cores two
# spinning processes lose more to the scheduler than they gain, so off by default).
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
roce=$here/target/release/roce
tcp=$here/target/release/examples/tcp_goodput
A="roce-bench-a"
B="roce-bench-b"
MTU=4200
ROUNDS=${ROCE_BENCH_ROUNDS:-5}
ITERS=${ROCE_BENCH_ITERS:-20000}
MSGS=${ROCE_BENCH_MSGS:-200000}
PINGS=${ROCE_BENCH_PINGS:-20000}
BUSY=${ROCE_BENCH_BUSY_POLL:+--busy-poll}
SIZE=65536

die() { echo "veth_bench: error: $*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || die "needs root (namespaces, TAP, AF_XDP)"
command -v ethtool >/dev/null || die "needs ethtool (TCP's offloads are switched for the baseline)"

work=$(mktemp -d /tmp/roce-bench.XXXXXX)
teardown() {
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
}
# Background servers die with their namespace's processes only if killed: kill our jobs first.
trap 'kill $(jobs -p) 2>/dev/null || true; teardown; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

(cd "$here" && cargo build --release --locked -p roce-tools &&
  cargo build --release --locked -p roce --example tcp_goodput) >"$work/build.log" 2>&1 ||
  die "build failed: $(tail -n 5 "$work/build.log")"

plain() {
  teardown
  ip netns add "$A"
  ip netns add "$B"
  ip link add va netns "$A" type veth peer name vb netns "$B"
  ip -n "$A" link set lo up
  ip -n "$B" link set lo up
  ip -n "$A" link set va mtu $MTU up
  ip -n "$B" link set vb mtu $MTU up
  ip -n "$A" addr add 10.88.0.1/24 dev va
  ip -n "$B" addr add 10.88.0.2/24 dev vb
}

bridged() {
  plain
  ip -n "$A" addr flush dev va
  ip -n "$B" addr flush dev vb
  for ns_side in "$A a 1" "$B b 2"; do
    read -r ns s n <<<"$ns_side"
    ip -n "$ns" link add "br$s" type bridge forward_delay 0 stp_state 0
    ip -n "$ns" link set "v$s" master "br$s"
    ip -n "$ns" tuntap add mode tap "t$s"
    ip -n "$ns" link set "t$s" mtu $MTU master "br$s" up
    ip -n "$ns" link set "br$s" mtu $MTU up
    ip -n "$ns" addr add "10.88.0.$n/24" dev "br$s"
  done
}

# True (after a pause) if the run logged in $1 found its queue still bound, and attempt $2
# may be followed by another.
busy() {
  grep -q 'resource busy' "$1" && (($2 < 50)) && sleep 0.1
}

# Runs `roce ARGS` as server in B, then as client (of B's kernel address) in A; keeps the
# client's output in $work/$1.log.
pair() {
  local name=$1 server_args=$2 client_args=$3 spid attempt
  # The kernel frees an AF_XDP socket some time after its process exits: until then binding
  # the same queue again fails with EBUSY, so a run that stops there is started again.
  for attempt in $(seq 50); do
    # shellcheck disable=SC2086  # the args are several words
    ip netns exec "$B" "$roce" $server_args >"$work/$name.server.log" 2>&1 &
    spid=$!
    until ip netns exec "$B" ss -Hltnp 'sport = :18515' | grep -q "pid=$spid," ||
      ! kill -0 $spid 2>/dev/null; do
      sleep 0.1
    done
    if kill -0 $spid 2>/dev/null || ! busy "$work/$name.server.log" "$attempt"; then
      break
    fi
    wait $spid || true
  done
  for attempt in $(seq 50); do
    # shellcheck disable=SC2086
    ip netns exec "$A" "$roce" $client_args 10.88.0.2 >"$work/$name.log" 2>&1 && break
    busy "$work/$name.log" "$attempt" && continue
    kill $spid 2>/dev/null || true
    die "$name client failed: $(tail -n 3 "$work/$name.log")
server: $(tail -n 3 "$work/$name.server.log")"
  done
  wait $spid || die "$name server failed: $(tail -n 3 "$work/$name.server.log")"
}

# BW average (MiB/s, perftest's MB) of a perftest table in a log -> Gb/s.
gbps() { awk -v s=$SIZE '$1 == s { printf "%.2f\n", $4 * 1048576 * 8 / 1e9 }' "$1"; }
mpps() { awk '$1 == 64 { printf "%.3f\n", $5 }' "$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f\n", (b > 0 ? a / b : 0) }'; }
# Median of the numbers in file $1, printed with format $2 (default %.2f).
median() {
  sort -g "$1" | awk -v f="${2:-%.2f}" '{ v[NR] = $1 }
    END { printf f, (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}

# RC WRITE over AF_XDP; $1 names the case, the rest are more arguments of the server.
xdp_write() {
  local case=$1
  shift
  pair xdp_write "perf write --iface xdp:vb --ip 10.88.0.2/24 -s $SIZE -n $ITERS $*" \
    "perf write --iface xdp:va --ip 10.88.0.1/24 -s $SIZE -n $ITERS"
  gbps "$work/xdp_write.log" | tee -a "$work/$case" >"$work/$case.last"
}

# One TCP connection; $1 names the case, "off" switches TSO, GSO and GRO off on both ends.
tcp_run() {
  local case=$1 state=on
  [[ $case == tcp_off ]] && state=off
  ip netns exec "$A" ethtool -K va tso $state gso $state gro $state
  ip netns exec "$B" ethtool -K vb tso $state gso $state gro $state
  ip netns exec "$B" "$tcp" recv 18600 >"$work/tcp.log" &
  local tpid=$!
  until ip netns exec "$B" ss -Hltnp 'sport = :18600' | grep -q "pid=$tpid," ||
    ! kill -0 $tpid 2>/dev/null; do
    sleep 0.1
  done
  ip netns exec "$A" "$tcp" send 10.88.0.2:18600 $SIZE "$ITERS" || die "TCP sender failed"
  wait $tpid || die "TCP receiver failed"
  awk '{ printf "%.2f\n", $1 * 8 / $2 / 1e9 }' "$work/tcp.log" | tee -a "$work/$case" >"$work/$case.last"
}

echo "veth_bench: $ROUNDS rounds of $ITERS RC WRITEs of $SIZE bytes (and the same bytes over TCP),"
echo "  $MSGS SENDs of 64 bytes, $PINGS round trips; link MTU $MTU, RoCE path MTU 4096, TCP MSS $((MTU - 52))"

for round in $(seq "$ROUNDS"); do
  plain
  if ((round % 2)); then
    xdp_write xdp
    xdp_write xdp_busy --busy-poll
    tcp_run tcp
    tcp_run tcp_off
  else
    tcp_run tcp_off
    tcp_run tcp
    xdp_write xdp_busy --busy-poll
    xdp_write xdp
  fi
  for case in xdp xdp_busy; do
    ratio "$(cat "$work/$case.last")" "$(cat "$work/tcp.last")" >>"$work/${case}_tcp"
    ratio "$(cat "$work/$case.last")" "$(cat "$work/tcp_off.last")" >>"$work/${case}_tcp_off"
  done

  pair xdp_send "perf send --iface xdp:vb --ip 10.88.0.2/24 -s 64 -n $MSGS" \
    "perf send --iface xdp:va --ip 10.88.0.1/24 -s 64 -n $MSGS"
  mpps "$work/xdp_send.log" >>"$work/rate"
  # shellcheck disable=SC2086
  pair xdp_ping "pingpong --iface xdp:vb --ip 10.88.0.2/24 -s 64 -n $PINGS $BUSY" \
    "pingpong --iface xdp:va --ip 10.88.0.1/24 -s 64 -n $PINGS $BUSY"
  usec=$(awk '/iters in/ { print $(NF - 1) }' "$work/xdp_ping.log")
  echo "$usec" >>"$work/ping"
  cp "$work/xdp_ping.log" "$work/ping.$usec"

  bridged
  pair tap_write "perf write --iface tap:tb --ip 10.88.0.12/24 -s $SIZE -n $ITERS" \
    "perf write --iface tap:ta --ip 10.88.0.11/24 -s $SIZE -n $ITERS"
  tap=$(gbps "$work/tap_write.log")
  echo "$tap" >>"$work/tap"
  ratio "$tap" "$(cat "$work/tcp.last")" >>"$work/tap_tcp"
  ratio "$tap" "$(cat "$work/tcp_off.last")" >>"$work/tap_tcp_off"
  echo "  round $round: xdp $(cat "$work/xdp.last") xdp-busy $(cat "$work/xdp_busy.last") tap $tap tcp $(cat "$work/tcp.last")" \
    "tcp-no-offload $(cat "$work/tcp_off.last") Gb/s, $(tail -n 1 "$work/rate") Mpps, $usec usec/iter"
done
teardown

row() { printf '%-46s %8s %10s %16s\n' "$@"; }
echo
row "goodput, $SIZE-byte messages (median)" "Gb/s" "vs TCP" "vs TCP no-offload"
row "kernel TCP, one connection (TSO/GSO on)" "$(median "$work/tcp")" "1.00" ""
row "kernel TCP, TSO/GSO/GRO off" "$(median "$work/tcp_off")" "" "1.00"
row "roce RC WRITE over AF_XDP" "$(median "$work/xdp")" "$(median "$work/xdp_tcp")" \
  "$(median "$work/xdp_tcp_off")"
row "roce RC WRITE over AF_XDP, receiver busy-polls" "$(median "$work/xdp_busy")" \
  "$(median "$work/xdp_busy_tcp")" "$(median "$work/xdp_busy_tcp_off")"
row "roce RC WRITE over TAP (bridged)" "$(median "$work/tap")" "$(median "$work/tap_tcp")" \
  "$(median "$work/tap_tcp_off")"
echo
printf '%-46s %8s\n' "message rate, 64-byte RC SEND over AF_XDP" "$(median "$work/rate" %.3f) M msg/s"
echo
echo "latency, 64-byte RC pingpong over AF_XDP${BUSY:+ (busy polling)}, client, median run:"
# The run whose usec/iter is the median (the lower middle one for an even count).
mid=$(sort -g "$work/ping" | sed -n "$(((ROUNDS + 1) / 2))p")
grep -E 'bytes in|iters in' "$work/ping.$mid"
