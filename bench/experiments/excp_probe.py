#!/usr/bin/python3
"""Where Adam's update sits against the weights' change: what pruning the
moments with the weights' mask (ExCP-style) would cost under rckpt's measure.

For the last two checkpoints of a run (make_transformer.py's: X.safetensors
and X.optim.safetensors with exp_avg.P / exp_avg_sq.P), the matrices'
coordinates are ranked by how far their weight moved between the two
(|dw| over the tensor's mean |w|); for the smallest fraction q of them it
prints the share of the update energy sum u^2, u = exp_avg / (sqrt(exp_avg_sq)
+ 1e-8), that sits there. Dropping the moments there costs about that share
as update error (rckpt's opt_eps, default 0.1).

    /usr/bin/python3 bench/experiments/excp_probe.py DIR
"""
import argparse
import glob
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data"))
from eval_checkpoint import read_safetensors  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("dir", help="a run of make_transformer.py (its .optim siblings)")
    a = ap.parse_args()
    steps = sorted(glob.glob(os.path.join(a.dir, "step-*[0-9].safetensors")))
    if len(steps) < 2:
        sys.exit("excp_probe.py: %s holds fewer than two step-N.safetensors" % a.dir)
    w0, w1 = read_safetensors(steps[-2]), read_safetensors(steps[-1])
    optim = steps[-1][:-len(".safetensors")] + ".optim.safetensors"
    if not os.path.exists(optim):
        sys.exit("excp_probe.py: no %s beside the last step" % optim)
    o1 = read_safetensors(optim)
    dw, uu = [], []
    for k, w in w1.items():
        if w.dim() < 2 or ("exp_avg." + k) not in o1 or k not in w0:
            continue
        m, v = o1["exp_avg." + k].double(), o1["exp_avg_sq." + k].double()
        u = m / (v.clamp_min(0).sqrt() + 1e-8)
        dw.append(((w.double() - w0[k].double()).abs() / (w0[k].double().abs().mean() + 1e-12)).flatten())
        uu.append((u * u).flatten())
    if not dw:
        sys.exit("excp_probe.py: no matrix with exp_avg.P and exp_avg_sq.P in %s" % optim)
    dw, uu = torch.cat(dw), torch.cat(uu)
    order = torch.argsort(dw)
    tot = float(uu.sum())
    print("%s -> %s: %d matrix values" % (os.path.basename(steps[-2]), os.path.basename(steps[-1]), dw.numel()))
    for q in (0.5, 0.75, 0.9):
        n = int(q * dw.numel())
        print("  the %2d%% that moved least hold %.3f of sum u^2 (uncorrelated: %.2f)"
              % (100 * q, float(uu[order[:n]].sum()) / tot, q))


if __name__ == "__main__":
    main()
