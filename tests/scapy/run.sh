#!/usr/bin/env bash
# Cross-checks `roce decode --json` against scapy's RoCE layer on every capture in pcaps/, on
# frames our builder generates (every RC/UC/UD opcode and CNP, IPv4 and IPv6, VLAN, all pads)
# and on the teaching captures of `roce gen` (which tshark must also read cleanly); and
# decode's outer layers against tshark on captures wrapped in VLAN, QinQ, VXLAN, Geneve, GRE,
# ERSPAN II/III and Linux cooked headers (encap_crosscheck.py).
# Creates a venv under target/ and installs scapy from PyPI on first use.
set -euo pipefail
cd "$(dirname "$0")/../.."

venv=target/scapy-venv
work=target/scapy-crosscheck
if [ ! -x "$venv/bin/python" ]; then
  if ! python3 -m venv "$venv" 2>/dev/null; then
    # Debian splits venv out of python3.
    apt-get install -y -q python3-venv >/dev/null
    python3 -m venv "$venv"
  fi
fi
if ! "$venv/bin/python" -c "import scapy.contrib.roce" 2>/dev/null; then
  "$venv/bin/pip" install -q "scapy>=2.5,<3"
fi

cargo build -q -p roce-tools --bin roce
mkdir -p "$work"
cargo run -q -p roce-tests --example sample_pcap -- "$work/generated.pcap"
# The teaching captures of `roce gen`, made fresh: scapy checks them with the rest, and
# Wireshark's dissector must read every frame as InfiniBand with no malformed or error
# expert info (their packet comments show as comment-level expert info).
rm -rf "$work/lessons" "$work/lessons6"
target/debug/roce gen all -o "$work/lessons" >/dev/null
target/debug/roce gen all --ipv6 -o "$work/lessons6" >/dev/null
for f in "$work"/lessons6/*.pcapng; do
  mv "$f" "$work/lessons/$(basename "$f" .pcapng)-ipv6.pcapng"
done
if ! command -v tshark >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends tshark >/dev/null
fi
lessons=0
for f in "$work"/lessons/*.pcapng; do
  frames=$(tshark -r "$f" 2>/dev/null | wc -l)
  # Every frame is InfiniBand, or MAC control (the pfc lesson's PFC frames).
  ib=$(tshark -r "$f" -Y "infiniband or macc" 2>/dev/null | wc -l)
  # Over IPv6 the UDP checksum is 0, as rdma_rxe sends it (pcaps/rc_ipv6.pcap): Wireshark
  # calls that an error, the only one allowed here.
  bad=$(tshark -r "$f" -V 2>/dev/null | grep -E 'Malformed|Expert Info \(Error' |
    grep -cv 'Expert Info (Error/Checksum): Illegal checksum value (0)' || true)
  if [[ $frames -eq 0 || $ib -ne $frames || $bad -ne 0 ]]; then
    echo "tshark: $f: $frames frames, $ib dissected as InfiniBand, $bad malformed or errors" >&2
    exit 1
  fi
  lessons=$((lessons + 1))
done
# Every lesson roce gen lists, once over IPv4 and once over IPv6.
listed=$(target/debug/roce gen --list | wc -l)
((listed > 0 && lessons == 2 * listed)) || {
  echo "tshark: expected $((2 * listed)) teaching captures ($listed lessons over IPv4 and IPv6), found $lessons" >&2
  exit 1
}
echo "tshark: $lessons teaching captures from roce gen read cleanly"
# Decapsulation (issue 16): real captures in every outer layer the slicer takes off, made by
# the library's own emitters; tshark's fields of each layer must equal decode's outer_headers.
rm -rf "$work/wrapped" && mkdir -p "$work/wrapped"
cargo build -q -p roce-tests --example wrap_pcap
for how in vlan qinq qinq9100 vxlan geneve gre_teb erspan2 erspan3 erspan3_platform sll sll2 sll_vlan; do
  for base in rc_send_only ud_send_ipv6 rdma_cm_rping; do
    target/debug/examples/wrap_pcap "pcaps/$base.pcap" "$work/wrapped/$base-$how.pcap" "$how"
  done
done
python3 tests/scapy/encap_crosscheck.py target/debug/roce "$work"/wrapped/*.pcap
"$venv/bin/python" tests/scapy/crosscheck.py --roce target/debug/roce --work-dir "$work" \
  pcaps "$work/generated.pcap" "$work/lessons"
