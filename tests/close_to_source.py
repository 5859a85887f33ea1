#!/usr/bin/python3
"""close_to_source.py — is a restored checkpoint the one that was saved?

    close_to_source.py [--eps E] [--cap C] SOURCE.safetensors RESTORED.safetensors [SOURCE RESTORED]...

An oracle that shares no code with rckpt's decoder: it reads both files
with its own safetensors reader (numpy) and checks what the codec promises
(formats/checkpoint.md, docs/compression.md "What eps means"):

  - the same tensors, dtypes and shapes;
  - every 1-D tensor (norms and biases, which the codec keeps as bf16)
    bit-equal to the source's bf16, round to nearest even (a BF16 source's
    own bits; an F16 source's bf16 narrowed back to F16): this names the
    step, since training moves them between any two checkpoints;
  - the quantized tensors within the threshold, by the measure eps bounds:
    sum g^2 (w - r)^2 / sum g^2 w^2 over all of them <= E, and no tensor's
    own <= C * E, with g the gradient RMS of SOURCE.grads.safetensors (g = 1
    without it). A small slack covers the order of floating-point sums.

Exit 0 when all hold, for every pair given; else 1, naming what does not
(one run judges many pairs: Python and numpy start once).
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": None}


def read(path):
    """name -> (dtype name, shape, raw bytes, float64 values)."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: shorter than a safetensors header")
    (n,) = struct.unpack("<Q", blob[:8])
    head = json.loads(blob[8:8 + n])
    data, out = blob[8 + n:], {}
    for name, e in head.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        raw = data[b:end]
        if e["dtype"] == "BF16":
            v = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            v = np.frombuffer(raw, dtype=np.dtype(DTYPES[e["dtype"]]).newbyteorder("<"))
        out[name] = (e["dtype"], tuple(e["shape"]), raw, v.astype(np.float64))
    return out


def as_bf16(dtype, raw):
    """A 1-D tensor's bytes as the codec keeps it: each value's bf16 (round
    to nearest even), in the tensor's own dtype."""
    if dtype == "BF16":
        return raw
    if dtype == "F16":
        v = np.frombuffer(raw, dtype="<f2").astype(np.float32)
    else:
        v = np.frombuffer(raw, dtype="<f4")
    u = v.view(np.uint32).astype(np.uint64)
    b = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)
    return b.astype("<f2").tobytes() if dtype == "F16" else b.astype("<f4").tobytes()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--eps", type=float, default=0.0012, help="the threshold the save used (default 0.0012)")
    ap.add_argument("--cap", type=float, default=20.0, help="a tensor's own bound, times eps (default 20)")
    ap.add_argument("pairs", nargs="+", metavar="SOURCE RESTORED")
    a = ap.parse_args()
    if len(a.pairs) % 2:
        ap.error("give SOURCE RESTORED in pairs")
    failed = 0
    for i in range(0, len(a.pairs), 2):
        failed += judge(a, a.pairs[i], a.pairs[i + 1])
    return 1 if failed else 0


def judge(a, source, restored):
    """1 (saying why) when RESTORED is not SOURCE within the bounds, else 0."""
    try:
        src, got = read(source), read(restored)
    except (OSError, ValueError) as e:
        print(f"close_to_source: {restored}: cannot read: {e}", file=sys.stderr)
        return 1
    gpath = source[:-len(".safetensors")] + ".grads.safetensors"
    grads = read(gpath) if os.path.exists(gpath) else {}
    bad = []
    if set(src) != set(got):
        bad.append(f"tensors differ: missing {sorted(set(src) - set(got))}, extra {sorted(set(got) - set(src))}")
    num = den = 0.0
    worst, worst_name = 0.0, None
    for name in sorted(set(src) & set(got)):
        (sd, ss, sraw, w), (gd, gs, graw, r) = src[name], got[name]
        if sd != gd or ss != gs:
            bad.append(f"{name}: {gd}{list(gs)}, saved as {sd}{list(ss)}")
            continue
        if len(ss) <= 1:
            if as_bf16(sd, sraw) != graw:
                bad.append(f"{name}: a 1-D tensor is not the source's bf16")
            continue
        g2 = grads[name][3] ** 2 if name in grads else np.ones_like(w)
        tn, td = float(np.sum(g2 * (w - r) ** 2)), float(np.sum(g2 * w * w))
        num, den = num + tn, den + td
        if td > 0 and tn / td > worst:
            worst, worst_name = tn / td, name
    slack = 1.0 + 1e-6
    q = num / den if den > 0 else 0.0
    if q > a.eps * slack:
        bad.append(f"Fisher-weighted relative error {q:.4g} over eps {a.eps:g}")
    if worst > a.cap * a.eps * slack:
        bad.append(f"{worst_name}: its own error {worst:.4g} over {a.cap:g} x eps")
    for b in bad:
        print(f"close_to_source: {restored}: {b}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
