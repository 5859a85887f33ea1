#!/usr/bin/python3
"""method_pairs.py — two of bench_codec's methods side by side, in rounds.

Each round is one `bench_codec --methods A,B DIR` run: A and B encode and
decode the same checkpoints one after the other on the same machine. Per
round it takes the ratio A / B of each figure bench_codec prints (the
compression ratio over the run, encode MB/s, steady encode MB/s, decode
MB/s and the record stage of the decode, what the OSD's fold runs), and
prints each as median [min, max] over the rounds, then each round's
decode and record-stage MB/s. Used for context-coded index streams:

    /usr/bin/python3 bench/codec/method_pairs.py --rounds 5 DIR   # rckpt against abl-no-ctx

usage: method_pairs.py [--rounds N] [--methods A,B] [--bench BIN]
                       [--eps E] DIR
"""
import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SUMMARY = {"ratio": 1, "encode": 6, "steady encode": 7, "decode": 8}  # columns of a method's line


def parse(out, methods):
    """{method: {figure: value}} from one bench_codec run's output."""
    got = {m: {} for m in methods}
    for line in out.splitlines():
        t = line.split()
        if not t or t[0] not in got:
            continue
        if not line.startswith(" ") and len(t) > 8:  # the summary table
            for k, col in SUMMARY.items():
                got[t[0]][k] = float(t[col].rstrip("x"))
        elif len(t) > 2 and t[1] == "records":  # decode by stage, indented
            got[t[0]]["records stage"] = float(t[2])
    for m in methods:  # the records stage: only the quantizing methods have one
        if any(k not in got[m] for k in SUMMARY):
            sys.exit(f"method_pairs: bench_codec printed no full line for {m}")
    return got


def main():
    ap = argparse.ArgumentParser(description="Two bench_codec methods side by side, in rounds: "
                                 "median [min, max] of the per-round ratios.")
    ap.add_argument("dir", help="checkpoints, as bench_codec takes them")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--methods", default="rckpt,abl-no-ctx", help="A,B (default rckpt,abl-no-ctx)")
    ap.add_argument("--bench", default=os.path.join(HERE, "..", "..", "build", "bench", "bench_codec"))
    ap.add_argument("--eps", help="bench_codec's --eps")
    a = ap.parse_args()
    methods = a.methods.split(",")
    if len(methods) != 2 or a.rounds < 1:
        sys.exit("method_pairs: --methods takes two methods, --rounds at least 1")
    if not os.access(a.bench, os.X_OK):
        sys.exit(f"method_pairs: no bench_codec at {a.bench}; build it, or give --bench")
    rounds = []
    for r in range(a.rounds):
        cmd = [a.bench, "--methods", a.methods] + (["--eps", a.eps] if a.eps else []) + [a.dir]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode:
            sys.exit(f"method_pairs: {' '.join(cmd)} failed: {p.stderr.strip()[-300:]}")
        rounds.append(parse(p.stdout, methods))
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
    A, B = methods
    print(f"{A} / {B}, {a.rounds} rounds: median [min, max]")
    for k in list(SUMMARY) + ["records stage"]:
        if any(k not in x[A] or k not in x[B] for x in rounds):
            continue
        v = [x[A][k] / x[B][k] for x in rounds]
        print(f"  {k:14s} {statistics.median(v):.3f} [{min(v):.3f}, {max(v):.3f}]")
    for k in ("decode", "records stage"):
        if any(k not in x[A] or k not in x[B] for x in rounds):
            continue
        print(f"  {k} MB/s ({A}, {B}): " + ", ".join(f"{x[A][k]:.0f} {x[B][k]:.0f}" for x in rounds))


if __name__ == "__main__":
    main()
