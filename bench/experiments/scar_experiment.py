#!/usr/bin/python3
"""SCAR's experiment on rckpt: rework after losing part of the parameters.

For each model (multinomial logistic regression, a small CNN and an MLP, all
on scikit-learn's bundled digits, plain SGD), one unperturbed run saves into
rckpt under each checkpoint scheme, all runs seeing the same batches:

  full       a full save every C iterations; on failure every parameter
             comes back from the checkpoint (traditional recovery)
  partial    the same saves; only the lost parameters come back (SCAR's
             partial recovery), the others keep their live values
  priority   after a first full save, 1/8 of the blocks every C/8
             iterations (the same bytes per iteration, about): those that
             moved most since they were last saved; partial recovery
  roundrobin the same, the next 1/8 of the blocks in turn
  random     the same, a random 1/8

Then, per trial, a failure at a random iteration f loses a random fraction
(1/4, 1/2, 3/4) of the parameter blocks; each scheme recovers from its
latest committed step <= f (read back from the cluster) and training goes
on with the same batches. Rework = the iterations the perturbed run needs to
reach the unperturbed run's loss at iteration T, minus those the unperturbed
run needed. Every scheme sees the same failures.

    export CEPH_CONF=$PWD/build/cluster/ceph.conf
    /usr/bin/python3 bench/experiments/scar_experiment.py              # 3 models x 3 fractions x 30 trials
    /usr/bin/python3 bench/experiments/scar_experiment.py --trials 5   # quicker
"""
import argparse
import json
import os
import random
import statistics
import sys
import time

import torch
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "client", "python"))
sys.path.insert(0, os.path.join(here, "..", "..", "client", "python", "examples"))
try:
    import rckpt  # noqa: E402
    import digits  # noqa: E402  (it needs rckpt too)
except ImportError as _missing:  # --help works without the library
    rckpt, _rckpt_missing = None, _missing

SCHEMES = ("full", "partial", "priority", "roundrobin", "random")
SELECT = {"priority": "priority", "roundrobin": "round_robin", "random": "random"}


def make(name):
    nn = torch.nn
    if name == "mlr":
        return nn.Sequential(nn.Linear(64, 10))
    if name == "cnn":
        return nn.Sequential(nn.Unflatten(1, (1, 8, 8)), nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(),
                             nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(16 * 4 * 4, 10))
    if name == "mlp":
        return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    raise ValueError(name)


LR = {"mlr": 0.5, "cnn": 0.1, "mlp": 0.1}


class Run:
    """Plain SGD whose batch at iteration t depends only on (seed, t)."""

    def __init__(self, name, seed, x, y, batch=64):
        torch.manual_seed(seed)
        self.model = make(name)
        self.lr = LR[name]
        self.seed, self.x, self.y, self.batch = seed, x, y, batch

    def step(self, t):
        g = torch.Generator().manual_seed(self.seed * 1000003 + t)
        i = torch.randint(0, len(self.y), (self.batch,), generator=g)
        self.model.zero_grad()
        F.cross_entropy(self.model(self.x[i]), self.y[i]).backward()
        with torch.no_grad():
            for p in self.model.parameters():
                p.sub_(self.lr * p.grad)

    def loss(self):
        with torch.no_grad():
            return F.cross_entropy(self.model(self.x), self.y).item()

    def state(self):
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def load(self, sd):
        self.model.load_state_dict(sd)


def blocks_of(sd, block):
    """Every (name, first, count) block of the flattened tensors."""
    out = []
    for k, v in sd.items():
        n = v.numel()
        out += [(k, f, min(block, n - f)) for f in range(0, n, block)]
    return out


def lose(blocks, frac, rng):
    """A random set of blocks holding >= frac of the elements."""
    total = sum(c for _, _, c in blocks)
    order = list(range(len(blocks)))
    rng.shuffle(order)
    got, out = 0, []
    for i in order:
        if got >= frac * total:
            break
        out.append(blocks[i])
        got += blocks[i][2]
    return out


def first_below(losses, target, start=0):
    for t in range(start, len(losses)):
        if losses[t] <= target:
            return t
    return None


def experiment(a, name, x, y, conf):
    rng = random.Random(a.seed)
    T, C = a.iters, a.interval
    every = max(1, C // 8)
    trials = [(rng.randint(C, T - C), rng.random()) for _ in range(a.trials)]
    fails = {f for f, _ in trials}
    # The unperturbed run, saving under every scheme at once.
    run = Run(name, a.seed, x, y)
    jobs = {s: "scar-%s-%s-%d" % (name, s, os.getpid()) for s in ("full", "priority", "roundrobin", "random")}
    cks = {}
    for s, j in jobs.items():
        rckpt.Checkpointer.delete(job=j, conf=conf)
        cks[s] = rckpt.Checkpointer(job=j, conf=conf, compute="cpu", partial_block=a.block,
                                    eps=a.eps)
    saved = {s: [] for s in cks}        # iterations saved, per job
    written = {s: 0 for s in cks}       # bytes
    losses, snaps = [run.loss()], {}
    for t in range(0, 4 * T + 1):
        if t > 0:
            run.step(t)
            losses.append(run.loss())
        if t in fails:
            snaps[t] = run.state()
        if t > T:
            continue
        sd = run.model.state_dict()
        for s, ck in cks.items():
            if s == "full" and t % C == 0:
                r = ck.save(t + 1, sd).wait()
            elif s != "full" and (t == 0 or t % every == 0):
                r = ck.save(t + 1, sd, partial=1 / 8, select=SELECT[s], seed=a.seed).wait()
            else:
                continue
            saved[s].append(t)
            written[s] += r.enc_bytes
    target = losses[T]
    base_hit = first_below(losses, target)
    cache = {}

    def restored(job, t):
        """The job's latest committed step <= t, as a state_dict (cached)."""
        s = max(i for i in saved[job] if i <= t)
        if (job, s) not in cache:
            cache[(job, s)] = cks[job].restore(s + 1)
        return cache[(job, s)]

    blocks = blocks_of(run.state(), a.block)
    rework = {(frac, s): [] for frac in a.fractions for s in SCHEMES}
    for f, u in trials:
        for frac in a.fractions:
            lost = lose(blocks, frac, random.Random(int(u * 2**31) ^ int(frac * 1000)))
            for s in SCHEMES:
                job = "full" if s in ("full", "partial") else s
                ck = restored(job, f)
                sd = {k: v.clone() for k, v in snaps[f].items()}
                if s == "full":
                    sd = {k: v.clone() for k, v in ck.items()}
                else:
                    for k, first, count in lost:
                        sd[k].view(-1)[first:first + count] = ck[k].view(-1)[first:first + count]
                r = Run(name, a.seed, x, y)
                r.load(sd)
                ls = [None] * f + [r.loss()]
                t = f
                while ls[-1] > target and t < 4 * T:
                    t += 1
                    r.step(t)
                    ls.append(r.loss())
                hit = t if ls[-1] <= target else 4 * T
                rework[(frac, s)].append(hit - base_hit)
    for ck in cks.values():
        ck.close()
    for j in jobs.values():
        rckpt.Checkpointer.delete(job=j, conf=conf)
    params = sum(v.numel() for v in run.state().values())
    return {"model": name, "params": params, "target_loss": target, "base_hit": base_hit,
            "bytes_per_iter": {s: written[s] / (T + 1) for s in written},
            "rework": {"%g/%s" % k: v for k, v in rework.items()}}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="mlr,cnn,mlp")
    p.add_argument("--fractions", default="0.25,0.5,0.75")
    p.add_argument("--trials", type=int, default=30)
    p.add_argument("--iters", type=int, default=300, help="T: the run's length; the target is its loss")
    p.add_argument("--interval", type=int, default=48, help="C: iterations between full saves")
    p.add_argument("--block", type=int, default=16, help="elements per block (partial_block)")
    p.add_argument("--eps", type=float, default=None, help="compressor threshold (default: the library's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--conf", default=os.environ.get("CEPH_CONF"))
    p.add_argument("--json", help="write the results here")
    a = p.parse_args()
    if rckpt is None:
        sys.exit(str(_rckpt_missing))
    a.fractions = [float(v) for v in a.fractions.split(",")]
    if not a.conf:
        sys.exit("scar_experiment: no cluster (set CEPH_CONF or --conf)")
    torch.set_num_threads(1)
    x, y, _, _, _, _ = digits.load_digits()
    out = []
    t0 = time.time()
    for name in a.models.split(","):
        r = experiment(a, name, x, y, a.conf)
        out.append(r)
        print("%s: %d parameters, target loss %.4f reached at iteration %d; bytes written per "
              "iteration: %s" % (name, r["params"], r["target_loss"], r["base_hit"],
                                 ", ".join("%s %.0f" % kv for kv in r["bytes_per_iter"].items())),
              flush=True)
    print()
    print("Mean rework iterations (%d trials; failure uniform in [C, T-C]; C=%d, partial 1/8 every %d)"
          % (a.trials, a.interval, max(1, a.interval // 8)))
    print("| model | lost | " + " | ".join(SCHEMES) + " | priority vs full | priority vs partial |")
    print("|---|---:|" + "---:|" * (len(SCHEMES) + 2))
    for r in out:
        for frac in a.fractions:
            m = {s: statistics.mean(r["rework"]["%g/%s" % (frac, s)]) for s in SCHEMES}
            red = lambda b: "%.0f%%" % (100 * (1 - m["priority"] / b)) if b > 0 else "n/a"
            print("| %s | %g | %s | %s | %s |" % (r["model"], frac,
                                                 " | ".join("%.1f" % m[s] for s in SCHEMES),
                                                 red(m["full"]), red(m["partial"])))
    print("\n(%.0f s)  command: %s" % (time.time() - t0, " ".join(sys.argv)))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"args": vars(a), "results": out}, fh, indent=1)


if __name__ == "__main__":
    main()
