#!/usr/bin/python3
"""Group saves (distributed training) against one cluster: the same real
checkpoints saved by 1, 2 and 4 ranks (processes over torch.distributed,
gloo on loopback), each rank holding a ZeRO-3 slice of every tensor; and a
step saved by 4 ranks restored by 2, each its own slice (resharding),
against one process restoring it whole.

    group_bench.py CKPT_DIR --ranks 1,2,4 --steps N --reps R [--chunk-params C] --json OUT.json

Measured side by side: each repetition runs every rank count once, in an
order that rotates, so every case has neighbours of every kind; a case's
figure is the median over repetitions of its per-repetition ratio to the
1-rank run of that repetition. Per save: the wall time of the slowest
rank (the step is committed when it returns), the bytes the step stores
and the bytes each rank sent over the transport (what straddles the
ranks' slices). On a machine with fewer cores than ranks the ranks share
them: the ratios then measure that sharing, not the cluster. Chunks of
--chunk-params (default 256 Ki): a model of a few million parameters has
too few chunks of the default 4 Mi to share among ranks (each chunk is one
rank's work).

Worker mode (internal): group_bench.py --worker RANK WORLD RDV JOB CKPT_DIR STEPS MODE OUT.json CHUNK
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))


def steps_of(d):
    return sorted(f for f in glob.glob(os.path.join(d, "step-*.safetensors"))
                  if not f.endswith((".grads.safetensors", ".gmean.safetensors", ".optim.safetensors")))


def worker(a):
    sys.path.insert(0, os.path.join(here, "..", "data"))  # eval_checkpoint
    import torch
    import torch.distributed as dist
    import rckpt
    from eval_checkpoint import read_safetensors

    rank, world = int(a[0]), int(a[1])
    rdv, job, ckdir, nsteps, mode, out, chunk = a[2], a[3], a[4], int(a[5]), a[6], a[7], int(a[8])
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + rdv, rank=rank, world_size=world)
    files = steps_of(ckdir)[:nsteps]
    res = {"saves": [], "restore": None}
    if mode == "save":
        with rckpt.Checkpointer(job=job, group=True, compute="cpu", chunk_params=chunk) as ck:
            for i, f in enumerate(files):
                sd = {}
                for name, t in read_safetensors(f).items():
                    n = t.numel()
                    each = (n + world - 1) // world
                    lo, hi = min(rank * each, n), min((rank + 1) * each, n)
                    sd[name] = rckpt.Shard(t.reshape(-1)[lo:hi].clone(), t.shape, lo)
                sent0 = ck._tr.sent
                dist.barrier()
                t0 = time.perf_counter()
                r = ck.save(i + 1, sd).wait()
                res["saves"].append({"seconds": time.perf_counter() - t0, "stored": r.enc_bytes,
                                     "raw": r.raw_bytes, "sent": ck._tr.sent - sent0})
    else:  # restore: this rank's slice of every tensor of the last step
        with rckpt.Checkpointer(job=job, writer=False) as ck:
            shapes = {k: v.numel() for k, v in read_safetensors(files[-1]).items()}
            dist.barrier()
            t0 = time.perf_counter()
            for name, n in shapes.items():
                each = (n + world - 1) // world
                lo, hi = min(rank * each, n), min((rank + 1) * each, n)
                if hi > lo:
                    ck.restore_slice(name, lo, hi - lo)
            res["restore"] = time.perf_counter() - t0
    with open(out, "w") as f:
        json.dump(res, f)
    dist.barrier()
    dist.destroy_process_group()


def launch(world, job, ckdir, nsteps, mode, tmp, chunk):
    rdv = os.path.join(tmp, "rdv-%s-%d-%d" % (mode, world, time.monotonic_ns()))
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo")
    outs = [os.path.join(tmp, "%s-%d-%d.json" % (mode, world, r)) for r in range(world)]
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", str(r), str(world), rdv, job,
                               ckdir, str(nsteps), mode, outs[r], str(chunk)], env=env) for r in range(world)]
    for p in procs:
        if p.wait(timeout=1800) != 0:
            raise SystemExit("a rank of %d failed (%s)" % (world, mode))
    res = []
    for o in outs:
        with open(o) as f:
            res.append(json.load(f))
    return res


def delete(job):
    import rckpt
    rckpt.Checkpointer.delete(job=job)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        return worker(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ckpt")
    ap.add_argument("--ranks", default="1,2,4")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--chunk-params", type=int, default=1 << 18)
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(here, "..", "..", "client", "python"))
    ranks = [int(x) for x in a.ranks.split(",")]
    if ranks[0] != 1:
        raise SystemExit("--ranks must start with 1 (the baseline)")
    rows = {p: [] for p in ranks}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(a.reps):
            order = ranks[rep % len(ranks):] + ranks[:rep % len(ranks)]
            per = {}
            for p in order:
                job = "bench-group-%d-%d-%d" % (os.getpid(), rep, p)
                delete(job)
                res = launch(p, job, a.ckpt, a.steps, "save", tmp, a.chunk_params)
                # a step's time: its slowest rank's; the first save (bases) apart
                t = [max(r["saves"][i]["seconds"] for r in res) for i in range(len(res[0]["saves"]))]
                per[p] = {"first": t[0], "later": statistics.median(t[1:]) if len(t) > 1 else t[0],
                          "stored": res[0]["saves"][-1]["stored"], "raw": res[0]["saves"][-1]["raw"],
                          "sent": [r["saves"][-1]["sent"] for r in res]}
                if p == max(ranks) and p >= 4:  # resharding: 4 -> 2, against 1 whole
                    r2 = launch(2, job, a.ckpt, a.steps, "restore", tmp, a.chunk_params)
                    r1 = launch(1, job, a.ckpt, a.steps, "restore", tmp, a.chunk_params)
                    per[p]["reshard2"] = max(r["restore"] for r in r2)
                    per[p]["whole1"] = r1[0]["restore"]
                delete(job)
            for p in ranks:
                per[p]["ratio_later"] = per[p]["later"] / per[1]["later"]
                per[p]["ratio_first"] = per[p]["first"] / per[1]["first"]
                rows[p].append(per[p])
    summary = {}
    for p in ranks:
        v = rows[p]
        summary[p] = {
            "save_s_later": statistics.median(x["later"] for x in v),
            "save_s_first": statistics.median(x["first"] for x in v),
            "ratio_later_to_1": statistics.median(x["ratio_later"] for x in v),
            "ratio_first_to_1": statistics.median(x["ratio_first"] for x in v),
            "stored_bytes": v[0]["stored"], "raw_bytes": v[0]["raw"],
            "sent_bytes_per_rank": v[0]["sent"],
        }
        if "reshard2" in v[0]:
            summary[p]["restore_4to2_s"] = statistics.median(x["reshard2"] for x in v)
            summary[p]["restore_whole_1_s"] = statistics.median(x["whole1"] for x in v)
            summary[p]["restore_ratio_2_to_1"] = statistics.median(x["reshard2"] / x["whole1"] for x in v)
    with open(a.json, "w") as f:
        json.dump({"ranks": ranks, "rows": {str(k): v for k, v in rows.items()},
                   "summary": {str(k): v for k, v in summary.items()}, "cores": os.cpu_count(),
                   "chunk_params": a.chunk_params}, f, indent=1)
    for p in ranks:
        s = summary[p]
        print("%d rank(s): later saves %.3f s (x%.2f of 1 rank), first %.3f s (x%.2f); stored %d B of %d raw; "
              "sent per rank %s" % (p, s["save_s_later"], s["ratio_later_to_1"], s["save_s_first"],
                                    s["ratio_first_to_1"], s["stored_bytes"], s["raw_bytes"],
                                    s["sent_bytes_per_rank"]))
        if "restore_4to2_s" in s:
            print("  restore of a %d-rank step by 2 ranks (their slices): %.3f s; by 1 process whole: %.3f s "
                  "(x%.2f)" % (p, s["restore_4to2_s"], s["restore_whole_1_s"], s["restore_ratio_2_to_1"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
