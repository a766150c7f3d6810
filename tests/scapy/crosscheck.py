#!/usr/bin/env python3
"""Cross-check `roce decode --json` against scapy's independent RoCE layer (scapy.contrib.roce).

For every frame of every capture given, scapy dissects the frame and recomputes the ICRC with
its own code (BTH.compute_icrc); the decoder's JSON line for the same frame must agree on
whether the frame is RoCEv2, and on opcode, dest_qp, psn, pad, pkey and the ICRC verdict.
RoCEv1 frames (Ether / GRH / BTH, which scapy dissects but has no ICRC for) are checked the
same way, their ICRC computed here from scapy's GRH and BTH with zlib (IBA 7.8.1 with the LRH
taken as 8 bytes of ones; TClass, FlowLabel, HopLmt and BTH byte 4 masked), and their GIDs
must be decode's src and dst. MAC control frames (PFC, 802.3x PAUSE) are checked against
tshark's fields: opcode, pause_time, the PFC enable vector and the eight times.
Also writes a copy of the last capture with every third ICRC corrupted, so that both sides
must say "bad" too. Prints `crosscheck: N passed, M failed` and exits non-zero on any
disagreement, or if there is nothing to check.
"""

import argparse
import json
import os
import subprocess
import sys

import ipaddress
import struct
import zlib

from scapy.contrib.roce import BTH, GRH, _bth_opcodes
from scapy.layers.inet import UDP
from scapy.packet import Padding
from scapy.utils import rdpcap, wrpcap

ROCEV2_PORT = 4791


def decode(roce, path):
    out = subprocess.run([roce, "decode", "--json", path], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"crosscheck: roce decode {path} failed: {out.stderr.strip()}")
    return [json.loads(line) for line in out.stdout.splitlines()]


def roce_v1_icrc(grh):
    """The ICRC of a RoCEv1 packet from scapy's GRH layer (its payload ends in the ICRC)."""
    covered = bytearray(bytes(grh)[: 40 + grh.paylen - 4])
    covered[0] |= 0x0F  # TClass, high nibble
    covered[1:4] = b"\xff\xff\xff"  # TClass, low nibble, and FlowLabel
    covered[7] = 0xFF  # HopLmt
    covered[40 + 4] = 0xFF  # BTH byte 4: FECN, BECN, Resv6
    return struct.pack("<I", zlib.crc32(b"\xff" * 8 + bytes(covered)) & 0xFFFFFFFF)


def bth_view(bth, icrc_ok):
    """The BTH fields the decoder's JSON line has, and whether the ICRC is right."""
    return {
        "opcode_value": bth.opcode,
        "opcode": _bth_opcodes.get(bth.opcode),
        "dest_qp": bth.dqpn,
        "psn": bth.psn,
        "pad": bth.padcount,
        "pkey": bth.pkey,
        "icrc": "ok" if icrc_ok else "bad",
    }


def scapy_view(pkt):
    """What scapy makes of a frame: None if it is not RoCE, else the BTH fields and ICRC."""
    if BTH in pkt and GRH in pkt and UDP not in pkt:
        grh, bth = pkt[GRH], pkt[BTH]
        wire = bytes(grh)[40 + grh.paylen - 4 : 40 + grh.paylen]
        return {
            "roce_version": 1,
            "src": str(ipaddress.IPv6Address(grh.sgid)),
            "dst": str(ipaddress.IPv6Address(grh.dgid)),
            **bth_view(bth, roce_v1_icrc(grh) == wire),
        }
    if BTH not in pkt or UDP not in pkt or pkt[UDP].dport != ROCEV2_PORT:
        return None
    bth = pkt[BTH]
    wire = bytes(pkt[UDP].payload)[-4:]
    computed = bth.compute_icrc(None)
    return {
        "roce_version": 2,
        **bth_view(bth, computed == wire),
    }


def compare(ours, theirs):
    """The disagreements between the decoder's JSON line and scapy's view of one frame."""
    if theirs is None:
        return [] if not ours.get("roce") else ["scapy sees no RoCEv2 packet, roce decode does"]
    if not ours.get("roce") or "error" in ours:
        return [f"roce decode: {ours.get('error', 'not RoCEv2')}; scapy dissects a BTH"]
    diffs = []
    keys = ["roce_version", "opcode_value", "dest_qp", "psn", "pad", "pkey", "icrc"]
    if theirs["roce_version"] == 1:
        keys += ["src", "dst"]
    for key in keys:
        if ours.get(key) != theirs[key]:
            diffs.append(f"{key}: roce {ours.get(key)!r}, scapy {theirs[key]!r}")
    # scapy names the opcodes it knows (not SEND_WITH_INVALIDATE, FLUSH, ATOMIC_WRITE).
    if theirs["opcode"] is not None and ours.get("opcode") != theirs["opcode"]:
        diffs.append(f"opcode name: roce {ours.get('opcode')!r}, scapy {theirs['opcode']!r}")
    return diffs


TSHARK_MACC = ["frame.number", "macc.opcode", "macc.pause_time", "macc.cbfc.enbv"] + [
    f"macc.cbfc.pause_time.c{n}" for n in range(8)
]


def tshark_macc(path):
    """tshark's MAC control fields per frame number (1-based), for frames that have them."""
    cmd = ["tshark", "-r", path, "-Y", "macc", "-T", "fields", "-E", "separator=,"]
    for f in TSHARK_MACC:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"crosscheck: tshark {path} failed: {out.stderr.strip()}")
    rows = {}
    for line in out.stdout.splitlines():
        cols = line.split(",")
        rows[int(cols[0])] = [int(c, 0) if c else None for c in cols[1:]]
    return rows


def compare_macc(ours, theirs):
    """The disagreements between decode's mac_control object and tshark's fields."""
    m = ours.get("mac_control")
    if m is None:
        return ["roce decode has no mac_control object; tshark dissects MAC control"]
    opcode, pause_time, enbv, *times = theirs
    diffs = []
    if m.get("opcode") != opcode:
        diffs.append(f"opcode: roce {m.get('opcode')!r}, tshark {opcode!r}")
    if opcode == 0x0001 and m.get("pause_quanta") != pause_time:
        diffs.append(f"pause_time: roce {m.get('pause_quanta')!r}, tshark {pause_time!r}")
    if opcode == 0x0101:
        vector = (m.get("reserved", 0) << 8) | m.get("class_enable_vector", 0)
        if vector != enbv:
            diffs.append(f"enable vector: roce {vector:#06x}, tshark {enbv!r}")
        if m.get("quanta") != times:
            diffs.append(f"times: roce {m.get('quanta')!r}, tshark {times!r}")
    return diffs


def check_file(roce, path):
    lines = decode(roce, path)
    macc = tshark_macc(path)
    frames = rdpcap(path)
    passed, failures, icrc = 0, [], {"ok": 0, "bad": 0, "macc": 0, "v1": 0}
    if len(lines) != len(frames):
        failures.append(f"{path}: roce decode gives {len(lines)} lines, scapy reads {len(frames)} frames")
    for index, (ours, pkt) in enumerate(zip(lines, frames)):
        theirs = scapy_view(pkt)
        diffs = compare(ours, theirs)
        if index + 1 in macc:
            diffs += compare_macc(ours, macc[index + 1])
            icrc["macc"] += 1
        elif "mac_control" in ours:
            diffs.append("roce decode sees MAC control; tshark does not")
        if theirs is not None:
            icrc[theirs["icrc"]] += 1
            icrc["v1"] += theirs["roce_version"] == 1
        if diffs:
            failures.append(f"{path} frame {index}: " + "; ".join(diffs))
        else:
            passed += 1
    return passed, failures, icrc


def corrupted_copy(path, out_dir):
    """`path` with the last ICRC byte of every third RoCE frame flipped."""
    frames = []
    for i, pkt in enumerate(rdpcap(path)):
        if i % 3 == 0 and BTH in pkt:
            raw = bytearray(bytes(pkt))
            trailer = len(bytes(pkt[Padding])) if Padding in pkt else 0
            raw[len(raw) - trailer - 1] ^= 0x5A
            pkt = pkt.__class__(bytes(raw))
        frames.append(pkt)
    out = os.path.join(out_dir, "corrupted-icrc.pcap")
    wrpcap(out, frames)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--roce", required=True, help="path of the roce binary")
    parser.add_argument("--work-dir", required=True, help="where to write the corrupted copy")
    parser.add_argument("captures", nargs="*", help="pcap/pcapng files or directories of them")
    args = parser.parse_args()

    files = []
    for c in args.captures:
        if os.path.isdir(c):
            files += sorted(os.path.join(c, f) for f in os.listdir(c) if f.endswith((".pcap", ".pcapng")))
        elif os.path.isfile(c):
            files.append(c)
        else:
            print(f"crosscheck: {c}: no such file or directory", file=sys.stderr)
            return 1
    if not files:
        print("crosscheck: no captures to check", file=sys.stderr)
        return 1
    os.makedirs(args.work_dir, exist_ok=True)
    files.append(corrupted_copy(files[-1], args.work_dir))

    passed, failed, icrc = 0, [], {"ok": 0, "bad": 0, "macc": 0, "v1": 0}
    for path in files:
        p, f, i = check_file(args.roce, path)
        print(
            f"{path}: {p} frames agree, {len(f)} disagree (scapy ICRC ok {i['ok']}, bad {i['bad']}; "
            f"RoCEv1 {i['v1']}; MAC control checked with tshark {i['macc']})"
        )
        passed += p
        failed += f
        for k in icrc:
            icrc[k] += i[k]
    for line in failed[:50]:
        print("  " + line)
    if icrc["bad"] == 0:
        failed.append("no frame with a bad ICRC was checked")
        print("crosscheck: the corrupted copy produced no bad ICRC", file=sys.stderr)
    for kind, what in (("v1", "RoCEv1 frame"), ("macc", "MAC control frame")):
        if icrc[kind] == 0:
            failed.append(f"no {what} was checked")
            print(f"crosscheck: no {what} was checked", file=sys.stderr)
    print(f"crosscheck: {passed} passed, {len(failed)} failed")
    return 0 if passed > 0 and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
