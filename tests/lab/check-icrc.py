#!/usr/bin/env python3
"""Checks the RoCEv2 ICRC of every frame in pcap files (independent of the Rust code).

ICRC = CRC-32 (zlib) over 8 bytes of 0xFF, then the IP header with the variant fields set
to all ones (IPv4: TOS, TTL, header checksum; IPv6: traffic class, flow label, hop limit),
the UDP header with its checksum set to ones, the BTH with byte 4 set to 0xFF, and the
rest up to the ICRC; sent least-significant byte first.
Usage: tests/lab/check-icrc.py FILE.pcap...   Exit status 1 if a frame does not match.
"""
import struct
import sys
import zlib


def frames(path):
    data = open(path, "rb").read()
    magic = data[:4]
    if magic not in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        raise SystemExit(f"{path}: not a little-endian pcap file")
    off = 24
    while off + 16 <= len(data):
        _, _, incl, _ = struct.unpack("<IIII", data[off:off + 16])
        off += 16
        yield data[off:off + incl]
        off += incl


def icrc_matches(frame):
    ethertype = struct.unpack("!H", frame[12:14])[0]
    pkt = frame[14:]
    if ethertype == 0x8100:  # 802.1Q tag
        ethertype = struct.unpack("!H", frame[16:18])[0]
        pkt = frame[18:]
    if ethertype == 0x0800:
        ihl = (pkt[0] & 15) * 4
        pkt = pkt[:struct.unpack("!H", pkt[2:4])[0]]
        m = bytearray(pkt)
        m[1] = 0xFF
        m[8] = 0xFF
        m[10:12] = b"\xff\xff"
        udp = ihl
    elif ethertype == 0x86DD:
        pkt = pkt[:40 + struct.unpack("!H", pkt[4:6])[0]]
        m = bytearray(pkt)
        m[0] |= 0x0F
        m[1:4] = b"\xff\xff\xff"
        m[7] = 0xFF
        udp = 40
    else:
        return None
    if len(m) < udp + 8 + 12 + 4 or struct.unpack("!H", m[udp + 2:udp + 4])[0] != 4791:
        return None
    m[udp + 6:udp + 8] = b"\xff\xff"
    m[udp + 8 + 4] = 0xFF
    crc = zlib.crc32(b"\xff" * 8 + bytes(m[:-4]))
    return struct.pack("<I", crc) == bytes(pkt[-4:])


def main():
    bad_total = 0
    for path in sys.argv[1:]:
        ok = bad = 0
        for i, f in enumerate(frames(path), 1):
            r = icrc_matches(f)
            if r is True:
                ok += 1
            elif r is False:
                bad += 1
                print(f"{path}: frame {i}: ICRC mismatch")
        print(f"{path}: {ok} frames with a good ICRC, {bad} bad")
        bad_total += bad
    sys.exit(1 if bad_total else 0)


if __name__ == "__main__":
    main()
