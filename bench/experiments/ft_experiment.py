#!/usr/bin/python3
"""Fault-tolerant training with rckpt: the same run, same seed, three ways.

  none          no failures (checkpoints saved into rckpt all along: they
                give the compression ratio and the checkpoint overhead)
  rckpt         N failures evenly spaced; each restores the latest rckpt
                checkpoint (dequantized weights) in a fresh Checkpointer and
                replays the lost steps
  uncompressed  N failures; each restores from torch.save checkpoints

and, for the wall-clock reference, the run with no checkpoints at all.
The trainer is client/python/examples/digits.py (an MLP on scikit-learn's
digits, plain SGD with a cosine-decaying learning rate: the paper's
setting, where late checkpoints change little). Each step's batch depends
only on (seed, step), so a replayed step sees the batch it saw before and
the uncompressed run must end exactly where the no-failure run ends.

    export CEPH_CONF=$PWD/build/cluster/ceph.conf
    /usr/bin/python3 bench/experiments/ft_experiment.py                 # 3 seeds, 2000 steps
    /usr/bin/python3 bench/experiments/ft_experiment.py --short         # 1 seed, 400 steps (the demo)
"""
import argparse
import io
import json
import os
import statistics
import sys
import time

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "client", "python"))
sys.path.insert(0, os.path.join(here, "..", "..", "client", "python", "examples"))
try:
    import rckpt  # noqa: E402
    import digits  # noqa: E402  (it needs rckpt too)
except ImportError as _missing:  # --help works without the library
    rckpt, _rckpt_missing = None, _missing


def torch_bytes(obj):
    b = io.BytesIO()
    torch.save(obj, b)
    return b.getvalue()


def run(a, seed, mode, job):
    """One training run; mode: nockpt, none, rckpt, uncompressed."""
    t = digits.Trainer(seed, a.steps, width=a.width, momentum=a.momentum, optim=a.optim)
    fail_at = set()
    if mode in ("rckpt", "uncompressed"):
        fail_at = {round(a.steps * (i + 1) / (a.failures + 1)) for i in range(a.failures)}
    failed = set()
    ck = ema = q = None
    saves = []       # SaveResult of every rckpt save
    blocked = 0.0    # seconds the loop stood still for checkpointing
    train_s = 0.0    # seconds in train steps (replays included)
    restore_s = 0.0
    lost_steps = 0
    handle = None
    local = None     # the uncompressed checkpoint: (step, bytes)

    def open_ck():
        nonlocal ck, ema, q
        ema = rckpt.GradientEMA(t.model)
        q = digits.ValQuality(t)
        ck = rckpt.Checkpointer(a.pool, job, a.conf, eps=a.eps, quality=q,
                                quality_eps=a.quality_eps, snapshot=True)

    if mode in ("none", "rckpt"):
        rckpt.Checkpointer.delete(a.pool, job, a.conf)
        open_ck()
    t0 = time.perf_counter()
    while t.step < a.steps:
        if ema is not None:
            ema.track(t.step + 1, a.every)
        s0 = time.perf_counter()
        t.train_step()
        train_s += time.perf_counter() - s0
        if t.step % a.every == 0 and mode != "nockpt":
            c0 = time.perf_counter()
            if mode == "uncompressed":
                local = (t.step, torch_bytes({"model": t.model.state_dict(),
                                              "opt": t.opt.state_dict()}))
            else:
                if handle is not None:
                    saves.append(handle.wait())
                    handle = None
                q.set_reference(t.model)
                handle = ck.save(t.step, t.model.state_dict(), grads=ema, optimizer=t.opt)
            blocked += time.perf_counter() - c0
        if t.step in fail_at and t.step not in failed:
            failed.add(t.step)
            r0 = time.perf_counter()
            nt = digits.Trainer(seed, a.steps, width=a.width, momentum=a.momentum, optim=a.optim)
            if mode == "uncompressed":
                if local is not None:
                    st = torch.load(io.BytesIO(local[1]))
                    nt.model.load_state_dict(st["model"])
                    nt.opt.load_state_dict(st["opt"])
                    nt.step = local[0]
            else:
                if handle is not None:
                    saves.append(handle.wait())  # the save had committed before the crash
                    handle = None
                ck.close()
                t = nt
                open_ck()
                if ck.steps():
                    r = ck.restore_into(t.model, optimizer=t.opt)
                    t.step = r.step
            lost_steps += max(failed) - nt.step
            t = nt
            restore_s += time.perf_counter() - r0
    if handle is not None:
        saves.append(handle.wait())
    wall = time.perf_counter() - t0
    if ck is not None:
        ck.close()
    loss, acc = t.test()
    out = {"mode": mode, "seed": seed, "test_acc": acc, "test_loss": loss, "wall_s": wall,
           "train_s": train_s, "blocked_s": blocked, "restore_s": restore_s,
           "failures": len(failed), "lost_steps": lost_steps}
    if saves:
        one = len(torch_bytes({"model": t.model.state_dict(), "opt": t.opt.state_dict()}))
        enc = sum(s.enc_bytes for s in saves)
        out.update(saves=len(saves), enc_bytes=enc, raw_bytes=one * len(saves),
                   ratio=one * len(saves) / enc,
                   fp32_ratio=sum(s.raw_bytes for s in saves) / enc,
                   per_save=[(s.step, one / s.enc_bytes, s.is_base, s.quality) for s in saves],
                   accepted=sum(1 for s in saves if s.quality <= (a.eps or 0.0012)),
                   quality_calls=q.calls if q else 0)
    if mode in ("none", "rckpt"):
        rckpt.Checkpointer.delete(a.pool, job, a.conf)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--every", type=int, default=50, help="checkpoint every K steps")
    ap.add_argument("--failures", type=int, default=10)
    ap.add_argument("--width", type=int, default=512, help="hidden width of the MLP")
    ap.add_argument("--momentum", type=float, default=0.0,
                    help="SGD momentum (default %(default)s: no optimizer state; see README)")
    ap.add_argument("--optim", choices=("sgd", "adamw"), default="sgd",
                    help="sgd (default: the paper's setting) or adamw (lr 3e-3, weight decay 0.01: "
                         "Adam's state saved and compressed with the weights; the demo's)")
    ap.add_argument("--eps", type=float, default=None, help="compressor threshold (default: the library's, 0.0012)")
    ap.add_argument("--quality-eps", type=float, default=0.01,
                    help="the quality callback's threshold: relative rise of the val loss")
    ap.add_argument("--short", action="store_true", help="1 seed, 400 steps, 4 failures")
    ap.add_argument("--pool", default="rckpt")
    ap.add_argument("--conf", default=None, help="ceph.conf (default: $CEPH_CONF)")
    ap.add_argument("--json", default=None, help="also write every run's figures here")
    a = ap.parse_args()
    if rckpt is None:
        sys.exit(str(_rckpt_missing))
    if a.short:
        a.seeds, a.steps, a.failures, a.every = 1, 400, 4, 25
    torch.set_num_threads(1)  # the trainer on one core, the checkpointer's thread on the other
    tag = "ft-%d" % os.getpid()
    runs = []
    print("fault-tolerant training: %d seeds x %d steps, a checkpoint every %d, %d failures"
          % (a.seeds, a.steps, a.every, a.failures), flush=True)
    print("%-4s %-13s %8s %8s %7s %8s %9s %8s" % ("seed", "run", "test_acc", "test_loss",
                                                   "ratio", "wall_s", "blocked%", "replayed"))
    for seed in range(a.seeds):
        for mode in ("nockpt", "none", "rckpt", "uncompressed"):
            r = run(a, seed, mode, "%s-%d-%s" % (tag, seed, mode))
            runs.append(r)
            print("%-4d %-13s %8.4f %8.4f %7s %8.1f %9s %8d" % (
                seed, mode, r["test_acc"], r["test_loss"],
                "%.1fx" % r["ratio"] if "ratio" in r else "-", r["wall_s"],
                "%.2f%%" % (100 * r["blocked_s"] / r["train_s"]) if mode != "nockpt" else "-",
                r["lost_steps"]), flush=True)
    by = {m: [r for r in runs if r["mode"] == m] for m in ("nockpt", "none", "rckpt", "uncompressed")}

    def ms(v):
        return (statistics.mean(v), statistics.pstdev(v) if len(v) > 1 else 0.0)

    print()
    print("summary over %d seeds (mean ± sd)" % a.seeds)
    for m in ("none", "rckpt", "uncompressed"):
        acc = ms([r["test_acc"] for r in by[m]])
        loss = ms([r["test_loss"] for r in by[m]])
        print("  %-13s test accuracy %.4f ± %.4f   test loss %.4f ± %.4f" % (m, *acc, *loss))
    rel = [100 * (n["test_acc"] - r["test_acc"]) / n["test_acc"] for n, r in zip(by["none"], by["rckpt"])]
    relu = [100 * (n["test_acc"] - r["test_acc"]) / n["test_acc"]
            for n, r in zip(by["none"], by["uncompressed"])]
    rell = [100 * (r["test_loss"] - n["test_loss"]) / n["test_loss"] for n, r in zip(by["none"], by["rckpt"])]
    print("  relative accuracy drop, rckpt restores vs none:        %+.2f%% ± %.2f%% (per seed: %s)"
          % (*ms(rel), ", ".join("%+.2f%%" % v for v in rel)))
    print("  relative accuracy drop, uncompressed restores vs none: %+.2f%% ± %.2f%%" % ms(relu))
    print("  relative test-loss rise, rckpt restores vs none:      %+.2f%% ± %.2f%%" % ms(rell))
    print("  seed-to-seed spread of the no-failure accuracy (sd):  %.2f%%"
          % (100 * ms([r["test_acc"] for r in by["none"]])[1] / ms([r["test_acc"] for r in by["none"]])[0]))
    ratio = ms([r["ratio"] for r in by["none"]])
    print("  compression ratio over the whole run (torch.save bytes / stored): %.1fx ± %.1f"
          " (failure runs: %.1fx)" % (*ratio, ms([r["ratio"] for r in by["rckpt"]])[0]))
    ov = ms([100 * r["blocked_s"] / r["train_s"] for r in by["none"]])
    print("  checkpoint overhead (loop blocked / training time): %.2f%% ± %.2f%%" % ov)
    slow = ms([100 * (n["wall_s"] - z["wall_s"]) / z["wall_s"] for n, z in zip(by["none"], by["nockpt"])])
    print("  wall-clock slowdown vs no checkpoints (noisy, shared cores): %+.1f%% ± %.1f%%" % slow)
    acc_ok = sum(r["accepted"] for r in by["none"]), sum(r["saves"] for r in by["none"])
    print("  saves within eps: %d of %d" % acc_ok)
    print()
    print("ratio along the run (seed 0, no failures; torch.save bytes / stored bytes):")
    ps = by["none"][0]["per_save"]
    pick = sorted({0, len(ps) - 1} | {round(len(ps) * f / 10) for f in range(1, 10)})
    print("  " + "  ".join("%6d" % ps[i][0] for i in pick if i < len(ps)))
    print("  " + "  ".join("%5.1fx" % ps[i][1] for i in pick if i < len(ps)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "runs": runs}, f, indent=1)
    print()
    print("reproduce: /usr/bin/python3 bench/experiments/ft_experiment.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
