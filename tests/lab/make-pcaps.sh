#!/usr/bin/env bash
# Regenerates the real rdma_rxe captures in pcaps/ with tools/softroce-lab.
# Needs root, QEMU and a built guest (tools/softroce-lab setup).
# Usage: tests/lab/make-pcaps.sh [NAME...]   (default: all; see the list below)
# Each capture's exact lab command is the one in pcaps/README.md.
# shellcheck disable=SC2016  # $SERVER etc. must expand in the guest, not here
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
lab=$here/tools/softroce-lab
out=${PCAP_DIR:-$here/pcaps}
mkdir -p "$out"

# capture NAME [lab options] SERVER_CMD CLIENT_CMD
cap() {
  local name=$1
  shift
  echo "=== $name"
  "$lab" capture "$out/$name.pcap" "$@"
}

run() {
  case $1 in
    rc_send_only) cap rc_send_only 'ibv_rc_pingpong -g 1 -n 5 -s 64' 'ibv_rc_pingpong -g 1 -n 5 -s 64 $SERVER' ;;
    rc_send_first_middle_last) cap rc_send_first_middle_last 'ibv_rc_pingpong -g 1 -n 3 -s 4096 -m 1024' 'ibv_rc_pingpong -g 1 -n 3 -s 4096 -m 1024 $SERVER' ;;
    rc_write) cap rc_write 'ib_write_bw -x 1 -F -n 5 -s 4096' 'ib_write_bw -x 1 -F -n 5 -s 4096 $SERVER' ;;
    rc_write_64k) cap rc_write_64k 'ib_write_bw -x 1 -F -n 5 -s 65536' 'ib_write_bw -x 1 -F -n 5 -s 65536 $SERVER' ;;
    rc_write_only) cap rc_write_only 'ib_write_bw -x 1 -F -n 5 -s 64' 'ib_write_bw -x 1 -F -n 5 -s 64 $SERVER' ;;
    rc_read) cap rc_read 'ib_read_bw -x 1 -F -n 5 -s 4096' 'ib_read_bw -x 1 -F -n 5 -s 4096 $SERVER' ;;
    rc_read_only) cap rc_read_only 'ib_read_bw -x 1 -F -n 5 -s 64' 'ib_read_bw -x 1 -F -n 5 -s 64 $SERVER' ;;
    rc_atomic_cmp_swap) cap rc_atomic_cmp_swap 'ib_atomic_bw -x 1 -F -n 5 -A CMP_AND_SWAP' 'ib_atomic_bw -x 1 -F -n 5 -A CMP_AND_SWAP $SERVER' ;;
    rc_atomic_fetch_add) cap rc_atomic_fetch_add 'ib_atomic_bw -x 1 -F -n 5 -A FETCH_AND_ADD' 'ib_atomic_bw -x 1 -F -n 5 -A FETCH_AND_ADD $SERVER' ;;
    uc_send) cap uc_send 'ibv_uc_pingpong -g 1 -n 5 -s 64' 'ibv_uc_pingpong -g 1 -n 5 -s 64 $SERVER' ;;
    uc_send_first_middle_last) cap uc_send_first_middle_last 'ibv_uc_pingpong -g 1 -n 3 -s 3000' 'ibv_uc_pingpong -g 1 -n 3 -s 3000 $SERVER' ;;
    ud_send_ipv6) cap ud_send_ipv6 --ipv6 'ibv_ud_pingpong -g $GIDX -n 5 -s 64' 'ibv_ud_pingpong -g $GIDX -n 5 -s 64 $SERVER4' ;;
    rc_reorder_write) cap rc_reorder_write --netem 'delay 2ms reorder 10%' 'ib_write_bw -x 1 -F -n 5 -s 4096' 'ib_write_bw -x 1 -F -n 5 -s 4096 $SERVER' ;;
    ud_send) cap ud_send 'ibv_ud_pingpong -g 1 -n 5 -s 64' 'ibv_ud_pingpong -g 1 -n 5 -s 64 $SERVER' ;;
    # ibv_*_pingpong listen on IPv4 only: the TCP exchange goes to $SERVER4, RoCE uses the IPv6 GIDs
    rc_ipv6) cap rc_ipv6 --ipv6 'ibv_rc_pingpong -g $GIDX -n 5 -s 64' 'ibv_rc_pingpong -g $GIDX -n 5 -s 64 $SERVER4' ;;
    rc_write_imm) cap rc_write_imm 'lab_verbs server write_imm -n 4 -s 2500 -x' 'lab_verbs client write_imm $SERVER -n 4 -s 2500 -x' ;;
    rc_send_imm) cap rc_send_imm 'lab_verbs server send_imm -n 4 -s 2500 -x' 'lab_verbs client send_imm $SERVER -n 4 -s 2500 -x' ;;
    rc_rnr_nak_verbs) cap rc_rnr_nak_verbs 'lab_verbs server rnr -n 3 -s 64' 'lab_verbs client rnr $SERVER -n 3 -s 64' ;;
    rc_mtu4096) cap rc_mtu4096 --mtu 9000 'ibv_rc_pingpong -g 1 -n 3 -s 8192 -m 4096' 'ibv_rc_pingpong -g 1 -n 3 -s 8192 -m 4096 $SERVER' ;;
    rdma_cm_rping) cap rdma_cm_rping 'rping -s -a $SELF -C 3 -S 64' 'rping -c -a $SERVER -C 3 -S 64' ;;
    rc_loss_write) cap rc_loss_write --loss 50 'ib_write_bw -x 1 -F -n 20 -s 8192' 'ib_write_bw -x 1 -F -n 20 -s 8192 $SERVER' ;;
    rc_loss_read) cap rc_loss_read --loss 50 'ib_read_bw -x 1 -F -n 20 -s 8192' 'ib_read_bw -x 1 -F -n 20 -s 8192 $SERVER' ;;
    rc_rnr_nak) cap rc_rnr_nak 'ib_send_bw -x 1 -F -n 20 -s 64 -r 1' 'ib_send_bw -x 1 -F -n 20 -s 64 -t 16 $SERVER' ;;
    *) echo "make-pcaps: unknown capture $1" >&2; return 1 ;;
  esac
}

ALL=(rc_send_only rc_send_first_middle_last rc_write rc_write_64k rc_write_only rc_read rc_read_only
  rc_atomic_cmp_swap rc_atomic_fetch_add uc_send ud_send rc_ipv6 rc_mtu4096 rdma_cm_rping
  rc_loss_write rc_loss_read rc_rnr_nak rc_write_imm rc_send_imm rc_rnr_nak_verbs
  uc_send_first_middle_last ud_send_ipv6 rc_reorder_write)
[[ $# -gt 0 ]] || set -- "${ALL[@]}"
fails=()
for n in "$@"; do run "$n" || fails+=("$n"); done
if [[ ${#fails[@]} -gt 0 ]]; then
  echo "make-pcaps: failed: ${fails[*]}" >&2
  exit 1
fi
