#!/usr/bin/env bash
# Summarizes RoCEv2 captures with tshark: frames, BTH opcodes (counted), AETH
# syndromes (ACK / RNR NAK / NAK), CM MADs, UDP source ports.
# Usage: tests/lab/pcap-summary.sh FILE.pcap...   (used for pcaps/README.md)
set -euo pipefail
command -v tshark >/dev/null || { echo "pcap-summary: tshark not found" >&2; exit 1; }

opname() {
  local op=$1 t low
  t=$((op & 0xe0)) low=$((op & 0x1f))
  local -a names=(SEND_FIRST SEND_MIDDLE SEND_LAST SEND_LAST_WITH_IMMEDIATE SEND_ONLY
    SEND_ONLY_WITH_IMMEDIATE RDMA_WRITE_FIRST RDMA_WRITE_MIDDLE RDMA_WRITE_LAST
    RDMA_WRITE_LAST_WITH_IMMEDIATE RDMA_WRITE_ONLY RDMA_WRITE_ONLY_WITH_IMMEDIATE
    RDMA_READ_REQUEST RDMA_READ_RESPONSE_FIRST RDMA_READ_RESPONSE_MIDDLE
    RDMA_READ_RESPONSE_LAST RDMA_READ_RESPONSE_ONLY ACKNOWLEDGE ATOMIC_ACKNOWLEDGE
    COMPARE_SWAP FETCH_ADD)
  local pre
  case $t in 0) pre=RC ;; 32) pre=UC ;; 64) pre=RD ;; 96) pre=UD ;; *) pre=$(printf 'T%02x' "$t") ;; esac
  if ((low < ${#names[@]})); then echo "${pre}_${names[$low]}"; else printf '%s_0x%02x\n' "$pre" "$low"; fi
}

for f in "$@"; do
  frames=$(tshark -r "$f" 2>/dev/null | wc -l)
  ops=$(tshark -r "$f" -T fields -e infiniband.bth.opcode 2>/dev/null | sort -n | uniq -c |
    while read -r n op; do echo "$(opname "$op") $n"; done | paste -sd, - | sed 's/,/, /g')
  syn=$(tshark -r "$f" -Y infiniband.aeth.syndrome -T fields -e infiniband.aeth.syndrome 2>/dev/null |
    while read -r s; do
      case $(((s >> 5) & 3)) in
        0) echo ACK ;;
        1) echo "RNR_NAK_timer$((s & 31))" ;;
        3) case $((s & 31)) in
             0) echo NAK_PSN_SEQUENCE_ERROR ;; 1) echo NAK_INVALID_REQUEST ;;
             2) echo NAK_REMOTE_ACCESS_ERROR ;; 3) echo NAK_REMOTE_OPERATIONAL_ERROR ;;
             *) echo "NAK_$((s & 31))" ;;
           esac ;;
        *) echo "reserved_$s" ;;
      esac
    done | sort | uniq -c | awk '{print $2" "$1}' | paste -sd, - | sed 's/,/, /g')
  cm=$(tshark -r "$f" -Y 'infiniband.mad.attributeid' -T fields -e infiniband.mad.attributeid 2>/dev/null |
    sort | uniq -c | awk '{print $2" "$1}' | paste -sd, - | sed 's/,/, /g')
  ports=$(tshark -r "$f" -T fields -e udp.srcport 2>/dev/null | sort -u | paste -sd' ' -)
  echo "$(basename "$f"): frames $frames; opcodes: $ops; AETH: ${syn:-none}${cm:+; CM MAD attribute ids: $cm}; UDP source ports: $ports"
done
