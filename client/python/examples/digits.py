#!/usr/bin/python3
"""A small real trainer that checkpoints into rckpt: an MLP on scikit-learn's
bundled handwritten digits (8x8 images, 10 classes; Debian's
python3-sklearn ships them, nothing is downloaded), SGD with momentum and a
cosine-decaying learning rate, a checkpoint every K steps.

    export CEPH_CONF=$PWD/build/cluster/ceph.conf     # ./dev.sh demo starts it
    PYTHONPATH=client/python /usr/bin/python3 client/python/examples/digits.py --steps 2000

What it shows: Checkpointer.save with a gradient EMA and a quality callback
(the dequantized model's loss on held-out batches), restore_into after a
"crash", and each save's compression ratio. bench/experiments/ft_experiment.py runs the
fault-tolerance experiment on the same trainer.
"""
import argparse
import copy
import io
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import rckpt  # noqa: E402


def load_digits(seed=0):
    """(train_x, train_y, val_x, val_y, test_x, test_y): 1797 images split
    1097 / 200 / 500 by a fixed permutation; val is what the quality
    callback sees, test only the final metric."""
    from sklearn.datasets import load_digits as sk
    d = sk()
    x = torch.tensor(d.data, dtype=torch.float32) / 16.0
    y = torch.tensor(d.target, dtype=torch.int64)
    g = torch.Generator().manual_seed(1234)  # the split does not depend on the run's seed
    p = torch.randperm(len(y), generator=g)
    x, y = x[p], y[p]
    x = (x - x[:1097].mean(0)) / (x[:1097].std(0) + 1e-3)
    return x[:1097], y[:1097], x[1097:1297], y[1097:1297], x[1297:], y[1297:]


def make_model(width=512):
    return torch.nn.Sequential(
        torch.nn.Linear(64, width), torch.nn.ReLU(),
        torch.nn.Linear(width, width), torch.nn.ReLU(),
        torch.nn.Linear(width, 10))


def evaluate(model, x, y):
    """(cross-entropy, accuracy) of model on (x, y)."""
    with torch.no_grad():
        out = model(x)
        return F.cross_entropy(out, y).item(), (out.argmax(1) == y).float().mean().item()


class Trainer:
    """Deterministic given (seed, step): the batch of step s is drawn from a
    generator seeded by (seed, s), so a run restored at step s and replayed
    sees the same batches as a run that never failed."""

    def __init__(self, seed, steps, width=512, lr=None, batch=64, momentum=0.9, optim="sgd"):
        """optim: "sgd" (with momentum; lr 0.1 by default) or "adamw"
        (weight decay 0.01; lr 3e-3 by default)."""
        torch.manual_seed(seed)
        if optim not in ("sgd", "adamw"):
            raise ValueError("optim: sgd or adamw, not %r" % (optim,))
        lr = lr if lr is not None else (0.1 if optim == "sgd" else 3e-3)
        self.seed, self.steps, self.lr, self.batch = seed, steps, lr, batch
        self.data = load_digits()
        self.model = make_model(width)
        if optim == "sgd":
            self.opt = torch.optim.SGD(self.model.parameters(), lr=lr, momentum=momentum)
        else:
            self.opt = torch.optim.AdamW(self.model.parameters(), lr=lr, weight_decay=0.01)
        self.step = 0

    def lr_at(self, s):
        return 0.5 * self.lr * (1 + math.cos(math.pi * s / self.steps))

    def train_step(self):
        tx, ty = self.data[0], self.data[1]
        g = torch.Generator().manual_seed(self.seed * 1000003 + self.step)
        idx = torch.randint(0, len(ty), (self.batch,), generator=g)
        for group in self.opt.param_groups:
            group["lr"] = self.lr_at(self.step)
        self.opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.model(tx[idx]), ty[idx])
        loss.backward()
        self.opt.step()
        self.step += 1
        return loss.item()

    def test(self):
        return evaluate(self.model, self.data[4], self.data[5])


class ValQuality:
    """The trainer's quality measure for the compressor: the relative rise
    of the held-out (val) loss of the dequantized model over the live
    model's, measured at save time. Runs on a copy of the model, so it may
    run in the checkpointer's background thread."""

    def __init__(self, trainer):
        self.model = copy.deepcopy(trainer.model)
        self.x, self.y = trainer.data[2], trainer.data[3]
        self.live = None
        self.ref = None
        self.calls = 0

    def set_reference(self, live_model):
        """Keeps a copy of the live weights (cheap); their val loss is
        computed at the first call, in the checkpointer's thread."""
        self.live = {k: v.detach().clone() for k, v in live_model.state_dict().items()}
        self.ref = None

    def __call__(self, state_dict):
        self.calls += 1
        if self.ref is None:
            self.model.load_state_dict(self.live)
            self.ref = evaluate(self.model, self.x, self.y)[0]
        self.model.load_state_dict(state_dict, strict=False)
        loss = evaluate(self.model, self.x, self.y)[0]
        return max(0.0, (loss - self.ref) / max(self.ref, 1e-6))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--job", default="digits-example", help="rckpt job (default: %(default)s)")
    ap.add_argument("--pool", default="rckpt")
    ap.add_argument("--conf", default=None, help="ceph.conf (default: $CEPH_CONF)")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--every", type=int, default=50, help="checkpoint every K steps")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--optimizer-state", default="lossless", choices=("lossless", "quantize"),
                    help="how the momentum is kept (default: %(default)s)")
    ap.add_argument("--crash-at", type=int, default=None,
                    help="simulate a crash at this step: restore the latest checkpoint and go on")
    ap.add_argument("--fresh", action="store_true",
                    help="delete the job's checkpoints first (default: resume from them)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    t = Trainer(a.seed, a.steps, momentum=a.momentum)
    ema = rckpt.GradientEMA(t.model)
    q = ValQuality(t)
    if a.fresh:
        rckpt.Checkpointer.delete(a.pool, a.job, a.conf)
    ck = rckpt.Checkpointer(a.pool, a.job, a.conf, quality=q, snapshot=True,
                            optimizer_state=a.optimizer_state)
    last = ck.load_latest(model=t.model, optimizer=t.opt)
    if last is not None:  # a restart: go on from the newest checkpoint
        t.step = last
        print("resumed from step %d" % last, flush=True)
    raw = enc = 0
    crashed = False
    handle = None
    t0 = time.perf_counter()
    while t.step < a.steps:
        ema.track(t.step + 1, a.every)
        t.train_step()
        if t.step % a.every == 0:
            if handle is not None:
                r = handle.wait()
                raw += r.raw_bytes
                enc += r.enc_bytes
                print("step %5d  saved %7.1f KiB  ratio %5.1fx  %s  loss %.2e" %
                      (r.step, r.enc_bytes / 1024, r.ratio, "base " if r.is_base else "delta",
                       r.quality), flush=True)
            q.set_reference(t.model)
            handle = ck.save(t.step, t.model.state_dict(), grads=ema, optimizer=t.opt,
                             extra={"seed": a.seed})
        if a.crash_at is not None and t.step == a.crash_at and not crashed:
            crashed = True
            if handle is not None:
                handle.wait()
            ck.close()  # the process "dies"; a new one opens the job
            t = Trainer(a.seed, a.steps, momentum=a.momentum)
            ema = rckpt.GradientEMA(t.model)
            q.model = copy.deepcopy(t.model)
            ck = rckpt.Checkpointer(a.pool, a.job, a.conf, quality=q, snapshot=True,
                                   optimizer_state=a.optimizer_state)
            r = ck.restore_into(t.model, optimizer=t.opt)
            t.step = r.step
            handle = None
            print("crash at step %d: restored step %d from rckpt" % (a.crash_at, r.step))
    if handle is not None:
        r = handle.wait()
        raw += r.raw_bytes
        enc += r.enc_bytes
    ck.close()
    loss, acc = t.test()
    print("trained %d steps in %.1f s: test accuracy %.4f, test loss %.4f; checkpoints "
          "%.1f KiB stored for %.1f KiB of fp32 (%.1fx)" %
          (a.steps, time.perf_counter() - t0, acc, loss, enc / 1024, raw / 1024, raw / max(enc, 1)))


if __name__ == "__main__":
    main()
