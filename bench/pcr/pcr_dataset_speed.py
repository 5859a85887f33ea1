#!/usr/bin/python3
"""Images per second of the map-style PCRDataset against PCRIterableDataset,
one epoch each through a DataLoader, on a live cluster.

It builds a PCR dataset of the first --images JPEGs of DIR (or uses
--dataset), then, after a warm-up epoch of each case, runs the cases
interleaved (iterable, map, [map-per-item,] iterable, map, ...) for --pairs
rounds. Every case decodes to RGB, makes each image --size x --size
(fit=--fit) and stacks batches of --batch with the default collate; in
id order, or with --shuffle shuffled (the iterable: records per epoch and
a shuffle buffer of --shuffle-buffer images; the map: a permutation of the
ids per epoch):

  iterable      DataLoader(PCRIterableDataset(...), batch_size=B)
  map           PCRDataset(...).loader(B): get_batch per batch
  map-per-item  DataLoader(PCRDataset(...), batch_size=B): dataset[i] per
                image, what PyTorch < 2.0 does with a map-style dataset
                (--per-item)

One JSON line per timed run, then a summary line per compared case: the
median of the per-round ratios (case / iterable, images/s; above 1: faster
than the iterable) with their min and max.

    export CEPH_CONF=$PWD/build/cluster/ceph.conf RCKPT_LIBRARY=$PWD/build/client/librckpt.so
    /usr/bin/python3 bench/data/make_pcr_images.py --count 1000 /tmp/pcr-images   # once
    /usr/bin/python3 bench/pcr/pcr_dataset_speed.py /tmp/pcr-images
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "client", "python"))


def label(y):  # a label the default collate takes (None where the build had none)
    return 0 if y is None else hash(y) & 0xffff


def epoch(make, seed):
    torch = sys.modules["torch"]
    torch.manual_seed(seed)
    loader, ds = make(seed)
    n = 0
    t = time.perf_counter()
    for x, _ in loader:
        n += x.shape[0]
    t = time.perf_counter() - t
    ds.close()
    return n, t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", nargs="?", help="a folder of JPEGs (bench/data/make_pcr_images.py makes one)")
    ap.add_argument("--dataset", help="an existing PCR dataset instead of DIR")
    ap.add_argument("--images", type=int, default=1000, help="JPEGs of DIR to build from")
    ap.add_argument("--images-per-record", type=int, default=128)
    ap.add_argument("--pairs", type=int, default=5, help="timed rounds (at least 4)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--fit", default="resize", choices=("resize", "center_crop", "random_crop"))
    ap.add_argument("--fidelity", type=int, default=0, help="groups read (0: all)")
    ap.add_argument("--threads", type=int, default=0, help="decode threads per dataset (0: 1)")
    ap.add_argument("--workers", type=int, default=0, help="DataLoader num_workers")
    ap.add_argument("--per-item", action="store_true", help="also time the per-item map path")
    ap.add_argument("--shuffle", action="store_true")
    ap.add_argument("--shuffle-buffer", type=int, default=256)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--pool", default="rckpt")
    ap.add_argument("--rckpt", default=os.path.join(here, "..", "..", "build", "client", "rckpt"))
    a = ap.parse_args()
    if a.pairs < 4:
        ap.error("--pairs: at least 4")
    if not a.dir and not a.dataset:
        ap.error("DIR or --dataset")
    if not os.environ.get("CEPH_CONF"):
        sys.exit("pcr_dataset_speed.py: set CEPH_CONF (export CEPH_CONF=$PWD/build/cluster/ceph.conf)")
    import torch
    import rckpt
    torch.set_num_threads(1)
    ds = a.dataset
    if not ds:
        files = sorted(f for f in os.listdir(a.dir) if f.lower().endswith(".jpg"))[:a.images]
        ds = "bench-dsspeed-%d" % os.getpid()
        print("building %s: %d images ..." % (ds, len(files)), file=sys.stderr, flush=True)
        labels = os.path.join(a.dir, "labels.csv")
        subprocess.run([a.rckpt, "-p", a.pool, "pcr", "build", "--dataset", ds,
                        "--images-per-record", str(a.images_per_record)] +
                       (["--labels", labels] if os.path.exists(labels) else []) +
                       [os.path.join(a.dir, f) for f in files], check=True, stdout=subprocess.DEVNULL)
    common = dict(pool=a.pool, fidelity=a.fidelity or None, threads=a.threads,
                  size=(a.size, a.size), fit=a.fit, target_transform=label)
    data = torch.utils.data

    def iterable(seed):
        d = rckpt.PCRIterableDataset(ds, shuffle=a.shuffle, seed=seed,
                                     shuffle_buffer=a.shuffle_buffer, **common)
        return data.DataLoader(d, batch_size=a.batch, num_workers=a.workers), d

    def mapped(seed):
        d = rckpt.PCRDataset(ds, **common)
        g = torch.Generator()
        g.manual_seed(seed)
        return d.loader(a.batch, shuffle=a.shuffle, generator=g, num_workers=a.workers), d

    def per_item(seed):
        d = rckpt.PCRDataset(ds, **common)
        g = torch.Generator()
        g.manual_seed(seed)
        return data.DataLoader(d, batch_size=a.batch, shuffle=a.shuffle, generator=g,
                               num_workers=a.workers), d

    cases = [("iterable", iterable), ("map", mapped)] + ([("map-per-item", per_item)] if a.per_item else [])
    rate = {name: [] for name, _ in cases}
    try:
        for name, make in cases:  # warm-up
            epoch(make, a.seed)
        for r in range(a.pairs):
            for name, make in cases:
                n, t = epoch(make, a.seed + 1 + r)
                rate[name].append(n / t)
                print(json.dumps({"case": name, "round": r, "images": n, "seconds": round(t, 4),
                                  "images_per_s": round(n / t, 1)}), flush=True)
    finally:
        if not a.dataset:
            subprocess.run([a.rckpt, "-p", a.pool, "pcr", "rm", "--dataset", ds], stdout=subprocess.DEVNULL)
    for name, _ in cases[1:]:
        ratios = [m / i for m, i in zip(rate[name], rate["iterable"])]
        print(json.dumps({"summary": name + " / iterable", "rounds": a.pairs, "batch": a.batch,
                          "size": a.size, "fit": a.fit, "workers": a.workers, "threads": a.threads,
                          "shuffle": a.shuffle,
                          "images_per_s_median": round(statistics.median(rate[name]), 1),
                          "iterable_images_per_s_median": round(statistics.median(rate["iterable"]), 1),
                          "ratio_median": round(statistics.median(ratios), 3),
                          "ratio_min": round(min(ratios), 3), "ratio_max": round(max(ratios), 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
