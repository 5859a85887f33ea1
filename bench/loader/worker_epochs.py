#!/usr/bin/python3
"""Epoch times of a PCR dataset read by spawned DataLoader workers, kept
across epochs (persistent_workers=True) or started again each epoch, in
interleaved pairs (A B A B): one line per run, then the median ratio.

    /usr/bin/python3 bench/loader/worker_epochs.py DATASET [--workers 2]
        [--epochs 3] [--pairs 2] [--batch 50]

Needs CEPH_CONF and a dataset built with `rckpt pcr build`.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "client", "python"))

import torch  # noqa: E402
import rckpt  # noqa: E402


def count(batch):  # what a batch becomes: its size (labels may be absent)
    return len(batch)


def run(ds, workers, epochs, batch, persistent):
    dl = ds.loader(batch_size=batch, num_workers=workers, persistent_workers=persistent, collate_fn=count)
    out = []
    for _ in range(epochs):
        t0 = time.perf_counter()
        n = sum(dl)
        out.append(time.perf_counter() - t0)
    assert n == len(ds), (n, len(ds))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=50)
    a = ap.parse_args()
    torch.multiprocessing.set_start_method("spawn")
    ds = rckpt.PCRDataset(a.dataset, size=(64, 64))
    ratios = []
    for _ in range(a.pairs):
        t = {}
        for persistent in (False, True):
            t[persistent] = run(ds, a.workers, a.epochs, a.batch, persistent)
            print("persistent_workers=%-5s epochs %s s" % (persistent, " ".join("%.2f" % x for x in t[persistent])))
        later = [x / y for x, y in zip(t[False][1:], t[True][1:])]
        ratios.append(statistics.median(later))
    print("epochs after the first: started each epoch / kept = %.1fx median [%.1f, %.1f]"
          % (statistics.median(ratios), min(ratios), max(ratios)))


if __name__ == "__main__":
    main()
