#!/usr/bin/python3
"""rckpt_ref.py — a reference decoder of rckpt's checkpoint format, written
from formats/checkpoint.md alone. It shares no code with the C decoder
(formats/*.c) and is meant to be read beside the spec: each function names
the section it follows. Slow and plain on purpose.

    rckpt_ref.py decode [-o OUT.safetensors] STEP.rckpt...   # base first, then each delta
    rckpt_ref.py compare C_OUT.safetensors STEP.rckpt...     # the C decoder's output must match
    rckpt_ref.py pcr [--group K] -o DIR REC...               # a PCR record's images through group K

`decode` rebuilds the last step of a chain of step files (`rckpt codec
encode` writes them), checks every chunk's SHA-256 against its manifest
after every step, and writes the tensors (in their dtypes). `compare` does
the same and compares every tensor's bytes with a file the C decoder wrote
(`rckpt codec decode`). Exit 0 when all holds; 1 otherwise, saying what.
zstd frames are decompressed with the zstd command (Debian's zstd).
"""
import hashlib
import json
import struct
import subprocess
import sys

import numpy as np


class Bad(Exception):
    """Malformed bytes: the spec's -EBADMSG (or a checksum mismatch)."""


# ---- bytes ----

class Reader:
    def __init__(self, b, what):
        self.b, self.pos, self.what = bytes(b), 0, what

    def take(self, n):
        if n < 0 or self.pos + n > len(self.b):
            raise Bad(f"{self.what}: {n} bytes wanted at {self.pos}, {len(self.b) - self.pos} left")
        out = self.b[self.pos:self.pos + n]
        self.pos += n
        return out

    def u8(self):
        return self.take(1)[0]

    def u16(self):
        return struct.unpack("<H", self.take(2))[0]

    def u32(self):
        return struct.unpack("<I", self.take(4))[0]

    def u64(self):
        return struct.unpack("<Q", self.take(8))[0]

    def f32(self, n=1):
        return list(struct.unpack("<%df" % n, self.take(4 * n)))

    def left(self):
        return len(self.b) - self.pos

    def end(self):
        if self.left():
            raise Bad(f"{self.what}: {self.left()} bytes left over")


def _crc_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        t.append(c)
    return t


_CRC = _crc_table()


def crc32c(b):
    """CRC-32C (Castagnoli, reflected 0x82F63B78), a byte at a time."""
    c, t = 0xFFFFFFFF, _CRC
    for x in b:
        c = (c >> 8) ^ t[(c ^ x) & 0xFF]
    return c ^ 0xFFFFFFFF


def unzstd(frame, size):
    """One zstd frame that must declare content size `size` (by the zstd command)."""
    if len(frame) < 6 or frame[:4] != b"\x28\xb5\x2f\xfd":
        raise Bad("not a zstd frame")
    d = frame[4]
    fcs_flag, single = d >> 6, (d >> 5) & 1
    if fcs_flag == 0 and not single:
        raise Bad("zstd frame without its content size")
    r = subprocess.run(["zstd", "-d", "-c", "-q"], input=bytes(frame), capture_output=True)
    if r.returncode != 0 or len(r.stdout) != size:
        raise Bad(f"zstd frame: {len(r.stdout)} bytes, {size} declared by the segment")
    return r.stdout


# ---- Huffman block ----

def huffman_code(r, nsym):
    """A Huffman block's header: {(length, code): symbol}."""
    A = r.u16()
    if not 2 <= A <= nsym:
        raise Bad(f"Huffman alphabet {A} (stream alphabet {nsym})")
    nib = r.take((A + 1) // 2)
    lengths = []
    for i in range(A):
        v = nib[i // 2] >> (4 * (i % 2)) & 15
        if v > 12:
            raise Bad(f"code length {v}")
        lengths.append(v)
    if A % 2 and nib[-1] >> 4:
        raise Bad("the unused nibble is not 0")
    if sum(1 << (12 - l) for l in lengths if l) != 4096:
        raise Bad("the code is not complete")
    # canonical: by (length, symbol); each code the previous plus one,
    # shifted left when the length grows
    table = {}
    code, prev = -1, 0
    for l, s in sorted((l, s) for s, l in enumerate(lengths) if l):
        code = (code + 1) << (l - prev) if code >= 0 else 0
        prev = l
        table[(l, code)] = s
    return table


def huffman_decode(payload, count, nsym):
    r = Reader(payload, "Huffman block")
    table = huffman_code(r, nsym)
    return huffman_codes(table, r.take(r.left()), count)


def huffman_split_decode(payload, count, nsym):
    """A split Huffman block: the header, three streams' byte lengths, four
    streams of codes (count // 4 symbols each, the last the rest)."""
    r = Reader(payload, "split Huffman block")
    table = huffman_code(r, nsym)
    lens = [r.u32(), r.u32(), r.u32()]
    streams = [r.take(n) for n in lens]
    streams.append(r.take(r.left()))
    q = count // 4
    return np.concatenate([huffman_codes(table, streams[k], q if k < 3 else count - 3 * q)
                           for k in range(4)])


def huffman_codes(table, bits, count):
    """count codes from bits, then only the last byte's zero padding."""
    out = np.empty(count, dtype=np.int64)
    pos, nbits = 0, 8 * len(bits)
    for k in range(count):
        code = l = 0
        while True:  # the code's bits, first (most significant) first
            if pos >= nbits:
                raise Bad("a code runs past the last byte")
            code = code << 1 | (bits[pos >> 3] >> (pos & 7) & 1)
            pos += 1
            l += 1
            if (l, code) in table:
                out[k] = table[(l, code)]
                break
            if l == 12:
                raise Bad("no such code")
    if (nbits - pos) >= 8:
        raise Bad("a whole unused byte after the last code")
    if pos < nbits and bits[-1] >> (pos & 7):
        raise Bad("the padding bits are not 0")
    return out


# ---- entropy stream ----

def entropy_stream(r, nsym, want=None, split_ok=False):
    method, count, length = r.u8(), r.u32(), r.u32()
    if count > 2**31 - 1 or (want is not None and count != want):
        raise Bad(f"entropy stream of {count} symbols, {want} expected")
    payload = r.take(length)
    if method == 0:
        w = 1 if nsym <= 256 else 2
        if length != w * count:
            raise Bad("raw stream of the wrong length")
        out = np.frombuffer(payload, dtype="<u1" if w == 1 else "<u2").astype(np.int64)
    elif method == 1:
        if count < 1 or length != 2:
            raise Bad("constant stream")
        out = np.full(count, struct.unpack("<H", payload)[0], dtype=np.int64)
    elif method == 2:
        if count < 1:
            raise Bad("empty Huffman stream")
        out = huffman_decode(payload, count, nsym)
    elif method == 4 and split_ok:
        if count < 1:
            raise Bad("empty Huffman stream")
        out = huffman_split_decode(payload, count, nsym)
    elif method == 3:
        w = 1 if nsym <= 256 else 2
        raw = unzstd(payload, w * count)
        out = np.frombuffer(raw, dtype="<u1" if w == 1 else "<u2").astype(np.int64)
    else:
        raise Bad(f"entropy method {method}")
    if count and out.max() >= nsym:
        raise Bad("a symbol out of the alphabet")
    return out


# ---- index stream ----

def ctx_body(r, counts, M):
    """The CTX form's symbols, group by group ("Index stream", CTX)."""
    body = Reader(r.take(r.u32()), "CTX body")
    tables = {}
    for g, c in enumerate(counts):
        if not c:
            continue
        k = body.u8() + 1
        if k > M:
            raise Bad("CTX: more symbols than the alphabet")
        syms, freqs = [], []
        for _ in range(k):
            s = body.u8()
            f = 4096
            if k > 1:
                f = shift = 0
                while True:  # LEB128 of f - 1, two bytes at most
                    b = body.u8()
                    f |= (b & 127) << shift
                    shift += 7
                    if not b & 128:
                        break
                    if shift >= 14:
                        raise Bad("CTX: a frequency over two bytes")
                f += 1
            if s >= M or (syms and s <= syms[-1]):
                raise Bad("CTX: symbols not ascending below M")
            syms.append(s)
            freqs.append(f)
        if sum(freqs) != 4096:
            raise Bad("CTX: frequencies do not sum to 4096")
        cum = [0]
        for f in freqs:
            cum.append(cum[-1] + f)
        tables[g] = (syms, freqs, cum)
    x = [body.u32(), body.u32()]  # two states; position i decodes from x[i % 2]
    out = []
    for g, c in enumerate(counts):
        if not c:
            continue
        syms, freqs, cum = tables[g]
        if len(syms) == 1:  # reads nothing, leaves both states as they are
            out.extend(syms * c)
            continue
        for _ in range(c):
            s = len(out) % 2
            slot = x[s] & 4095
            j = next(i for i in range(len(syms)) if cum[i] <= slot < cum[i + 1])
            out.append(syms[j])
            x[s] = freqs[j] * (x[s] >> 12) + slot - cum[j]
            while x[s] < (1 << 23):
                x[s] = (x[s] << 8) | body.u8()
    if x != [1 << 23, 1 << 23]:
        raise Bad("CTX: the final states are not 2^23")
    body.end()
    return np.array(out, dtype=np.int64)


def index_stream(r, n, lcur, prev=None, lprev=None, version=3):
    stages = r.u8()
    if stages & ~15:
        raise Bad("index stream: unknown stage bits")
    delta, rearranged, rle, ctx = stages & 1, stages & 2, stages & 4, stages & 8
    if bool(delta) != (prev is not None) or (rearranged and not delta):
        raise Bad("index stream: DELTA must be set exactly with a parent; REARRANGED needs it")
    if ctx and (not rearranged or rle or version < 3):
        raise Bad("index stream: CTX needs REARRANGED, excludes RLE, is version 3's")
    M = max(lcur, lprev) if delta else lcur
    if ctx:
        if n and prev.max() >= lprev:
            raise Bad("index stream: a parent level out of range")
        d = ctx_body(r, np.bincount(prev, minlength=lprev)[:lprev].tolist(), M)
    elif rle:
        ntok, nlen = r.u32(), r.u32()
        if ntok > n or nlen > (n // 2) * 5:
            raise Bad("index stream: RLE counts")
        tokens = entropy_stream(r, 2 * M, ntok, version >= 6)
        lens = entropy_stream(r, 256, nlen, version >= 6)
        syms, li = [], 0
        for t in tokens:
            if t < M:
                syms.append(int(t))
                continue
            v = shift = 0
            for k in range(5):  # unsigned LEB128, at most 5 bytes
                if li >= len(lens):
                    raise Bad("run lengths run out")
                b = int(lens[li])
                li += 1
                v |= (b & 127) << shift
                shift += 7
                if not b & 128:
                    break
            else:
                raise Bad("a run length over 5 bytes")
            syms.extend([int(t) - M] * (v + 2))
            if len(syms) > n:
                raise Bad("runs past n")
        if len(syms) != n or li != len(lens):
            raise Bad("runs do not make n symbols, or leave run-length bytes")
        d = np.array(syms, dtype=np.int64)
    else:
        d = entropy_stream(r, M, n, version >= 6)
    if rearranged:  # positions grouped by the parent's level, in order
        order = np.argsort(prev, kind="stable")
        u = np.empty(n, dtype=np.int64)
        u[order] = d
        d = u
    cur = (prev.astype(np.int64) + d) % M if delta else d
    if n and cur.max() >= lcur:
        raise Bad("a level out of range")
    return cur.astype(np.uint8)


# ---- blob ----

def blob(r, k, pred_ok=False):
    """A blob's k bytes; with pred_ok (a delta of version 4) also a
    predicted one's, as (planes, True): "Predicted blobs"."""
    method, length = r.u8(), r.u32()
    payload = r.take(length)
    if method & 0x80 and pred_ok:
        return blob_bytes(method & 0x7F, payload, k), True
    b = blob_bytes(method, payload, k)
    return (b, False) if pred_ok else b


def blob_bytes(method, payload, k):
    length = len(payload)
    if method == 0:
        if length != k:
            raise Bad("raw blob of the wrong length")
        return payload
    if method == 3:
        return unzstd(payload, k)
    raise Bad(f"blob method {method}")


# ---- segment ----

DTYPE_SIZE = {1: 4, 2: 2, 3: 2}


def segment_header(r, version=1):
    s = {"tensor": r.u32(), "first": r.u64(), "n": r.u64(), "encoding": r.u8(), "dtype": r.u8(),
         "transform": r.u8()}
    if r.u8():
        raise Bad("segment: reserved byte")
    if s["encoding"] not in (1, 2) or s["dtype"] not in DTYPE_SIZE:
        raise Bad("segment: encoding or dtype")
    if s["transform"] not in (0, 1, 2) or (s["transform"] and (version < 2 or s["encoding"] != 1)):
        raise Bad("segment: transform")  # "Transforms": quantized, version 2
    return s


def codebook(r):
    B = r.u8()
    if not 1 <= B <= 64:
        raise Bad(f"{B} bins")
    c = r.f32(B)
    raw = struct.pack("<%df" % B, *c)
    if any(not np.isfinite(x) for x in c) or any(c[i] >= c[i + 1] for i in range(B - 1)):
        raise Bad("centroids not ascending, distinct and finite")
    return B, raw


def protected(r, n):
    k = r.u64()
    if k > n:
        raise Bad("more protected values than elements")
    return np.frombuffer(blob(r, 2 * k), dtype="<u2").copy()


def unplane_xor(planes, pred, w):
    """"Predicted blobs": w byte planes XOR the prediction's bytes."""
    m = len(planes) // w
    x = np.frombuffer(planes, dtype=np.uint8).reshape(w, m).T ^ np.frombuffer(pred, dtype=np.uint8).reshape(m, w)
    return x.tobytes()


def prot_prediction(levels, B, parent):
    """"Predicted blobs": at each protected position, the parent's protected
    value if its level there is protected, else its level's value as bf16."""
    pos = np.flatnonzero(levels == B + 1)
    pl = parent["levels"][pos]
    pb = parent["B"] + 1
    pred = f32_to_bf16(level_values(parent)[np.minimum(pl, pb - 1)])
    ppos = np.flatnonzero(parent["levels"] == pb)
    hit = pl == pb
    pred[hit] = parent["prot"][np.searchsorted(ppos, pos[hit])]
    return pred.astype("<u2").tobytes()


def check_prot(s):
    if int((s["levels"] == s["B"] + 1).sum()) != len(s["prot"]):
        raise Bad("protected values and protected levels disagree")


def planes_blob(payload, k, w, pred):
    """"Planes": w entropy streams of k / w byte symbols; element i's
    planes, rotated right by one bit, XOR its prediction (pred, or
    nothing)."""
    r = Reader(payload, "planes")
    m = k // w
    u = np.zeros(m, dtype=np.uint64)
    for j in range(w):
        u |= entropy_stream(r, 256, m).astype(np.uint64) << np.uint64(8 * j)
    r.end()
    bits = np.uint64(8 * w)
    v = (u >> np.uint64(1)) | ((u & np.uint64(1)) << (bits - np.uint64(1)))
    if pred is not None:
        v ^= np.frombuffer(pred, dtype="<u4" if w == 4 else "<u2").astype(np.uint64)
    return v.astype("<u4" if w == 4 else "<u2").tobytes()


def lossless_values(r, s, parent, version, pred_ok):
    """A lossless segment's value blob: plain, predicted (version 4) or in
    planes (version 5, predicted only where a delta's may be)."""
    w = DTYPE_SIZE[s["dtype"]]
    k = s["n"] * w
    if r.left() and r.b[r.pos] & 0x7F == 4:
        method, length = r.u8(), r.u32()
        payload = r.take(length)
        if version < 5 or (method & 0x80 and not pred_ok):
            raise Bad("a PLANES blob where none may be")
        return planes_blob(payload, k, w, parent["raw"] if method & 0x80 else None)
    if pred_ok:
        raw, pred = blob(r, k, True)
        return unplane_xor(raw, parent["raw"], w) if pred else raw
    return blob(r, k)


def segment(r, parent=None, sparse=False, version=1):
    s = segment_header(r, version)
    if parent is not None and any(s[k] != parent[k]
                                  for k in ("tensor", "first", "n", "encoding", "dtype", "transform")):
        raise Bad("a segment that is not its parent's")
    n = s["n"]
    pred_ok = parent is not None and not sparse and version >= 4
    if s["encoding"] == 2 and not sparse:
        s["raw"] = lossless_values(r, s, parent, version, pred_ok)
        return s
    if s["encoding"] == 2:  # a sparse record's: plain
        s["raw"] = blob(r, n * DTYPE_SIZE[s["dtype"]])
        return s
    if sparse:  # "Sparse partial record"
        B, s["centroids"] = parent["B"], parent["centroids"]
        block, nb = r.u32(), r.u32()
        if not 1 <= block <= 2**31 or nb > -(-n // block):
            raise Bad("sparse: block or block count")
        blocks = np.frombuffer(blob(r, 4 * nb), dtype="<u4")
        if nb and (np.any(np.diff(blocks.astype(np.int64)) <= 0) or blocks[-1] >= -(-n // block)):
            raise Bad("sparse: block list")
        mask = np.zeros(n, dtype=bool)
        for b in blocks:
            mask[int(b) * block:min(n, (int(b) + 1) * block)] = True
        prot_in = protected(r, int(mask.sum()))
        inner = index_stream(r, int(mask.sum()), B + 2, parent["levels"][mask], B + 2, version)
        levels = parent["levels"].copy()
        levels[mask] = inner
        pprot_pos = np.flatnonzero(parent["levels"] == B + 1)
        keep = parent["prot"][~mask[pprot_pos]]
        # in position order: the parent's outside the blocks, the record's inside
        pos = np.concatenate([pprot_pos[~mask[pprot_pos]], np.flatnonzero(mask & (levels == B + 1))])
        vals = np.concatenate([keep, prot_in])
        if int((inner == B + 1).sum()) != len(prot_in):
            raise Bad("sparse: protected values and levels disagree")
        s.update(B=B, levels=levels, prot=vals[np.argsort(pos, kind="stable")].astype(np.uint16))
        check_prot(s)
        return s
    B, s["centroids"] = codebook(r)
    s["B"] = B
    if pred_ok:
        k = r.u64()
        if k > n:
            raise Bad("more protected values than elements")
        pb, pred = blob(r, 2 * k, True)
    else:
        s["prot"], pred = protected(r, n), False
    s["levels"] = index_stream(r, n, B + 2,
                               parent["levels"] if parent is not None else None,
                               parent["B"] + 2 if parent is not None else None, version)
    if pred_ok:
        if int((s["levels"] == B + 1).sum()) != k:
            raise Bad("protected values and protected levels disagree")
        if pred:
            pb = unplane_xor(pb, prot_prediction(s["levels"], B, parent), 2)
        s["prot"] = np.frombuffer(pb, dtype="<u2").copy()
    check_prot(s)
    return s


# ---- chunk record ----

def record(b, parent=None):
    """A chunk record, materialized (levels absolute), against parent's."""
    if len(b) < 44:
        raise Bad("record: shorter than its header")
    r = Reader(b, "record")
    if r.take(4) != b"RCKR":
        raise Bad("record: magic")
    version, compat, kind, flags = r.u8(), r.u8(), r.u8(), r.u8()
    step, par, nseg, reserved, body = r.u64(), r.u64(), r.u32(), r.u32(), r.u64()
    if compat > 6:
        raise Bad("record: a newer version")  # RCKPT_EVERSION
    if compat == 0 or compat > version or flags or reserved or kind not in (1, 2, 3):
        raise Bad("record: header")
    if (kind == 1) != (par == 2**64 - 1) or par == step:
        raise Bad("record: parent")
    if 40 + body + 4 != len(b):
        raise Bad("record: body length")
    if struct.unpack("<I", b[40 + body:])[0] != crc32c(b[:40 + body]):
        raise Bad("record: CRC-32C mismatch")  # RCKPT_ECHECKSUM, before any segment
    if kind != 1:
        if parent is None or parent["step"] != par:
            raise Bad("record: another parent")  # -ESTALE
        if len(parent["seg"]) != nseg:
            raise Bad("record: not the parent's layout")
    rb = Reader(b[40:40 + body], "segments")
    segs = [segment(rb, parent["seg"][i] if kind != 1 else None, kind == 3, version)
            for i in range(nseg)]
    rb.end()
    return {"step": step, "kind": kind, "parent": par, "seg": segs}


def digest(rec):
    """"Chunk digest": SHA-256 of the decoded content."""
    h = hashlib.sha256()
    for s in rec["seg"]:
        h.update(struct.pack("<IQQBB", s["tensor"], s["first"], s["n"], s["encoding"], s["dtype"]))
        if s["transform"]:
            h.update(bytes([s["transform"]]))
        if s["encoding"] == 1:
            h.update(bytes([s["B"]]) + s["centroids"] + struct.pack("<Q", len(s["prot"])))
            h.update(s["prot"].astype("<u2").tobytes() + s["levels"].tobytes())
        else:
            h.update(s["raw"])
    return h.digest()


# ---- manifest ----

def manifest(b):
    if len(b) < 4 or struct.unpack("<I", b[-4:])[0] != crc32c(b[:-4]):
        raise Bad("manifest: CRC-32C mismatch")
    r = Reader(b[:-4], "manifest")
    if r.take(4) != b"RCKM":
        raise Bad("manifest: magic")
    version, compat, flags = r.u8(), r.u8(), r.u16()
    if compat not in (1, 2, 3) or version < compat or flags:
        raise Bad("manifest: header")
    m = {"step": r.u64(), "parent": r.u64()}
    nt, nc = r.u32(), r.u32()
    if nt > 2**20 or nc > 2**20:
        raise Bad("manifest: counts")
    m["chunk_params"] = r.u64()
    m["tensors"] = []
    for _ in range(nt):
        ln = r.u16()
        if not 1 <= ln <= 1024:
            raise Bad("manifest: name length")
        name = r.take(ln).decode("utf-8")
        dtype, kind, enc, ndim = r.u8(), r.u8(), r.u8(), r.u8()
        if ndim > 8 or dtype not in DTYPE_SIZE or enc not in (1, 2) or kind > (7 if version > 1 else 4):
            raise Bad("manifest: tensor")
        shape = [r.u64() for _ in range(ndim)]
        segs = [(r.u32(), r.u32(), r.u64()) for _ in range(r.u32())]
        if sum(s[2] for s in segs) != int(np.prod(shape, dtype=np.uint64)) or any(s[0] >= nc for s in segs):
            raise Bad(f"manifest: segments of {name}")
        t = {"name": name, "dtype": dtype, "kind": kind, "encoding": enc, "shape": shape,
             "segs": segs, "norm": None, "eps": 0.0}
        if kind >= 5:  # an optimizer's: its second moment, if NORM
            norm, eps = r.u32(), r.f32()[0]
            if norm != 2**32 - 1:
                if kind != 5 or not np.isfinite(eps) or eps < 0:
                    raise Bad(f"manifest: norm of {name}")
                t["norm"], t["eps"] = norm, eps
        m["tensors"].append(t)
    names = [t["name"] for t in m["tensors"]]
    if names != sorted(set(names), key=lambda x: x.encode()):
        raise Bad("manifest: names not sorted and distinct")
    for t in m["tensors"]:
        if t["norm"] is not None:
            v = m["tensors"][t["norm"]] if t["norm"] < nt else None
            if v is None or v["kind"] != 6 or v["norm"] is not None or \
                    int(np.prod(v["shape"], dtype=np.uint64)) != int(np.prod(t["shape"], dtype=np.uint64)):
                raise Bad(f"manifest: {t['name']} is normalized by no second moment")
    m["config"] = r.take(32)
    m["quality"], m["raw_bytes"], m["enc_bytes"] = struct.unpack("<dQQ", r.take(24))
    if version > 1:
        m["update_error"] = struct.unpack("<d", r.take(8))[0]
    if version > 2 and compat < 3:
        raise Bad("manifest: version 3 chunk entries under an older compat")
    m["chunks"] = []
    for _ in range(nc):
        c = {"elements": r.u32(), "nseg": r.u32(), "record_bytes": r.u64(), "sha256": r.take(32),
             "base_bytes": 0, "base_sha256": None}
        if version > 2:  # the stored base: its bytes' length and SHA-256 (0: none, zeros)
            c["base_bytes"], c["base_sha256"] = r.u64(), r.take(32)
            if c["base_bytes"] == 0 and c["base_sha256"] != bytes(32):
                raise Bad("manifest: a digest of no stored base")
        m["chunks"].append(c)
    if version > 2 and not any(c["base_bytes"] for c in m["chunks"]):
        raise Bad("manifest: version 3 names no stored base")
    r.end()
    return m


# ---- step file ----

def step_file(b):
    r = Reader(b, "step file")
    if r.take(4) != b"RCKF":
        raise Bad("step file: magic")
    version, compat, flags = r.u8(), r.u8(), r.u16()
    if compat != 1 or flags:
        raise Bad("step file: header")
    nc, mlen = r.u32(), r.u64()
    m = manifest(r.take(mlen))
    if nc != len(m["chunks"]):
        raise Bad("step file: chunk count")
    recs = [r.take(r.u64()) for _ in range(nc)]
    r.end()
    return m, recs


# ---- values ----

def bf16_to_f32(h):
    return (h.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x):
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)  # round to nearest even


def log2_inverse(x):
    """"Transforms", LOG2: x * 2^23 rounded (ties to even), plus 0x3f800000,
    as binary32 bits clamped to [0, FLT_MAX]; NaN stays NaN."""
    x = x.astype(np.float32)
    y = x.astype(np.float64) * 2.0**23  # exact
    k = np.clip(np.rint(np.nan_to_num(y, nan=0.0)), -2.0**31, 2.0**31) + 0x3F800000
    bits = np.clip(k, 0, 0x7F7FFFFF).astype(np.uint32)
    out = bits.view(np.float32).copy()
    out[np.isnan(x)] = np.nan
    return out


def level_values(s):
    """The value of each level but the protected one ("Concepts"), f32."""
    c = np.frombuffer(s["centroids"], dtype="<f4")
    P = int((c < 0).sum())
    return np.concatenate([c[:P], [np.float32(0)], c[P:]]).astype(np.float32)


def values(s):
    """A quantized segment's values (f32): "Concepts", then LOG2 undone
    (NORM needs the second moment: tensor_bytes)."""
    B = s["B"]
    lv = np.concatenate([level_values(s), [np.float32(0)]]).astype(np.float32)
    out = lv[s["levels"]]
    out[s["levels"] == B + 1] = bf16_to_f32(s["prot"])
    return log2_inverse(out) if s["transform"] == 1 else out


def tensor_f32(t, chunks):
    """A quantized tensor's values (f32), NORM multiplied back."""
    if any(chunks[c]["seg"][i]["n"] != n for c, i, n in t["segs"]):
        raise Bad(f"{t['name']}: a segment of another size")
    v = np.concatenate([values(chunks[c]["seg"][i]) for c, i, n in t["segs"]])
    if any((chunks[c]["seg"][i]["transform"] == 2) != (t["norm"] is not None) for c, i, n in t["segs"]):
        raise Bad(f"{t['name']}: NORM segments and the manifest's norm disagree")
    if t["norm"] is not None:  # m = y * (sqrtf(v') + eps), in binary32
        w = tensor_f32(t["norm_t"], chunks)
        v = (v * (np.sqrt(w, dtype=np.float32) + np.float32(t["eps"]))).astype(np.float32)
    return v


def tensor_bytes(t, chunks):
    parts = []
    if t["encoding"] == 1:
        v = tensor_f32(t, chunks)
        if t["dtype"] == 1:
            return v.astype("<f4").tobytes()
        if t["dtype"] == 2:
            return v.astype("<f2").tobytes()
        return f32_to_bf16(v).astype("<u2").tobytes()
    for c, i, n in t["segs"]:
        s = chunks[c]["seg"][i]
        if s["n"] != n:
            raise Bad(f"{t['name']}: a segment of another size")
        if s["encoding"] == 2:
            parts.append(s["raw"])
            continue
        v = values(s)
        if t["dtype"] == 1:
            parts.append(v.astype("<f4").tobytes())
        elif t["dtype"] == 2:
            parts.append(v.astype("<f2").tobytes())
        else:
            parts.append(f32_to_bf16(v).astype("<u2").tobytes())
    return b"".join(parts)


def decode_chain(paths):
    """The tensors (name -> (dtype, shape, bytes)) of the last of a chain."""
    chunks = None
    for p in paths:
        with open(p, "rb") as f:
            m, recs = step_file(f.read())
        chunks = [record(b, chunks[i] if chunks else None) for i, b in enumerate(recs)]
        for i, (rec, want) in enumerate(zip(chunks, m["chunks"])):
            if digest(rec) != want["sha256"]:
                raise Bad(f"{p}: chunk {i}: SHA-256 of the decoded chunk differs from the manifest's")
    names = {1: "F32", 2: "F16", 3: "BF16"}
    for t in m["tensors"]:
        t["norm_t"] = m["tensors"][t["norm"]] if t["norm"] is not None else None
    return {t["name"]: (names[t["dtype"]], t["shape"], tensor_bytes(t, chunks)) for t in m["tensors"]}


def read_safetensors(path):
    with open(path, "rb") as f:
        b = f.read()
    (n,) = struct.unpack("<Q", b[:8])
    head = json.loads(b[8:8 + n])
    out = {}
    for k, e in head.items():
        if k != "__metadata__":
            s, t = e["data_offsets"]
            out[k] = (e["dtype"], e["shape"], b[8 + n + s:8 + n + t])
    return out


def write_safetensors(path, tensors):
    head, data = {}, b""
    for k in sorted(tensors):
        dt, shape, raw = tensors[k]
        head[k] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(head, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


# ---- store messages (formats/store.md, frames of formats/cls-wire.md) ----

def frame(b, want_type, newest=1, oldest=1):
    """A cls-wire frame of type want_type whose layout this decoder knows
    (versions oldest..newest): its payload's Reader."""
    if len(b) < 12:
        raise Bad("frame: shorter than 12 bytes")
    magic, version, compat, typ, flags, length = struct.unpack("<HBBHHI", b[:12])
    if magic != 0x4B52 or flags or compat == 0 or compat > version or typ != want_type:
        raise Bad("frame: header")
    if compat > newest:
        raise Bad("frame: a newer version")  # RCKPT_EVERSION
    if version < oldest:
        raise Bad("frame: an older layout than the message needs")
    if length != len(b) - 12:
        raise Bad("frame: length")
    return Reader(b[12:], f"message 0x{want_type:04x}")


def wire_blob(r):
    return r.take(r.u32())


def steps_set(r, n_max=1 << 20):
    n = r.u32()
    if n > n_max:
        raise Bad("a step set too long")
    s = [r.u64() for _ in range(n)]
    if any(a >= b for a, b in zip(s, s[1:])):
        raise Bad("steps not increasing")
    return s


NONE = 2**64 - 1


def index_entry(r):
    """A chunk's index entry (store.md "Objects"): step, offset, length,
    kind (1 base, 2 delta, 3 sparse), parent (2^64-1 iff a base)."""
    e = {"step": r.u64(), "offset": r.u64(), "length": r.u32(), "kind": r.u8(), "parent": r.u64()}
    if (e["step"] == NONE or not 1 <= e["kind"] <= 3 or e["offset"] > 1 << 30
            or e["length"] > (1 << 30) - e["offset"] or (e["kind"] == 1) != (e["parent"] == NONE)):
        raise Bad("index entry")
    return e


def message(b, name):
    """A store message by name; its fields (trailing bytes of a newer
    encoder are skipped, as cls-wire says)."""
    if name == "commit":
        r = frame(b, 0x0105)
        m = {"expect": r.u64(), "step": r.u64(), "summary": wire_blob(r), "writer": r.u64()}
        if len(m["summary"]) > 4096 or m["writer"] == 0:
            raise Bad("COMMIT")
    elif name == "materialize":
        r = frame(b, 0x0102)
        m = {"step": r.u64(), "budget": r.u64(), "start": wire_blob(r)}
        if m["step"] == NONE:
            raise Bad("MATERIALIZE")
    elif name == "compact":  # version 3: the compactor's token first
        r = frame(b, 0x010A, 3, 3)
        m = {"token": r.u64(), "upto": r.u64()}
        m["keep"] = steps_set(r)
        if m["upto"] == NONE or any(k > m["upto"] for k in m["keep"]):
            raise Bad("COMPACT")
    elif name == "drop":
        r = frame(b, 0x010B, 3, 3)
        m = {"token": r.u64()}
        m["steps"] = steps_set(r)
    elif name == "pin":
        r = frame(b, 0x010C, 3, 3)
        m = {"token": r.u64(), "step": r.u64(), "on": r.u8()}
        if m["step"] == NONE or m["on"] > 1:
            raise Bad("PIN")
    elif name == "retire":
        r = frame(b, 0x010F, 3, 3)
        m = {"token": r.u64(), "step": r.u64(), "kind": r.u8()}
        if m["kind"] > 2 or (m["kind"] == 0) == (m["step"] == NONE) or (m["kind"] == 2 and m["token"] == 0):
            raise Bad("RETIRE")
    elif name == "put":
        r = frame(b, 0x0110, 3, 3)
        m = {"token": r.u64(), "step": r.u64(), "bytes": wire_blob(r)}
        if m["token"] == 0 or m["step"] == NONE or len(m["bytes"]) > 80 << 20:
            raise Bad("PUT")
    elif name == "append":  # version 2: the writer's token first; 4: a head record after the record
        r = frame(b, 0x0101, 4, 2)
        m = {"writer": r.u64(), "record": wire_blob(r)}
        if b[2] >= 4:
            m["head"] = wire_blob(r)
        if m["writer"] == 0:
            raise Bad("APPEND")
    elif name == "trim":
        r = frame(b, 0x0104, 2, 2)
        m = {"writer": r.u64(), "after": r.u64()}
        if m["writer"] == 0:
            raise Bad("TRIM")
    elif name == "claim":  # version 3: flags (bit 0, a deleter's claim)
        r = frame(b, 0x010E, 3, 3)
        m = {"prev": r.u64(), "token": r.u64(), "flags": r.u8()}
        if m["token"] <= m["prev"]:
            raise Bad("CLAIM: a token not after the one it replaces")
        if m["flags"] & ~1:
            raise Bad("CLAIM: an unknown flag")
    elif name == "materialized":
        r = frame(b, 0x0103)
        m = {"reached": r.u64(), "done": r.u8(), "record": wire_blob(r)}
        if m["done"] > 1:
            raise Bad("MATERIALIZED: done")
    elif name == "head":  # version 2 (compat 1): the head's summary after the count
        r = frame(b, 0x0106, 2)
        m = {"head": r.u64(), "count": r.u64(), "summary": b""}
        if b[2] >= 2:
            m["summary"] = wire_blob(r)
            if len(m["summary"]) > 4096:
                raise Bad("HEAD: a summary over 4096 bytes")
    elif name == "list":
        r = frame(b, 0x0107)
        m = {"after": r.u64(), "max": r.u32()}
        if not 1 <= m["max"] <= 1024:
            raise Bad("LIST: max")
    elif name == "index":
        r = frame(b, 0x0109)
        m = {"entries": [index_entry(r) for _ in range(r.u32())]}
        steps = [e["step"] for e in m["entries"]]
        if any(a >= b for a, b in zip(steps, steps[1:])):
            raise Bad("INDEX: entries not in increasing step order")
    elif name == "steps":
        r = frame(b, 0x0108)
        n = r.u32()
        if n > 1024:
            raise Bad("STEPS")
        m = {"steps": []}
        for _ in range(n):
            st, su = r.u64(), wire_blob(r)
            if len(su) > 4096:
                raise Bad("STEPS: a summary over 4096 bytes")
            m["steps"].append((st, su))
        m["more"] = r.u8()
        if m["more"] > 1:
            raise Bad("STEPS: more")
    else:
        raise ValueError(name)
    return m


def attachment(b, step):
    """"Attachment": the raw bytes kept with a step."""
    r = Reader(b, "attachment")
    if r.take(4) != b"RCKA":
        raise Bad("attachment: magic")
    version, compat, flags = r.u8(), r.u8(), r.u16()
    if compat == 0 or compat > version:
        raise Bad("attachment: compat")
    if compat > 1:
        raise Bad("attachment: a newer version")
    if compat == 0 or flags or r.u64() != step:
        raise Bad("attachment: header or step")
    size, crc = r.u64(), r.u32()
    if size > 1 << 30:
        raise Bad("attachment: length")
    raw = unzstd(r.take(r.left()), size)
    if crc32c(raw) != crc:
        raise Bad("attachment: CRC-32C mismatch")
    return raw


# ---- PCR (formats/pcr.md) ----

def pcr_record(b):
    """A record object: "Record object". -> dict: number, groups, images
    (id, name, label, header, scans)."""
    r = Reader(b, "PCR record")
    if len(b) < 28 or r.take(4) != b"rPCR":
        raise Bad("PCR record: magic")
    version, flags, N, G, reserved, head_len, number = r.u16(), r.u16(), r.u32(), r.u16(), r.u16(), r.u32(), r.u32()
    if version > 1:
        raise Bad("PCR record: a newer version")  # RCKPT_EVERSION
    if version != 1 or flags or reserved or not 1 <= N <= 16384 or not 1 <= G <= 64:
        raise Bad("PCR record: header")
    if head_len < 24 + 12 * G + 4 or head_len > len(b) or head_len > 64 << 20:
        raise Bad("PCR record: head length")
    if struct.unpack("<I", b[head_len - 4:head_len])[0] != crc32c(b[:head_len - 4]):
        raise Bad("PCR record: head CRC-32C mismatch")  # RCKPT_ECHECKSUM
    groups, start = [], head_len
    for _ in range(G):
        end, crc = r.u64(), r.u32()
        if end <= start:
            raise Bad("PCR record: group ends not increasing")
        groups.append((start, end, crc))
        start = end
    if start != len(b) or len(b) > 1 << 30:
        raise Bad("PCR record: the object does not end at its last group")
    images = []
    for i in range(N):
        iid = r.u32()
        if images and iid != images[-1]["id"] + 1:
            raise Bad("PCR record: ids not consecutive")
        name = r.take(r.u8())
        if not name or b"/" in name or name in (b".", b"..") or any(c < 32 or c == 127 for c in name):
            raise Bad("PCR record: a name")
        ll = r.u16()
        if ll > 1024:
            raise Bad("PCR record: a label")
        label = r.take(ll)
        hl = r.u32()
        if not 1 <= hl <= 65536:
            raise Bad("PCR record: a header length")
        header = r.take(hl)
        n = r.u8()
        if not 1 <= n <= G:
            raise Bad("PCR record: scans")
        lens = [r.u32() for _ in range(n)]
        if min(lens) < 1:
            raise Bad("PCR record: an empty scan")
        images.append({"id": iid, "name": name.decode(), "label": label, "header": header, "lens": lens})
    if r.pos != head_len - 4:
        raise Bad("PCR record: the image table does not end at the head's CRC")
    for g, (a, e, crc) in enumerate(groups):
        if e - a != sum(im["lens"][g] for im in images if len(im["lens"]) > g):
            raise Bad(f"PCR record: group {g + 1}'s size is not its scans'")
        if crc32c(b[a:e]) != crc:
            raise Bad(f"PCR record: group {g + 1} CRC-32C mismatch")
    for im in images:  # each image's scans, cut out of their groups
        im["scans"] = []
    for g, (a, e, _) in enumerate(groups):
        at = a
        for im in images:
            if len(im["lens"]) > g:
                im["scans"].append(b[at:at + im["lens"][g]])
                at += im["lens"][g]
    return {"number": number, "groups": G, "images": images}


def pcr_jpegs(rec, k):
    """Each image through group k (None: all): header, scans 1..k, EOI."""
    return {im["name"]: im["header"] + b"".join(im["scans"][:k]) + b"\xff\xd9" for im in rec["images"]}


def pcr_message(b, name):
    """A cls_pcr message by name (pcr.md "cls_pcr methods"); its fields."""
    def k_ok(k):
        return k == 0xFFFF or 1 <= k <= 64
    if name == "read":
        r = frame(b, 0x0201)
        m = {"k": r.u16()}
        if not k_ok(m["k"]):
            raise Bad("READ: k")
    elif name == "prefix":
        r = frame(b, 0x0202)
        m = {"k": r.u16(), "bytes": wire_blob(r)}
        if not 1 <= m["k"] <= 64:
            raise Bad("PREFIX: groups")
    elif name == "images":
        r = frame(b, 0x0203)
        m = {"k": r.u16()}
        n = r.u32()
        if not k_ok(m["k"]) or not 1 <= n <= 16384:
            raise Bad("IMAGES")
        m["idx"] = [r.u32() for _ in range(n)]
    elif name == "jpegs":
        r = frame(b, 0x0204)
        n = r.u32()
        if n > 16384:
            raise Bad("JPEGS: count")
        m = {"images": []}
        for _ in range(n):
            e = {"id": r.u32(), "name": r.take(r.u8()), "label": r.take(r.u16()), "jpeg": wire_blob(r)}
            nm = e["name"]
            if (not nm or b"/" in nm or nm in (b".", b"..") or any(c < 32 or c == 127 for c in nm)
                    or len(e["label"]) > 1024 or len(e["jpeg"]) < 4):
                raise Bad("JPEGS: an entry")
            m["images"].append(e)
    elif name == "stat":
        r = frame(b, 0x0205)
        m = {"record": r.u32(), "images": r.u32(), "head_len": r.u32()}
        g = r.u16()
        m["size"] = r.u64()
        if not 1 <= g <= 64:
            raise Bad("STAT: groups")
        m["ends"] = [r.u64() for _ in range(g)]
    else:
        raise ValueError(name)
    return m


def pcr_index(b):
    """The dataset index: "Dataset index"."""
    if len(b) < 4 or struct.unpack("<I", b[-4:])[0] != crc32c(b[:-4]):
        raise Bad("PCR index: CRC-32C mismatch")
    r = Reader(b[:-4], "PCR index")
    if r.take(4) != b"rPCX":
        raise Bad("PCR index: magic")
    version, flags, R_, images, G, reserved = r.u16(), r.u16(), r.u32(), r.u32(), r.u16(), r.u16()
    if version != 1 or flags or reserved or not 1 <= R_ <= 1 << 20 or images > 1 << 26 or not 1 <= G <= 64:
        raise Bad("PCR index: header")
    x = {"records": R_, "images": images, "groups": G, "measured": r.u32(), "created": r.u64(),
         "source_bytes": r.u64(), "head_bytes": r.u64()}
    x["per_group"] = [(r.u64(), struct.unpack("<d", r.take(8))[0], r.u32()) for _ in range(G)]
    recs, first = [], 0
    for _ in range(R_):
        fid, n, hl, g = r.u32(), r.u32(), r.u32(), r.u16()
        if fid != first or not 1 <= g <= G:
            raise Bad("PCR index: a record")
        recs.append({"first": fid, "images": n, "head_len": hl, "ends": [r.u64() for _ in range(g)]})
        first += n
    if first != images:
        raise Bad("PCR index: the records' images do not sum up")
    L = r.u32()
    lens = [r.u16() for _ in range(images)]
    if sum(lens) != L or max(lens, default=0) > 1024:
        raise Bad("PCR index: labels")
    labels, at = [], r.take(L)
    pos = 0
    for n in lens:
        labels.append(at[pos:pos + n])
        pos += n
    r.end()
    x["record"], x["labels"] = recs, labels
    return x


def main(argv):
    if len(argv) >= 1 and argv[0] == "pcr":
        return pcr_main(argv[1:])
    if len(argv) < 2 or argv[0] not in ("decode", "compare") or argv[0] in ("-h", "--help"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    try:
        if argv[0] == "decode":
            out = None
            if argv[1] == "-o":
                out, argv = argv[2], argv[2:]
            t = decode_chain(argv[1:])
            if out:
                write_safetensors(out, t)
            print(f"decoded {len(t)} tensors, every chunk's SHA-256 as its manifest says")
            return 0
        got, ref = read_safetensors(argv[1]), decode_chain(argv[2:])
    except (Bad, OSError, ValueError) as e:
        print(f"rckpt_ref: {e}", file=sys.stderr)
        return 1
    bad = [k for k in ref if k not in got or got[k][0] != ref[k][0] or list(got[k][1]) != list(ref[k][1])
           or got[k][2] != ref[k][2]]
    bad += [k for k in got if k not in ref]
    for k in bad:
        print(f"rckpt_ref: {k}: the C decoder's tensor differs from the reference's", file=sys.stderr)
    if not bad:
        print(f"{len(ref)} tensors equal, every chunk's SHA-256 as its manifest says")
    return 1 if bad else 0


def pcr_main(argv):
    import argparse
    import os
    ap = argparse.ArgumentParser(prog="rckpt_ref.py pcr")
    ap.add_argument("--group", default="all")
    ap.add_argument("-o", required=True)
    ap.add_argument("records", nargs="+")
    a = ap.parse_args(argv)
    k = None if a.group == "all" else int(a.group)
    os.makedirs(a.o, exist_ok=True)
    n = 0
    try:
        for p in a.records:
            with open(p, "rb") as f:
                for name, jpeg in pcr_jpegs(pcr_record(f.read()), k).items():
                    with open(os.path.join(a.o, name), "wb") as g:
                        g.write(jpeg)
                    n += 1
    except (Bad, OSError) as e:
        print(f"rckpt_ref: {e}", file=sys.stderr)
        return 1
    print(f"{n} images")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
