#!/usr/bin/env bash
# The conformance suite in CI: `roce conform` (on tap:roce0, 10.77.0.2, in the SoftRoCE lab's
# namespace) against
#   rxe:  rdma_rxe in a lab guest (10.77.0.11) behind tools/conform-agent (built into the guest
#         by tools/softroce-lab setup from tools/conform-agent/conform-agent.c), and
#   roce: our own endpoint behind `roce conform-agent` (tap:roce1 on the lab's bridge,
#         10.77.0.3, DCQCN on (mlx5 parameters at 100 Mb/s: the pacing, not the TAP path,
#         sets its rate, so that the CNP checks apply and a READ's responses take time;
#         busy polling, as sleeping in epoll rounds each pacing gap up to a millisecond).
# Each run's results must equal the expected ones recorded beside this script
# (expected-rxe.txt, expected-roce.txt; `roce conform --expect`): a result that changes on
# either side fails CI, and the change is printed. Before each suite the agent is fed every line
# of malformed.txt and a 20000-byte line: each must be answered ERR, and the agent must still
# answer `hello` afterwards (it never crashes on bad input).
#
# Needs root and QEMU (tools/softroce-lab setup installs the rest, libibverbs-dev and gcc
# included). Prints `conform: N passed, M failed` (one per side) and exits 1 if any failed.
# ROCE_CONFORM_ONLY=rxe|roce runs one side; logs, JSON, JUnit and pcapng captures (packet
# comments name each frame's check) stay in $ROCE_CONFORM_LOGS (default a temporary directory).
set -uo pipefail
suite=conform
# shellcheck source=tests/lab/preamble.sh
. "$(dirname "$0")/../lab/preamble.sh"
suite_args "$@"
NS=roce-lab
OURS=(--iface tap:roce0 --ip 10.77.0.2/24)
RXE_IP=10.77.0.11
ROCE_IP=10.77.0.3
PORT=7471
SUITE_LIMIT=900

need_lab
logs=${ROCE_CONFORM_LOGS:-$(mktemp -d /tmp/roce-conform.XXXXXX)}
mkdir -p "$logs" || fatal "cannot create $logs"
only=${ROCE_CONFORM_ONLY:-}
own_net=1
if ip netns list 2>/dev/null | grep -qw "$NS"; then own_net=0; fi
peer_pid=""
agent_pid=""
cleanup() {
  for p in $agent_pid $peer_pid; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  ip netns exec "$NS" ip link del roce1 2>/dev/null || true
  if [[ $own_net -eq 1 ]]; then "$lab" down >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

t0=$SECONDS
"$lab" setup >"$logs/setup.log" 2>&1 || fatal "tools/softroce-lab setup failed (see $logs/setup.log)"
make -s -C "$here/tools/conform-agent" >"$logs/agent-build.log" 2>&1 ||
  fatal "make -C tools/conform-agent failed (see $logs/agent-build.log)"
(cd "$here" && cargo build --release --locked -p roce-tools) >"$logs/build.log" 2>&1 ||
  fatal "cargo build --release failed (see $logs/build.log)"
"$lab" up >/dev/null 2>&1 || fatal "tools/softroce-lab up failed"
echo "conform: lab ready, agent and roce built in $((SECONDS - t0)) s; logs in $logs"

passed=0
failed=0

# probe HOST: malformed requests to the agent at HOST:$PORT, from inside the namespace.
probe() {
  ip netns exec "$NS" bash -c '
    set -u
    exec 3<>"/dev/tcp/$1/$2" || { echo "cannot connect to $1:$2"; exit 1; }
    bad=0
    while IFS= read -r line; do
      printf "%s\n" "$line" >&3
      IFS= read -r -t 30 reply <&3 || { echo "no reply to ${line@Q}"; exit 1; }
      [[ $reply == ERR* ]] || { echo "not refused: ${line@Q} -> $reply"; bad=1; }
    done <"$3"
    printf "hello\n" >&3
    IFS= read -r -t 30 reply <&3
    [[ $reply == "OK version=1 "* ]] || { echo "hello after the bad lines: ${reply:-nothing}"; exit 1; }
    exec 3<&-
    exec 3<>"/dev/tcp/$1/$2" || exit 1
    head -c 20000 /dev/zero | tr "\0" a >&3
    printf "\n" >&3
    IFS= read -r -t 30 reply <&3
    [[ $reply == ERR* ]] || { echo "a 20000-byte line: ${reply:-no reply}"; bad=1; }
    exec 3<&-
    exec 3<>"/dev/tcp/$1/$2" || { echo "the agent is gone after a long line"; exit 1; }
    printf "hello\nbye\n" >&3
    IFS= read -r -t 30 reply <&3
    [[ $reply == "OK version=1 "* ]] || { echo "hello after a long line: ${reply:-nothing}"; exit 1; }
    exit $bad' _ "$1" "$PORT" "$here/tests/conform/malformed.txt"
}

# listening HOST: waits up to 30 s for the agent at HOST:$PORT to take connections. "peer:
# ready" means the guest started the agent, not that it listens yet: a probe straight after
# was refused once (the guest up in 14 s).
listening() {
  local t=$SECONDS
  until ip netns exec "$NS" bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$1" "$PORT" 2>/dev/null; do
    ((SECONDS - t > 30)) && return 1
    sleep 0.5
  done
}

# suite SIDE PEER EXTRA...: runs the suite against PEER and compares with expected-SIDE.txt.
suite() {
  local side=$1 peer=$2 t=$SECONDS rc host
  shift 2
  host=$(agent_host "$side" "$peer")
  echo "---- $side: malformed requests to the agent at $peer:$PORT"
  if ! listening "$host"; then
    echo "  FAIL: nothing takes connections at $host:$PORT after 30 s"
    failed=$((failed + 1))
    return
  fi
  if ! probe "$host" >"$logs/$side-probe.log" 2>&1; then
    echo "  FAIL: $(tail -n 3 "$logs/$side-probe.log" | tr '\n' ' ')"
    failed=$((failed + 1))
    return
  fi
  echo "  every one refused with ERR; the agent still answers"
  echo "---- $side: roce conform $peer"
  timeout "$SUITE_LIMIT" ip netns exec "$NS" "$roce" conform "$peer" "${OURS[@]}" "$@" \
    --json --junit "$logs/$side.xml" --pcap-out "$logs/$side.pcapng" \
    --expect "$here/tests/conform/expected-$side.txt" >"$logs/$side.json" 2>"$logs/$side.err"
  rc=$?
  grep -v '^\[' "$logs/$side.err" | sed 's/^/  /'
  python3 - "$logs/$side.json" <<'PY' 2>/dev/null | sed 's/^/  /'
import json, sys
r = json.load(open(sys.argv[1]))
s = r["summary"]
print(f"agent {r['agent']}: {s['pass']} pass, {s['fail']} fail, {s['not_applicable']} not applicable")
PY
  if [[ $rc -eq 0 ]]; then
    echo "  result: PASS (every result as expected), $((SECONDS - t)) s"
    passed=$((passed + 1))
  else
    echo "  result: FAIL (roce conform exit $rc), $((SECONDS - t)) s"
    failed=$((failed + 1))
  fi
}

# Where the tester reaches the agent: the guest's address, or our agent's TCP port on the
# namespace's own kernel.
agent_host() {
  if [[ $1 == roce ]]; then echo 127.0.0.1; else echo "$2"; fi
}

if [[ -z $only || $only == rxe ]]; then
  t=$SECONDS
  "$lab" peer --ip "$RXE_IP" "conform-agent -p $PORT -v" >"$logs/rxe-peer.log" 2>&1 &
  peer_pid=$!
  until grep -q '^peer: ready' "$logs/rxe-peer.log" 2>/dev/null || ! kill -0 "$peer_pid" 2>/dev/null ||
    ((SECONDS - t > 240)); do
    sleep 0.5
  done
  if grep -q '^peer: ready' "$logs/rxe-peer.log"; then
    echo "conform: rxe guest up in $((SECONDS - t)) s"
    suite rxe "$RXE_IP"
  else
    echo "conform: FAIL: the rxe guest did not come up (see $logs/rxe-peer.log)"
    failed=$((failed + 1))
  fi
  kill "$peer_pid" 2>/dev/null
  wait "$peer_pid" 2>/dev/null
  peer_pid=""
fi

if [[ -z $only || $only == roce ]]; then
  ip netns exec "$NS" ip tuntap add roce1 mode tap 2>/dev/null
  ip netns exec "$NS" ip link set roce1 master rlbr0 up || fatal "cannot put roce1 on the bridge"
  ip netns exec "$NS" "$roce" conform-agent --iface tap:roce1 --ip "$ROCE_IP/24" -p "$PORT" \
    --dcqcn mlx5 --line-gbps 0.1 --busy-poll >"$logs/roce-agent.log" 2>&1 &
  agent_pid=$!
  t=$SECONDS
  until ip netns exec "$NS" ss -Hltn "sport = :$PORT" 2>/dev/null | grep -q . ||
    ! kill -0 "$agent_pid" 2>/dev/null || ((SECONDS - t > 20)); do
    sleep 0.2
  done
  suite roce "$ROCE_IP" --agent "127.0.0.1:$PORT"
  kill "$agent_pid" 2>/dev/null
  wait "$agent_pid" 2>/dev/null
  agent_pid=""
  ip netns exec "$NS" ip link del roce1 2>/dev/null
fi

echo
echo "conform: logs, JSON, JUnit and captures in $logs ($((SECONDS - t0)) s in all)"
echo "conform: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
