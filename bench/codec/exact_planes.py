#!/usr/bin/python3
"""What an exact (bit-for-bit) tier can reach on a run's checkpoints, by
measurement, before it is built: each float's bits rotated left by one
(the exponent then fills the top byte), cut into byte planes, and each
plane measured two ways: its order-0 entropy (what a Huffman code of it
approaches) and `zstd -1` of the plane alone. Over one step ("lone") and
XORed with the step before ("xor prev": a run of exact saves), as fp32 and
as bf16 (the same values rounded), beside `zstd -1` and `-3` of the whole
fp32 step. Weights and, where the run saved it (STEP.optim.safetensors),
the optimizer's state apart.

    /usr/bin/python3 bench/codec/exact_planes.py DIR [--step K]

DIR holds step-N.safetensors (bench/data/make_checkpoints.py,
make_transformer.py); K: the index of the step measured (default: the
middle one), XORed with the one before it.
"""
import argparse
import glob
import json
import os
import struct
import subprocess

import numpy as np


def read_f32(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    out = []
    for k, v in sorted(json.loads(b[8:8 + n]).items()):
        if k != "__metadata__" and v["dtype"] == "F32":
            a, e = v["data_offsets"]
            out.append(np.frombuffer(b[8 + n + a:8 + n + e], dtype=np.uint32))
    return np.concatenate(out) if out else np.zeros(0, np.uint32)


def entropy_bytes(p):
    c = np.bincount(p, minlength=256).astype(np.float64)
    q = c[c > 0] / c.sum()
    return min(p.size, p.size * float(-(q * np.log2(q)).sum()) / 8 + 256 * 4 / 8)  # + a code table


def zstd(b, level):
    return len(subprocess.run(["zstd", "-%d" % level, "-c", "-q"], input=b, capture_output=True,
                              check=True).stdout)


def planes(u, width):
    r = ((u << 1) | (u >> (width - 1))) & ((1 << width) - 1)
    return [((r >> (8 * k)) & 0xff).astype(np.uint8) for k in range(width // 8)]


def bf16(u):
    return ((u + 0x7fff + ((u >> 16) & 1)) >> 16).astype(np.uint32)


def measure(u, width):
    ps = planes(u, width)
    return (sum(p.size for p in ps) / sum(entropy_bytes(p) for p in ps),
            sum(p.size for p in ps) / sum(min(p.size, zstd(p.tobytes(), 1)) for p in ps))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--step", type=int)
    a = ap.parse_args()
    steps = sorted(f for f in glob.glob(os.path.join(a.dir, "step-*.safetensors"))
                   if ".grads." not in f and ".optim." not in f)
    k = a.step if a.step is not None else len(steps) // 2
    if not 1 <= k < len(steps):
        ap.error("--step must be 1..%d" % (len(steps) - 1))
    print("%s: step %s against %s" % (a.dir, os.path.basename(steps[k]), os.path.basename(steps[k - 1])))
    for part, name in (("weights", lambda p: p), ("optimizer", lambda p: p[:-12] + ".optim.safetensors")):
        if not os.path.exists(name(steps[k])):
            continue
        cur, prev = read_f32(name(steps[k])), read_f32(name(steps[k - 1]))
        raw = cur.tobytes()
        print("%-9s %9d values: zstd -1 %.3fx, zstd -3 %.3fx" % (part, cur.size, len(raw) / zstd(raw, 1),
                                                                 len(raw) / zstd(raw, 3)))
        cases = [("fp32 lone", cur, 32), ("fp32 xor prev", cur ^ prev, 32),
                 ("bf16 lone", bf16(cur), 16), ("bf16 xor prev", bf16(cur) ^ bf16(prev), 16)]
        for tag, u, w in cases:
            h, z = measure(u, w)
            print("  %-14s planes: entropy %.3fx, zstd -1 a plane %.3fx" % (tag, h, z))


if __name__ == "__main__":
    main()
