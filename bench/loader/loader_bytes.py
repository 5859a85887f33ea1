#!/usr/bin/python3
"""Bytes from the cluster per epoch: the regular loader against the
locality-aware one, measured on a live cluster with p learners (processes
on this machine, torch.distributed over gloo on loopback).

It builds a PCR dataset of the first --images JPEGs of DIR, then each
learner reads it for --epochs epochs in three runs: regular (every learner
reads its share from the cluster every epoch), locality-aware with caches
that hold the whole dataset, and locality-aware with caches of
--partial of each learner's share. Per epoch: bytes read from the cluster
(all learners), bytes exchanged between learners, and the wall time of
the epoch (the slowest learner), with the ratio to the regular loader.

    export CEPH_CONF=$PWD/build/cluster/ceph.conf
    /usr/bin/python3 bench/data/make_pcr_images.py --count 3000 /tmp/pcr-images   # once
    /usr/bin/python3 bench/loader/loader_bytes.py /tmp/pcr-images
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "client", "python"))


def worker(a):
    import torch
    import torch.distributed as dist
    import rckpt
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + a.rdv, rank=a.rank, world_size=a.learners)
    ds = rckpt.PCRDataset(a.dataset, pool=a.pool, decode=True, fidelity=a.fidelity)
    share = a.share_bytes // a.learners
    runs = [("regular", False, 0), ("locality", True, 0), ("locality-partial", True, int(share * a.partial))]
    out = {}
    for name, loc, cache in runs:
        ld = ds.distributed(local_batch=a.local_batch, seed=a.seed, locality=loc,
                            cache_bytes=cache if cache else (1 << 40), threads=1)
        per = []
        for e in range(a.epochs):
            ld.set_epoch(e)
            dist.barrier()
            s0, t0 = ld.stats(), time.perf_counter()
            n = 0
            for batch in ld:
                n += len(batch)
            t = time.perf_counter() - t0
            s1 = ld.stats()
            per.append({"storage": s1["storage_bytes"] - s0["storage_bytes"],
                        "sent": s1["sent_bytes"] - s0["sent_bytes"], "seconds": t, "images": n})
        ld.close()
        out[name] = per
    ds.close()
    with open(a.out, "w") as f:
        json.dump(out, f)
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", nargs="?")
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--learners", type=int, default=4)
    ap.add_argument("--local-batch", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--fidelity", type=int, default=0, help="groups read (0: all)")
    ap.add_argument("--partial", type=float, default=0.5, help="cache size, fraction of a learner's share")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--pool", default="rckpt")
    ap.add_argument("--json", help="also write the table's rows to this file")
    ap.add_argument("--rckpt", default=os.path.join(here, "..", "..", "build", "client", "rckpt"))
    for k in ("--worker", "--dataset", "--rdv", "--out"):
        ap.add_argument(k, help=argparse.SUPPRESS)
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--share-bytes", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    a.fidelity = a.fidelity or None
    if a.worker:
        return worker(a)
    if not a.dir:
        ap.error("DIR: a folder of JPEGs (bench/data/make_pcr_images.py makes one)")
    if not os.environ.get("CEPH_CONF"):
        sys.exit("loader_bytes.py: set CEPH_CONF (export CEPH_CONF=$PWD/build/cluster/ceph.conf)")
    files = sorted(f for f in os.listdir(a.dir) if f.lower().endswith(".jpg"))[:a.images]
    if len(files) < a.learners * a.local_batch:
        sys.exit("loader_bytes.py: %s has %d JPEGs; need at least %d" % (a.dir, len(files),
                                                                        a.learners * a.local_batch))
    ds = "bench-loader-%d" % os.getpid()
    print("building %s: %d images ..." % (ds, len(files)), file=sys.stderr, flush=True)
    subprocess.run([a.rckpt, "-p", a.pool, "pcr", "build", "--dataset", ds] + [os.path.join(a.dir, f) for f in files],
                   check=True, stdout=subprocess.DEVNULL)
    try:
        import rckpt
        info = rckpt.PCRDataset(ds, pool=a.pool, decode=False).info
        groups = info.groups if a.fidelity is None else min(a.fidelity, info.groups)
        total = info.head_bytes + sum(info.group_bytes[g] for g in range(groups))
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, GLOO_SOCKET_IFNAME="lo")
            errs = [open(os.path.join(tmp, "%d.err" % r), "w+") for r in range(a.learners)]
            procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", "1",
                                       "--dataset", ds, "--rank", str(r), "--learners", str(a.learners),
                                       "--rdv", os.path.join(tmp, "rdv"), "--out", os.path.join(tmp, "%d" % r),
                                       "--local-batch", str(a.local_batch), "--epochs", str(a.epochs),
                                       "--fidelity", str(a.fidelity or 0), "--partial", str(a.partial),
                                       "--seed", str(a.seed), "--share-bytes", str(total),
                                       "--pool", a.pool], env=env, stderr=errs[r])
                     for r in range(a.learners)]
            # each learner's exit status or signal, and its stderr
            bad = []
            for r, p in enumerate(procs):
                rc = p.wait()
                errs[r].seek(0)
                err = errs[r].read()
                errs[r].close()
                if err:
                    sys.stderr.write("".join("learner %d: %s\n" % (r, ln) for ln in err.splitlines()[-20:]))
                if rc != 0:
                    bad.append("learner %d %s" % (r, "died of signal %s" % signal.Signals(-rc).name
                                                      if rc < 0 else "exited %d" % rc))
            if bad:
                sys.exit("loader_bytes.py: " + "; ".join(bad))
            res = []
            for r in range(a.learners):
                with open(os.path.join(tmp, "%d" % r)) as f:
                    res.append(json.load(f))
    finally:
        subprocess.run([a.rckpt, "-p", a.pool, "pcr", "rm", "--dataset", ds], stdout=subprocess.DEVNULL)
    print("%d learners, local batch %d, %d images (%.1f MB at %s groups), decode to RGB, %d epochs"
          % (a.learners, a.local_batch, len(files), total / 1e6, groups, a.epochs))
    print()
    print("| loader | epoch | MB from the cluster | vs regular | MB exchanged | epoch s | vs regular |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    rows = []
    for name in ("regular", "locality", "locality-partial"):
        for e in range(a.epochs):
            st = sum(res[r][name][e]["storage"] for r in range(a.learners))
            ex = sum(res[r][name][e]["sent"] for r in range(a.learners))
            t = max(res[r][name][e]["seconds"] for r in range(a.learners))
            rst = sum(res[r]["regular"][e]["storage"] for r in range(a.learners))
            rt = max(res[r]["regular"][e]["seconds"] for r in range(a.learners))
            label = name if name != "locality-partial" else "locality, caches %g of a share" % a.partial
            print("| %s | %d | %.2f | %.3f | %.2f | %.2f | %.2f |" % (label, e, st / 1e6, st / rst, ex / 1e6,
                                                                    t, t / rt))
            rows.append({"loader": name, "epoch": e, "storage_bytes": st, "exchanged_bytes": ex,
                         "seconds": t, "images": sum(res[r][name][e]["images"] for r in range(a.learners))})
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"learners": a.learners, "local_batch": a.local_batch, "images": len(files),
                       "dataset_bytes": total, "groups": groups, "partial": a.partial, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
