#!/usr/bin/env python3
"""Cross-check `roce decode --json` against tshark on encapsulated captures (issue 16).

Each capture given (made by `cargo run -p roce-tests --example wrap_pcap`) holds RoCE frames
inside outer layers. For every frame, every field tshark dissects in those layers (802.1Q and
802.1ad tags, Linux cooked headers, VXLAN, Geneve, GRE, ERSPAN II/III and its platform
subheader) must equal what `roce decode --json` reports in `outer_headers`, and the inner
packet's QP and PSN must agree too. Prints `encap crosscheck: N fields agreed in M frames` and
exits non-zero on any disagreement, or if nothing was compared.
"""

import json
import subprocess
import sys

# tshark field -> (our header names, our field name). A field tshark shows once per header
# lists every occurrence, outermost first, as ours do.
FIELDS = {
    "vlan.id": (("VLAN", "QINQ_9100"), "VID"),
    "vlan.priority": (("VLAN", "QINQ_9100"), "PCP"),
    "ieee8021ad.id": (("QINQ_88A8",), "VID"),
    "ieee8021ad.priority": (("QINQ_88A8",), "PCP"),
    "sll.pkttype": (("SLL", "SLL2"), "Packet type"),
    "sll.hatype": (("SLL", "SLL2"), "ARPHRD type"),
    "sll.halen": (("SLL", "SLL2"), "Address length"),
    "sll.etype": (("SLL", "SLL2"), "Protocol"),
    "sll.ifindex": (("SLL2",), "Interface index"),
    "vxlan.vni": (("VXLAN",), "VNI"),
    "geneve.version": (("GENEVE",), "Ver"),
    "geneve.proto_type": (("GENEVE",), "Protocol Type"),
    "geneve.vni": (("GENEVE",), "VNI"),
    "gre.proto": (("GRE",), "Protocol Type"),
    "gre.key": (("GRE",), "Key"),
    "gre.sequence_number": (("GRE",), "Sequence Number"),
    "gre.checksum": (("GRE",), "Checksum"),
    "erspan.version": (("ERSPAN_II", "ERSPAN_III"), "Ver"),
    "erspan.vlan": (("ERSPAN_II", "ERSPAN_III"), "VLAN"),
    "erspan.cos": (("ERSPAN_II", "ERSPAN_III"), "COS"),
    "erspan.spanid": (("ERSPAN_II", "ERSPAN_III"), "Session ID"),
    "erspan.index": (("ERSPAN_II",), "Index"),
    "erspan.timestamp": (("ERSPAN_III",), "Timestamp"),
    "erspan.sgt": (("ERSPAN_III",), "SGT"),
    "erspan.hw": (("ERSPAN_III",), "Hw ID"),
    "erspan.direction": (("ERSPAN_III",), "D"),
    "erspan.gra": (("ERSPAN_III",), "Gra"),
    "erspan.o": (("ERSPAN_III",), "O"),
    "erspan.platid": (("ERSPAN_III_PLATFORM",), "Platf ID"),
}
INNER = {"infiniband.bth.destqp": "dest_qp", "infiniband.bth.psn": "psn"}


def number(text):
    text = text.strip()
    if text in ("True", "False"):
        return int(text == "True")
    return int(text, 0)


def tshark(path):
    names = list(FIELDS) + list(INNER)
    cmd = ["tshark", "-r", path, "-T", "fields", "-E", "separator=\t", "-E", "occurrence=a"]
    for n in names:
        cmd += ["-e", n]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        cells = line.split("\t")
        rows.append({n: [number(v) for v in c.split(",") if v] for n, c in zip(names, cells)})
    return rows


def ours(roce, path):
    out = subprocess.run([roce, "decode", "--json", path], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"encap crosscheck: roce decode {path}: {out.stderr.strip()}")
    rows = []
    for line in out.stdout.splitlines():
        frame = json.loads(line)
        headers = []
        for h in frame.get("outer_headers", []):
            name = h["header"]
            if name == "QINQ":
                # tshark dissects 0x88a8 as 802.1ad and 0x9100 as another 802.1Q tag: the
                # TPID is the EtherType of the header before.
                name = "QINQ_88A8" if h["tpid"] == 0x88A8 else "QINQ_9100"
            headers.append((name, h["fields"]))
        rows.append((frame, headers))
    return rows


def main():
    roce, paths = sys.argv[1], sys.argv[2:]
    agreed = frames = 0
    failures = []
    for path in paths:
        theirs = tshark(path)
        mine = ours(roce, path)
        if len(theirs) != len(mine):
            failures.append(f"{path}: tshark {len(theirs)} frames, roce {len(mine)}")
            continue
        for i, (t, (frame, headers)) in enumerate(zip(theirs, mine)):
            frames += 1
            for field, (names, ours_name) in FIELDS.items():
                expected = [f[ours_name] for n, f in headers if n in names and ours_name in f]
                if t.get(field, []) != expected:
                    failures.append(f"{path} frame {i + 1}: {field}: tshark {t.get(field)}, roce {expected}")
                elif expected:
                    agreed += len(expected)
            for field, key in INNER.items():
                if t.get(field) != [frame.get(key)]:
                    failures.append(f"{path} frame {i + 1}: {field}: tshark {t.get(field)}, roce {frame.get(key)}")
                else:
                    agreed += 1
    for f in failures[:20]:
        print(f, file=sys.stderr)
    print(f"encap crosscheck: {agreed} fields agreed in {frames} frames, {len(failures)} disagreements")
    if failures or frames == 0:
        sys.exit(1)


if __name__ == "__main__":
    main()
