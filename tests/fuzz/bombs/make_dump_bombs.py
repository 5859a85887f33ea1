import struct, sys
def ss(body, v=1, c=1):  # struct_start + body
    return struct.pack("<BBI", v, c, len(body)) + body
def section(t, body):
    magic = (t << 24) | (t << 16) | 0xffce
    h = ss(struct.pack("<IQ", magic, len(body)))
    f = ss(struct.pack("<I", 0xecffffce))
    return h + body + (f if body or t not in (10, 4, 11) else b"")
def bare(t):
    magic = (t << 24) | (t << 16) | 0xffce
    return ss(struct.pack("<IQ", magic, 0))
def blob(b): return struct.pack("<I", len(b)) + b
def obj_begin(name, ns):
    h = ss(blob(b"") + blob(name) + struct.pack("<QIB", 0, 0, 0) + blob(ns))
    return section(3, ss(h))
def omap(pairs):
    return section(8, ss(struct.pack("<I", len(pairs)) + b"".join(blob(k) + blob(v) for k, v in pairs)))
def data(off, b):
    return section(5, ss(struct.pack("<QQI", off, len(b), len(b)) + b))
sup = struct.pack("<IIII", 0xffceffce, 2, 18, 10)
# (a) an object of 30,000 empty omap pairs in job "bomb"
a = sup + bare(10) + obj_begin(b"rckpt.job", b"bomb") + omap([(b"", b"")] * 30000) + bare(4) + bare(11)
open(sys.argv[1] + "/omap-empty-pairs", "wb").write(a)
# (b) a manifest-named object whose DATA says it starts at 1 GiB
b = sup + bare(10) + obj_begin(b"rckpt.job", b"far") + omap([(b"head", struct.pack("<Q", 1))]) + bare(4) \
    + obj_begin(b"rckpt.manifest.00000000000000000001", b"far") + data(1 << 30, b"x" * 16) + bare(4) + bare(11)
open(sys.argv[1] + "/data-far-offset", "wb").write(b)
