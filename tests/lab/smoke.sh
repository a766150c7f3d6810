#!/usr/bin/env bash
# Lab smoke test: two rdma_rxe guests pass ibv_rc_pingpong, and the capture
# holds RC SEND and ACK packets. Needs root and QEMU (tools/softroce-lab setup
# installs everything else). Prints '1 passed, 0 failed' or fails loudly.
set -euo pipefail
suite="lab smoke"
# shellcheck source=tests/lab/preamble.sh
. "$(dirname "$0")/preamble.sh"
suite_args "$@"
need_lab
command -v apt-get >/dev/null || command -v qemu-system-x86_64 >/dev/null ||
  fatal "neither apt-get nor qemu-system-x86_64: cannot get QEMU"

# 'down' at the end, unless the lab network was already in use (another user's peer)
own_net=1
if ip netns list 2>/dev/null | grep -qw roce-lab; then own_net=0; fi
work=$(mktemp -d)
trap 'if [[ $own_net -eq 1 ]]; then "$lab" down >/dev/null 2>&1 || true; fi; rm -rf "$work"' EXIT
t0=$SECONDS
"$lab" setup || fatal "tools/softroce-lab setup failed"
echo "lab smoke: setup took $((SECONDS - t0)) s"
for c in qemu-system-x86_64 tshark; do
  command -v "$c" >/dev/null || fatal "$c still missing after setup"
done

pcap=$work/rc_pingpong.pcap
t1=$SECONDS
# shellcheck disable=SC2016  # $SERVER expands in the client guest
if ! "$lab" capture "$pcap" --timeout 120 \
  'ibv_rc_pingpong -g 1 -n 10 -s 64' 'ibv_rc_pingpong -g 1 -n 10 -s 64 $SERVER' | tee "$work/capture.log"; then
  fatal "ibv_rc_pingpong between two rxe guests did not pass (see output above)"
fi
echo "lab smoke: capture took $((SECONDS - t1)) s"
grep -q '^== server: exit 0$' "$work/capture.log" || fatal "server did not exit 0"
grep -q '^== client: exit 0$' "$work/capture.log" || fatal "client did not exit 0"
[[ -s $pcap ]] || fatal "no capture written"
[[ $(head -c4 "$pcap" | od -An -tx1 | tr -d ' \n') == d4c3b2a1 ]] || fatal "capture is not in pcap format"
sends=$(tshark -r "$pcap" -Y 'infiniband.bth.opcode == 4' 2>/dev/null | wc -l)
acks=$(tshark -r "$pcap" -Y 'infiniband.bth.opcode == 17' 2>/dev/null | wc -l)
echo "lab smoke: RC SEND_ONLY $sends, RC ACKNOWLEDGE $acks"
((sends >= 20)) || fatal "expected >= 20 RC SEND_ONLY packets, found $sends"
((acks >= 1)) || fatal "expected RC ACKNOWLEDGE packets, found none"
if command -v python3 >/dev/null; then
  python3 "$here/tests/lab/check-icrc.py" "$pcap" || fatal "ICRC check of the capture failed"
fi
if [[ $own_net -eq 1 ]]; then
  "$lab" down || fatal "tools/softroce-lab down failed"
  if ip netns list | grep -qw roce-lab; then fatal "namespace roce-lab still exists after down"; fi
else
  echo "lab smoke: namespace roce-lab was in use before the test: not running down"
fi
echo "lab smoke: OK (ibv_rc_pingpong between two rdma_rxe guests, $((SECONDS - t0)) s)"
echo "1 passed, 0 failed"
