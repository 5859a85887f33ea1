#!/usr/bin/python3
"""codec_speed.py — the codec's CPU cost against zstd, in interleaved
rounds (issue 49: "encode >= zstd -1's speed per core", "decode >= 1 GB/s
of fp32 per core").

For each round it runs, one after another, `rckpt codec encode` of the
checkpoints given (a base, then deltas: the encoder's real work) with each
rckpt binary named, `zstd -1 -T1` of the same files, then `rckpt codec
decode` of the whole chain (the last step rebuilt from the base and every
delta) with each binary, and `zstd -d -T1` of every file; each writes its
output to a file, as a user's would. It takes each one's CPU seconds (user
+ system, from the kernel's accounting of the child; wall-clock seconds
too, the encoder using every core) and prints per round and as median
[min, max] over the rounds: the fp32 MB each handles per CPU second, the
ratio of each rckpt to zstd of the same round (> 1: faster than zstd),
and with two binaries (the old one first) the ratios of their times. A
line "csv:round,R,MB,ENC,DEC[,ENC2,DEC2],ZSTD1,ZSTDD" (CPU seconds) a
round is for rckpt_bench.py.
--same checks that both binaries write the same step files and decode
the same bytes.
--scaling also runs the (first) binary's encode on one core (taskset) in
each round, beside its run on every core it may use: wall-clock MB/s on
1 and on all N cores and their ratio per round, a line
"csv:scaling,R,MB,WALL1,WALLN,N" a round.

usage: codec_speed.py [--rounds N] [--same] [--scaling] --rckpt BIN
                      [--rckpt BIN2] CKPT.safetensors...
"""
import argparse
import filecmp
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def cpu_of(cmd, wall=None):
    """CPU seconds (user + system) of cmd, run to its end; its wall-clock
    seconds appended to wall."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if wall is not None:
        wall.append(time.monotonic() - t0)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit("codec_speed: %s exited %d: %s" % (cmd[0], r.returncode, r.stderr.strip()[-500:]))
    # at least a microsecond (the accounting's grain): a tiny file's zstd can read as 0
    return max(1e-6, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))


def fp32_bytes(path):
    """The fp32 bytes a safetensors file stands for (its header's shapes)."""
    import json
    import struct
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
    total = 0
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        e = 1
        for d in v["shape"]:
            e *= d
        total += 4 * e
    return total


def spread(v):
    return "%.3g [%.3g, %.3g]" % (statistics.median(v), min(v), max(v))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="rounds of pairs (default 3)")
    ap.add_argument("--rckpt", action="append", required=True, help="an rckpt binary (twice: old, new)")
    ap.add_argument("--same", action="store_true", help="require the binaries to write the same bytes")
    ap.add_argument("--scaling", action="store_true", help="the encode on one core beside all cores, in pairs")
    ap.add_argument("ckpt", nargs="+", help="checkpoints, base first")
    a = ap.parse_args()
    if a.rounds < 1 or len(a.rckpt) > 2:
        ap.error("--rounds >= 1 and at most two --rckpt")
    for p in a.ckpt + a.rckpt:
        if not os.path.isfile(p):
            ap.error("no file %s" % p)
    if shutil.which("zstd") is None:
        sys.exit("codec_speed: zstd is not installed (Debian package zstd)")
    mb = sum(fp32_bytes(p) for p in a.ckpt) / 1e6
    tmp = tempfile.mkdtemp(prefix="codec-speed-")
    try:
        nb = len(a.rckpt)
        cpu, wall = [[] for _ in range(nb)], [[] for _ in range(nb)]
        dcpu, dwall = [[] for _ in range(nb)], [[] for _ in range(nb)]
        zs, zd = [], []
        one = []  # wall seconds of the first binary's encode on one core
        cpus = sorted(os.sched_getaffinity(0))
        if a.scaling and shutil.which("taskset") is None:
            sys.exit("codec_speed: --scaling needs taskset (Debian package util-linux)")
        # the MB a decode of the chain handles: every step's fp32, as the
        # encoder's (it decodes the base and applies each delta)
        print("%.1f MB of fp32 in %d files, %d rounds" % (mb, len(a.ckpt), a.rounds))
        for r in range(a.rounds):
            line = []
            for b, binary in enumerate(a.rckpt):
                out = os.path.join(tmp, "out%d" % b)
                shutil.rmtree(out, ignore_errors=True)
                cpu[b].append(cpu_of([binary, "codec", "encode", "-o", out] + a.ckpt, wall[b]))
                line.append("encode#%d %.2f s (wall %.2f s)" % (b + 1, cpu[b][-1], wall[b][-1]))
                if a.scaling and b == 0:  # the pair: the same encode on one core
                    shutil.rmtree(out + "-1", ignore_errors=True)
                    cpu_of(["taskset", "-c", str(cpus[0]), binary, "codec", "encode", "-o", out + "-1"] + a.ckpt, one)
                    line.append("on 1 core: wall %.2f s" % one[-1])
            z = 0.0
            for i, p in enumerate(a.ckpt):
                z += cpu_of(["zstd", "-1", "-T1", "-q", "-f", "-o", os.path.join(tmp, "%d.zst" % i), p])
            zs.append(z)
            for b, binary in enumerate(a.rckpt):
                out = os.path.join(tmp, "out%d" % b)
                steps = [os.path.join(out, os.path.basename(p)[:-len(".safetensors")] + ".rckpt")
                         for p in a.ckpt]
                dcpu[b].append(cpu_of([binary, "codec", "decode", "-o", os.path.join(tmp, "dec%d.safetensors" % b)]
                                      + steps, dwall[b]))
                line.append("decode#%d %.2f s" % (b + 1, dcpu[b][-1]))
            z = 0.0
            for i in range(len(a.ckpt)):
                z += cpu_of(["zstd", "-d", "-T1", "-q", "-f", "-o", os.path.join(tmp, "dz"),
                             os.path.join(tmp, "%d.zst" % i)])
            zd.append(z)
            print("round %d: %s, zstd -1 %.2f s, zstd -d %.2f s" % (r + 1, ", ".join(line), zs[-1], z),
                  flush=True)
            # machine-readable (rckpt_bench.py): MB of fp32, then CPU seconds
            print("csv:round,%d,%.3f,%s,%.6f,%.6f" % (r + 1, mb, ",".join(
                "%.6f,%.6f" % (cpu[b][-1], dcpu[b][-1]) for b in range(nb)), zs[-1], z), flush=True)
            if a.scaling:
                print("csv:scaling,%d,%.3f,%.6f,%.6f,%d" % (r + 1, mb, one[-1], wall[0][-1], len(cpus)), flush=True)
            if a.same and nb == 2:
                for f in sorted(os.listdir(os.path.join(tmp, "out0"))):
                    if not filecmp.cmp(os.path.join(tmp, "out0", f), os.path.join(tmp, "out1", f), False):
                        sys.exit("codec_speed: the binaries wrote different bytes for %s" % f)
                if not filecmp.cmp(os.path.join(tmp, "dec0.safetensors"), os.path.join(tmp, "dec1.safetensors"),
                                   False):
                    sys.exit("codec_speed: the binaries decoded different bytes")
        print("zstd -1 -T1: %s MB/s per CPU second; zstd -d -T1: %s" % (spread([mb / z for z in zs]),
                                                                       spread([mb / z for z in zd])))
        for b in range(nb):
            print("rckpt#%d (%s): encode %s MB/s per CPU second, speed / zstd -1's, per round: %s"
                  % (b + 1, a.rckpt[b], spread([mb / c for c in cpu[b]]),
                     spread([z / c for z, c in zip(zs, cpu[b])])))
            print("rckpt#%d: decode %s MB/s per CPU second, speed / zstd -d's, per round: %s"
                  % (b + 1, spread([mb / c for c in dcpu[b]]), spread([z / c for z, c in zip(zd, dcpu[b])])))
        if a.scaling:
            print("rckpt#1: encode on 1 core %s MB/s, on all %d cores %s MB/s (wall); all / 1, per round: %s"
                  % (spread([mb / w for w in one]), len(cpus), spread([mb / w for w in wall[0]]),
                     spread([x / y for x, y in zip(one, wall[0])])))
        if nb == 2:
            print("encode: rckpt#1 CPU / rckpt#2 CPU, per round: %s" % spread([x / y for x, y in zip(cpu[0], cpu[1])]))
            print("encode: rckpt#1 wall / rckpt#2 wall, per round: %s" % spread([x / y for x, y in zip(wall[0], wall[1])]))
            print("decode: rckpt#1 CPU / rckpt#2 CPU, per round: %s" % spread([x / y for x, y in zip(dcpu[0], dcpu[1])]))
            if a.same:
                print("same bytes: yes")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
