#!/usr/bin/python3
"""A trainer to copy: a small character-level transformer, trained with
AdamW and a cosine schedule on a text every Debian system ships (the GPL),
checkpointed into rckpt every --every steps and resumed from its newest
checkpoint whenever it starts. Kill it at any moment (SIGKILL included) and
start it again: it goes on from the last step it saved, at once.

    export CEPH_CONF=$PWD/build/cluster/ceph.conf       # ./dev.sh demo starts it
    PYTHONPATH=client/python python3 examples/train_lm.py --job my-run --steps 300

examples/crash_loop.sh runs it under a restart loop with a crash of its own.
--crash-at N kills the process with SIGKILL right after starting the save
of step N (the save still in flight), once per --crash-marker file.
"""
import time

T0 = time.time()  # before the imports: "resumed after" counts them too

import argparse  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "client", "python"))
import rckpt  # noqa: E402

TEXT = "/usr/share/common-licenses/GPL-3"


class TinyLM(nn.Module):
    def __init__(self, vocab=128, dim=64, layers=2, ctx=64):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(ctx, dim))
        layer = nn.TransformerEncoderLayer(dim, 4, 4 * dim, dropout=0.0, batch_first=True)
        self.body = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(dim, vocab)
        # a causal mask of -inf: a buffer the checkpoint keeps exact
        self.register_buffer("mask", torch.triu(torch.full((ctx, ctx), float("-inf")), 1))

    def forward(self, x):
        h = self.emb(x) + self.pos[: x.shape[1]]
        return self.head(self.body(h, mask=self.mask[: x.shape[1], : x.shape[1]]))


def batches(data, step, batch=16, ctx=64):
    """The batch of step `step`: the same on every run, so a resumed run
    sees what the uninterrupted one would have."""
    g = torch.Generator().manual_seed(step)
    i = torch.randint(0, len(data) - ctx - 1, (batch,), generator=g)
    x = torch.stack([data[j: j + ctx] for j in i])
    y = torch.stack([data[j + 1: j + ctx + 1] for j in i])
    return x, y


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--job", default="lm-example")
    ap.add_argument("--pool", default="rckpt")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--every", type=int, default=25, help="checkpoint every K steps")
    ap.add_argument("--lossless", action="store_true", help="exact checkpoints (default: compressed)")
    ap.add_argument("--crash-at", type=int, default=None, help="SIGKILL itself mid-save of this step")
    ap.add_argument("--crash-marker", default=None, help="crash only while this file does not exist")
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    data = torch.tensor(list(open(TEXT, "rb").read()), dtype=torch.long).clamp_max(127)
    model = TinyLM()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, a.steps) / a.steps)))
    state = {"rng": torch.get_rng_state()}

    ck = rckpt.Checkpointer(a.pool, a.job, lossless=a.lossless, snapshot=True)
    last = ck.load_latest(model=model, optimizer=opt, scheduler=sched, state=state)
    if last is not None:
        torch.set_rng_state(state["rng"])
    start = 0 if last is None else last + 1
    print("resumed from step %s after %.2f s" % (last, time.time() - T0) if last is not None
          else "a new run", flush=True)

    for step in range(start, a.steps + 1):
        x, y = batches(data, step)
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % a.every == 0:
            state["rng"] = torch.get_rng_state()
            ck.save(step, model=model, optimizer=opt, scheduler=sched, state=state)
            print("step %d loss %.4f (save started)" % (step, loss.item()), flush=True)
            if step == a.crash_at and not (a.crash_marker and os.path.exists(a.crash_marker)):
                if a.crash_marker:
                    open(a.crash_marker, "w").close()
                os.kill(os.getpid(), signal.SIGKILL)  # mid-save: its writes in flight
    ck.close()  # raises if any save failed
    print("done: step %d loss %.4f" % (a.steps, loss.item()), flush=True)


if __name__ == "__main__":
    main()
