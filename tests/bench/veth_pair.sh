# shellcheck shell=bash
# Sourced by the veth benches (veth_bench.sh, cpu_per_frame.sh): namespaces $A and $B joined
# by a veth pair (va in A, 10.88.0.1/24; vb in B, 10.88.0.2/24; MTU $MTU), and the work
# directory $work, all removed when the script exits.

work=$(mktemp -d /tmp/roce-bench.XXXXXX)
teardown() {
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
}
# Background servers die with their namespace's processes only if killed: kill our jobs first.
trap 'kill $(jobs -p) 2>/dev/null || true; teardown; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

# A fresh pair (the previous one removed first).
plain() {
  teardown
  ip netns add "$A"
  ip netns add "$B"
  ip link add va netns "$A" type veth peer name vb netns "$B"
  ip -n "$A" link set lo up
  ip -n "$B" link set lo up
  ip -n "$A" link set va mtu "$MTU" up
  ip -n "$B" link set vb mtu "$MTU" up
  ip -n "$A" addr add 10.88.0.1/24 dev va
  ip -n "$B" addr add 10.88.0.2/24 dev vb
}
