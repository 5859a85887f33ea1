#!/usr/bin/env python3
"""gpu_baselines.py — what the frameworks on a device machine take for what
bench_gpu times of ours: two quantile thresholds of |w| by torch.quantile
(torch.sort beyond its 16 Mi-element limit) and by CuPy's percentile, and a
device-to-device copy for the yardstick. N fp32 normal values per size,
medians of --reps timed runs after a warm-up, CUDA events. One CSV line per
figure on stdout (size,tool,what,ms); a line saying why for a tool that is
missing or refuses a size.

usage: gpu_baselines.py [--sizes 10M,100M,1G] [--reps 5]
"""
import argparse
import statistics
import sys

QS = (0.01, 0.99)  # the two thresholds bench_gpu's sort baseline takes


def parse_size(s):
    mult = {"K": 10**3, "M": 10**6, "G": 10**9}
    s = s.strip().upper()
    if s and s[-1] in mult:
        return int(float(s[:-1]) * mult[s[-1]])
    return int(s)


def timed(torch, fn, reps):
    fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(b))
    return statistics.median(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10M,100M,1G")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    try:
        sizes = [parse_size(s) for s in a.sizes.split(",")]
    except ValueError:
        ap.error("bad --sizes %r" % a.sizes)
    if a.reps < 1:
        ap.error("--reps must be at least 1")
    try:
        import torch
    except ImportError:
        print("gpu_baselines: no torch: no figures")
        return 0
    if not torch.cuda.is_available():
        print("gpu_baselines: torch sees no CUDA device: no figures")
        return 0
    try:
        import cupy
    except ImportError:
        cupy = None
        print("gpu_baselines: no cupy: its figures are left out")
    print("size,tool,what,ms")
    for n in sizes:
        g = torch.Generator(device="cuda").manual_seed(1)
        w = torch.randn(n, device="cuda", generator=g).abs_()
        q = torch.tensor(QS, device="cuda")
        c = torch.empty_like(w)
        print("csv,%d,torch,copy d2d,%.4f" % (n, timed(torch, lambda: c.copy_(w), a.reps)))
        del c
        if n <= 1 << 24:
            print("csv,%d,torch,quantile,%.4f" % (n, timed(torch, lambda: torch.quantile(w, q), a.reps)))
        else:
            print("gpu_baselines: torch.quantile refuses %d elements (limit 16 Mi): torch.sort instead" % n)
            idx = [int(x * (n - 1)) for x in QS]
            print("csv,%d,torch,sort+index,%.4f" % (n, timed(torch, lambda: torch.sort(w)[0][idx], a.reps)))
        if cupy is not None:
            cw = cupy.asarray(w)
            try:
                print("csv,%d,cupy,percentile,%.4f"
                      % (n, timed(torch, lambda: cupy.percentile(cw, [100 * x for x in QS]), a.reps)))
            except Exception as e:  # out of memory at 1G, say
                print("gpu_baselines: cupy.percentile at %d: %s" % (n, str(e).splitlines()[0]))
            del cw
            cupy.get_default_memory_pool().free_all_blocks()
        del w
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
