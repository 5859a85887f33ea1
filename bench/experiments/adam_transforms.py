#!/usr/bin/python3
"""Adam's second moment through today's compressor under three transforms
(issue 28's ablation, before any format change): exp_avg_sq saved as it
is, as its square root, and as its logarithm, beside exp_avg, from a real
transformer run's optimizer checkpoints (STEP.optim.safetensors, as
bench/data/make_transformer.py and the tests' make_test_lm write them). Per
transform: the ratio over the run, and per tensor the error of the update
Adam takes from the restored state, m / (sqrt(v) + eps), relative to the
original's, and the ratio of its norm.

    adam_transforms.py DIR [--eps E] [--json OUT]      (CEPH_CONF: a cluster)
"""
import argparse
import json
import os
import statistics
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "data"))  # eval_checkpoint, make_*
sys.path.insert(0, os.path.join(here, "..", "..", "client", "python"))

import torch  # noqa: E402

try:
    import rckpt  # noqa: E402
except ImportError as _missing:  # --help works without the library
    rckpt, _rckpt_missing = None, _missing
from eval_checkpoint import read_safetensors  # noqa: E402

ADAM_EPS = 1e-8
TRANSFORMS = {
    "linear": (lambda v: v, lambda x: x.clamp_min(0)),
    "sqrt": (lambda v: v.sqrt(), lambda x: x.clamp_min(0) ** 2),
    "log": (lambda v: (v + 1e-30).log(), lambda x: x.exp()),
}


def rel(a, b):
    return float(((a - b) ** 2).sum() / (b ** 2).sum().clamp_min(1e-30))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--eps", type=float, default=None, help="the compressor's threshold (default: the library's)")
    ap.add_argument("--json")
    a = ap.parse_args()
    if rckpt is None:
        sys.exit(str(_rckpt_missing))
    files = sorted(f for f in os.listdir(a.dir) if f.endswith(".optim.safetensors"))
    if not files:
        raise SystemExit("no *.optim.safetensors in %s" % a.dir)
    out = {}
    for name, (fwd, inv) in TRANSFORMS.items():
        job = "adam-%s-%d" % (name, os.getpid())
        rckpt.Checkpointer.delete(job=job)
        raw = enc = 0
        errs, norms = [], []
        with rckpt.Checkpointer(job=job, compute="cpu", eps=a.eps) as ck:
            for i, f in enumerate(files):
                o = read_safetensors(os.path.join(a.dir, f))
                sd = {k: (fwd(v) if k.startswith("exp_avg_sq.") else v) for k, v in o.items()}
                r = ck.save(i + 1, sd).wait()
                raw += r.raw_bytes
                enc += r.enc_bytes
                got = ck.restore(step=i + 1)
                for k in o:
                    if not k.startswith("exp_avg."):
                        continue
                    n = k[len("exp_avg."):]
                    m, v = o[k], o["exp_avg_sq." + n]
                    mr, vr = got[k], inv(got["exp_avg_sq." + n])
                    u, ur = m / (v.sqrt() + ADAM_EPS), mr / (vr.sqrt() + ADAM_EPS)
                    errs.append(rel(ur, u))
                    norms.append(float(ur.norm() / u.norm().clamp_min(1e-30)))
        rckpt.Checkpointer.delete(job=job)
        out[name] = {"ratio": raw / enc, "update_err_median": statistics.median(errs),
                     "update_err_max": max(errs), "norm_min": min(norms), "norm_max": max(norms)}
        print("%-6s ratio %5.1fx  update error median %.3g max %.3g  |update| x%.2f..x%.2f"
              % (name, raw / enc, out[name]["update_err_median"], out[name]["update_err_max"],
                 out[name]["norm_min"], out[name]["norm_max"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
