#!/usr/bin/env bash
# Cross-checks `roce decode --json` against scapy's RoCE layer on every capture in pcaps/ and on
# frames our builder generates (every RC/UC/UD opcode and CNP, IPv4 and IPv6, VLAN, all pads).
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
"$venv/bin/python" tests/scapy/crosscheck.py --roce target/debug/roce --work-dir "$work" \
  pcaps "$work/generated.pcap"
