#!/usr/bin/python3
"""record_bytes.py — where a step's bytes go, read from its step file.

    record_bytes.py [--by-kind] STEP.rckpt...   # e.g. the output of rckpt codec encode

Parses each step file by formats/checkpoint.md alone (no rckpt code) and
splits its bytes into: manifest; record headers (record header, CRC,
segment headers); codebooks (bin count, centroids, protected count);
protected values (their blob); index tokens and run lengths (the index
stream's two entropy streams and its header), or the whole index stream
when it is context-coded (CTX); lossless tensors (their blobs). A
predicted blob (version 4) counts where the plain one would. One line per
file with the shares, then the total. --by-kind adds, over all the files,
each layer kind's bytes by category (from the manifest's kinds: an
optimizer's first and second moments apart, bench_codec --encode-dir).
"""
import struct
import sys

CATS = ["manifest", "headers", "codebooks", "protected", "tokens", "run lengths", "context-coded", "lossless"]
KINDS = ["other", "embedding", "conv", "linear", "norm/bias", "moment1", "moment2", "optim"]


def blob(b, o):
    """Bytes of a blob at o (method, length, payload)."""
    return 5 + struct.unpack_from("<I", b, o + 1)[0]


def entropy_stream(b, o):
    return 9 + struct.unpack_from("<I", b, o + 5)[0]


def record(b, total, kinds=None, per=None):
    """Adds record b's bytes by category to total, and each segment's to
    per[kind] (kinds: the tensors' layer kinds) when per is given."""
    magic, ver, compat, kind, flags, step, parent, nseg, _res, body = struct.unpack_from("<4sBBBBQQIIQ", b, 0)
    if magic != b"RCKR":
        raise ValueError("not a chunk record")
    if kind == 3:
        raise ValueError("sparse partial records are not split (whole record counted as headers)")
    total["headers"] += 40 + 4
    o = 40
    for _ in range(nseg):
        acc = dict.fromkeys(CATS, 0)
        record_segment(b, o, acc)
        o += sum(acc.values())
        for k in CATS:
            total[k] += acc[k]
        if per is not None:
            d = per.setdefault(KINDS[kinds[struct.unpack_from("<I", b, o - sum(acc.values()))[0]]]
                               if kinds is not None else "?", dict.fromkeys(CATS, 0))
            for k in CATS:
                d[k] += acc[k]
    if o != 40 + body:
        raise ValueError("segments do not fill the record")


def record_segment(b, o, acc):
    """One segment at o: its bytes by category into acc."""
    enc = b[o + 20]
    acc["headers"] += 24
    o += 24
    if enc == 2:
        acc["lossless"] += blob(b, o)
        return
    nb = b[o]
    acc["codebooks"] += 1 + 4 * nb + 8
    o += 1 + 4 * nb + 8
    n = blob(b, o)
    acc["protected"] += n
    o += n
    stages = b[o]
    if stages & 8:  # CTX: u32 length, tables and rANS bytes
        acc["context-coded"] += 5 + struct.unpack_from("<I", b, o + 1)[0]
        return
    hdr = 1 + (8 if stages & 4 else 0)
    n = entropy_stream(b, o + hdr)
    acc["tokens"] += hdr + n
    if stages & 4:
        acc["run lengths"] += entropy_stream(b, o + hdr + n)


def tensor_kinds(m):
    """The layer kind of each tensor of manifest m ("Manifest")."""
    ver, ntensors = m[4], struct.unpack_from("<I", m, 24)[0]
    o, kinds = 40, []
    for _ in range(ntensors):
        (nl,) = struct.unpack_from("<H", m, o)
        o += 2 + nl
        kind, ndim = m[o + 1], m[o + 3]
        o += 4 + 8 * ndim
        (nseg,) = struct.unpack_from("<I", m, o)
        o += 4 + 16 * nseg + (8 if ver >= 2 and kind >= 5 else 0)
        kinds.append(kind if kind < len(KINDS) else 0)
    return kinds


def stepfile(path, per=None):
    with open(path, "rb") as f:
        b = f.read()
    magic, ver, compat, flags, nchunks, mlen = struct.unpack_from("<4sBBHIQ", b, 0)
    if magic != b"RCKF":
        raise ValueError(f"{path}: not a step file")
    acc = dict.fromkeys(CATS, 0)
    acc["manifest"] = 20 + mlen
    kinds = tensor_kinds(b[20:20 + mlen]) if per is not None else None
    o = 20 + mlen
    for _ in range(nchunks):
        (n,) = struct.unpack_from("<Q", b, o)
        acc["headers"] += 8
        record(b[o + 8:o + 8 + n], acc, kinds, per)
        o += 8 + n
    if o != len(b):
        raise ValueError(f"{path}: bytes after the last record")
    return acc


def main():
    args = sys.argv[1:]
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if args else 2
    per = {} if args[0] == "--by-kind" else None
    if per is not None:
        args = args[1:]
    if not args:
        print("record_bytes.py: no step files given (usage: record_bytes.py [--by-kind] STEP.rckpt...)",
              file=sys.stderr)
        return 2
    total = dict.fromkeys(CATS, 0)
    print("%-40s %10s  " % ("file", "bytes") + "  ".join("%11s" % c for c in CATS))
    for p in args:
        try:
            acc = stepfile(p, per)
        except (OSError, ValueError, struct.error, IndexError) as e:
            print(f"record_bytes.py: {p}: {e}", file=sys.stderr)
            return 1
        s = sum(acc.values())
        for k in CATS:
            total[k] += acc[k]
        print("%-40s %10d  " % (p[-40:], s) + "  ".join("%10.1f%%" % (100 * acc[k] / s) for k in CATS))
    s = sum(total.values())
    print("%-40s %10d  " % ("total", s) + "  ".join("%10.1f%%" % (100 * total[k] / s) for k in CATS))
    if per:
        print("\nby layer kind, bytes (share of the total) and by category:")
        for kind in KINDS:
            if kind in per:
                d, n = per[kind], sum(per[kind].values())
                print("%-40s %10d  " % (kind + " (%.1f%%)" % (100 * n / s), n)
                      + "  ".join("%10.1f%%" % (100 * d[k] / n) for k in CATS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
