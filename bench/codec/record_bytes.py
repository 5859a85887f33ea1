#!/usr/bin/python3
"""record_bytes.py — where a step's bytes go, read from its step file.

    record_bytes.py STEP.rckpt...            # e.g. the output of rckpt codec encode

Parses each step file by formats/checkpoint.md alone (no rckpt code) and
splits its bytes into: manifest; record headers (record header, CRC,
segment headers); codebooks (bin count, centroids, protected count);
protected values (their blob); index tokens and run lengths (the index
stream's two entropy streams and its header), or the whole index stream
when it is context-coded (CTX); lossless tensors (their blobs). One line per file with the shares, then the total.
"""
import struct
import sys

CATS = ["manifest", "headers", "codebooks", "protected", "tokens", "run lengths", "context-coded", "lossless"]


def blob(b, o):
    """Bytes of a blob at o (method, length, payload)."""
    return 5 + struct.unpack_from("<I", b, o + 1)[0]


def entropy_stream(b, o):
    return 9 + struct.unpack_from("<I", b, o + 5)[0]


def record(b, acc):
    magic, ver, compat, kind, flags, step, parent, nseg, _res, body = struct.unpack_from("<4sBBBBQQIIQ", b, 0)
    if magic != b"RCKR":
        raise ValueError("not a chunk record")
    if kind == 3:
        raise ValueError("sparse partial records are not split (whole record counted as headers)")
    acc["headers"] += 40 + 4
    o = 40
    for _ in range(nseg):
        enc = b[o + 20]
        acc["headers"] += 24
        o += 24
        if enc == 2:
            n = blob(b, o)
            acc["lossless"] += n
            o += n
            continue
        nb = b[o]
        acc["codebooks"] += 1 + 4 * nb + 8
        o += 1 + 4 * nb + 8
        n = blob(b, o)
        acc["protected"] += n
        o += n
        stages = b[o]
        if stages & 8:  # CTX: u32 length, tables and rANS bytes
            n = 5 + struct.unpack_from("<I", b, o + 1)[0]
            acc["context-coded"] += n
            o += n
            continue
        hdr = 1 + (8 if stages & 4 else 0)
        acc["tokens"] += hdr
        o += hdr
        n = entropy_stream(b, o)
        acc["tokens"] += n
        o += n
        if stages & 4:
            n = entropy_stream(b, o)
            acc["run lengths"] += n
            o += n
    if o != 40 + body:
        raise ValueError("segments do not fill the record")


def stepfile(path):
    with open(path, "rb") as f:
        b = f.read()
    magic, ver, compat, flags, nchunks, mlen = struct.unpack_from("<4sBBHIQ", b, 0)
    if magic != b"RCKF":
        raise ValueError(f"{path}: not a step file")
    acc = dict.fromkeys(CATS, 0)
    acc["manifest"] = 20 + mlen
    o = 20 + mlen
    for _ in range(nchunks):
        (n,) = struct.unpack_from("<Q", b, o)
        acc["headers"] += 8
        record(b[o + 8:o + 8 + n], acc)
        o += 8 + n
    if o != len(b):
        raise ValueError(f"{path}: bytes after the last record")
    return acc


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(sys.argv) >= 2 else 2
    total = dict.fromkeys(CATS, 0)
    print("%-40s %10s  " % ("file", "bytes") + "  ".join("%11s" % c for c in CATS))
    for p in sys.argv[1:]:
        try:
            acc = stepfile(p)
        except (OSError, ValueError, struct.error, IndexError) as e:
            print(f"record_bytes.py: {p}: {e}", file=sys.stderr)
            return 1
        s = sum(acc.values())
        for k in CATS:
            total[k] += acc[k]
        print("%-40s %10d  " % (p[-40:], s) + "  ".join("%10.1f%%" % (100 * acc[k] / s) for k in CATS))
    s = sum(total.values())
    print("%-40s %10d  " % ("total", s) + "  ".join("%10.1f%%" % (100 * total[k] / s) for k in CATS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
