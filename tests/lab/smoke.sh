#!/usr/bin/env bash
# Lab smoke test: two rdma_rxe guests pass ibv_rc_pingpong, and the capture
# holds RC SEND and ACK packets; a serving guest (softroce-lab serve) runs peer commands. Needs root and QEMU (tools/softroce-lab setup
# installs everything else). Prints '2 passed, 0 failed' or fails loudly.
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
# A serving guest: booted once, it runs one peer command after another and gives each its
# exit status; a peer of another MTU is refused; a peer killed before its command ended
# stops the guest (that command might still run), after which peer boots a guest of its own.
t2=$SECONDS
"$lab" serve --ip 10.77.0.13 >"$work/serve.log" 2>&1 || fatal "serve did not boot: $(tail -n1 "$work/serve.log")"
out=$("$lab" peer --ip 10.77.0.13 'echo served-one; ibv_devices') || fatal "peer on the serving guest failed: $out"
grep -q '^served-one$' <<<"$out" && grep -q 'rxe0' <<<"$out" && grep -q 'serving guest' <<<"$out" ||
  fatal "peer on the serving guest: unexpected output: $out"
rc=0
"$lab" peer --ip 10.77.0.13 'exit 3' >/dev/null 2>&1 || rc=$?
((rc == 3)) || fatal "peer on the serving guest: exit status $rc, expected 3"
if out=$("$lab" peer --ip 10.77.0.13 --mtu 9000 true 2>&1); then fatal "a peer of MTU 9000 ran on a guest serving at 1500"; fi
grep -q 'has MTU 1500, not 9000' <<<"$out" || fatal "peer of another MTU: unexpected refusal: $out"
"$lab" peer --ip 10.77.0.13 'sleep 60' >"$work/killed.log" 2>&1 &
pid=$!
until grep -q '^peer: ready' "$work/killed.log"; do
  kill -0 "$pid" 2>/dev/null || fatal "peer 'sleep 60' ended early: $(cat "$work/killed.log")"
  sleep 0.2
done
kill "$pid"
wait "$pid" || true
grep -q 'stopping the guest serving at 10.77.0.13' "$work/killed.log" || fatal "a killed peer did not stop its serving guest: $(cat "$work/killed.log")"
[[ ! -e ${ROCE_LAB_CACHE:-/var/cache/roce-softroce-lab}/serve/10.77.0.13 ]] || fatal "the stopped serving guest is still on record"
out=$("$lab" peer --ip 10.77.0.13 'echo booted-own') || fatal "peer after the serving guest stopped failed: $out"
grep -q '^booted-own$' <<<"$out" && ! grep -q 'serving guest' <<<"$out" || fatal "peer after the serving guest stopped: unexpected output: $out"
"$lab" serve --stop --ip 10.77.0.13 || fatal "serve --stop failed"
echo "lab smoke: serving guest OK ($((SECONDS - t2)) s)"

if [[ $own_net -eq 1 ]]; then
  "$lab" down || fatal "tools/softroce-lab down failed"
  if ip netns list | grep -qw roce-lab; then fatal "namespace roce-lab still exists after down"; fi
else
  echo "lab smoke: namespace roce-lab was in use before the test: not running down"
fi
echo "lab smoke: OK (ibv_rc_pingpong between two rdma_rxe guests, a serving guest; $((SECONDS - t0)) s)"
echo "2 passed, 0 failed"
