#!/usr/bin/python3
"""Trainer stall per checkpoint: how long a training loop waits for each
save, rckpt's four ways side by side with torch.save to a local file.

A real trainer (the digits MLP 64-W-W-10, SGD with momentum) trains; every
--every steps it saves the same state in turn five ways, so that the
machine's noise hits all of them alike:

  torch.save     torch.save of the state_dict to a local file, fsync'd
  rckpt sync     Checkpointer.save(...).wait(): copy, encode, write and
                 commit
  rckpt default  Checkpointer.save(...): the trainer waits for a copy of
                 the tensors only (snapshot=True, the default); the encode,
                 writes and commit finish in the background
  rckpt snapshot Checkpointer(snapshot=True).save(...), named: the same
  rckpt in place Checkpointer(snapshot=False).save(...): the trainer waits
                 for the encode; the writes and the commit finish behind

Per way: the stall (median, min, max over --saves saves), and for rckpt the
save's whole time (encode + write + commit) and the state's fp32 MB/s over
it; and the CPU a save costs the process, every thread counted (from the
call until the save is committed: the background work a trainer's cores
pay for), in CPU seconds per GB of fp32 state. Each rckpt way has a job of
its own, deleted at the end.

    export CEPH_CONF=$PWD/build/cluster/ceph.conf
    /usr/bin/python3 bench/store/save_stall.py --width 1024 --saves 10 --json out.json
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "client", "python"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--width", type=int, default=1024, help="hidden width (default 1024)")
    ap.add_argument("--saves", type=int, default=10, help="saves per way (default 10)")
    ap.add_argument("--every", type=int, default=10, help="training steps between saves (default 10)")
    ap.add_argument("--pool", default="rckpt")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write the results to this file")
    ap.add_argument("--rckpt", default=os.path.join(here, "..", "..", "build", "client", "rckpt"))
    a = ap.parse_args()
    if a.saves < 1 or a.width < 1 or a.every < 1:
        ap.error("--saves, --width and --every take positive numbers")
    try:
        import torch
        from sklearn.datasets import load_digits
    except ImportError as e:
        sys.exit("save_stall.py: %s: install python3-torch and python3-sklearn" % e)
    import rckpt

    torch.manual_seed(a.seed)
    torch.set_num_threads(1)
    d = load_digits()
    x = torch.tensor(d.data, dtype=torch.float32) / 16.0
    y = torch.tensor(d.target)
    w = a.width
    model = torch.nn.Sequential(torch.nn.Linear(64, w), torch.nn.ReLU(), torch.nn.Linear(w, w),
                                torch.nn.ReLU(), torch.nn.Linear(w, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    ema = rckpt.GradientEMA(model)
    ema.enabled = True
    nparam = sum(p.numel() for p in model.parameters())
    state_mb = nparam * 4 / 1e6

    tag = "bench-stall-%d-%d" % (os.getpid(), a.seed)
    ways = ["torch.save", "rckpt sync", "rckpt default", "rckpt snapshot", "rckpt in place"]
    cks = {"rckpt sync": rckpt.Checkpointer(a.pool, tag + "-sync"),
           "rckpt default": rckpt.Checkpointer(a.pool, tag + "-default"),
           "rckpt snapshot": rckpt.Checkpointer(a.pool, tag + "-snap", snapshot=True),
           "rckpt in place": rckpt.Checkpointer(a.pool, tag + "-inplace", snapshot=False)}
    stall = {k: [] for k in ways}
    total = {k: [] for k in ways}
    cpu = {k: [] for k in ways}  # process CPU seconds, all threads
    ratio = []
    gen = torch.Generator().manual_seed(a.seed)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for s in range(1, a.saves + 1):
                for _ in range(a.every):
                    idx = torch.randint(0, len(x), (64,), generator=gen)
                    opt.zero_grad()
                    loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
                    loss.backward()
                    opt.step()
                sd = model.state_dict()
                for k in ways:
                    t0 = time.perf_counter()
                    c0 = time.process_time()
                    if k == "torch.save":
                        path = os.path.join(tmp, "ckpt.pt")
                        with open(path, "wb") as f:
                            torch.save(sd, f)
                            f.flush()
                            os.fsync(f.fileno())
                        t = time.perf_counter() - t0
                        cpu[k].append(time.process_time() - c0)
                        stall[k].append(t)
                        total[k].append(t)
                        continue
                    h = cks[k].save(s, sd, grads=ema)
                    stall[k].append(time.perf_counter() - t0)
                    r = h.wait()
                    total[k].append(time.perf_counter() - t0)
                    cpu[k].append(time.process_time() - c0)
                    if k == "rckpt sync":
                        stall[k][-1] = total[k][-1]  # it waits for the commit
                        ratio.append(r.ratio)
    finally:
        for k, ck in cks.items():
            ck.close()
            subprocess.run([a.rckpt, "-p", a.pool, "ckpt", "rm", "--job", ck.job],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def summ(v):
        return {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)}

    out = {"width": w, "params": nparam, "state_mb": state_mb, "saves": a.saves, "every": a.every,
           "ratio": summ(ratio),
           "ways": {k: {"stall_s": summ(stall[k]), "total_s": summ(total[k]),
                        "cpu_s_per_gb": summ([c / (state_mb / 1e3) for c in cpu[k]])} for k in ways}}
    print("digits MLP 64-%d-%d-10: %d parameters, %.1f MB fp32; %d saves, every %d steps; ratio %.1fx"
          % (w, w, nparam, state_mb, a.saves, a.every, out["ratio"]["median"]))
    print("| way | stall ms (median) | min | max | whole save ms | MB/s of fp32 | CPU s per GB |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for k in ways:
        st, tt, cg = out["ways"][k]["stall_s"], out["ways"][k]["total_s"], out["ways"][k]["cpu_s_per_gb"]
        print("| %s | %.1f | %.1f | %.1f | %.1f | %.0f | %.2f |" % (k, st["median"] * 1e3, st["min"] * 1e3,
                                                                  st["max"] * 1e3, tt["median"] * 1e3,
                                                                  state_mb / tt["median"], cg["median"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
