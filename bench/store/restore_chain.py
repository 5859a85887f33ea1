#!/usr/bin/python3
"""A resume's time as a run goes on: a trainer (an MLP 512-2048-512-512
with AdamW, 2.4 Mi parameters, 7.3 Mi values with Adam's state) saves
--saves steps into two jobs side by side, one with the writer compacting
every --every saves (Checkpointer's compact_every, default 8) and one
never (compact_every=0); after every --probe saves the latest step of
each is restored (restore_full, the best of --reps), beside torch.load of
the same state from a local file (the two jobs' order alternating from
probe to probe). One line a probe, then the ratio never / compacted as
median [min, max] over the probes, and the medians beside torch.load.

    export CEPH_CONF=$PWD/build/cluster/ceph.conf
    /usr/bin/python3 bench/store/restore_chain.py --saves 24 --probe 4
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "client", "python"))

import torch  # noqa: E402
import rckpt  # noqa: E402


def best(fn, reps):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--saves", type=int, default=24)
    ap.add_argument("--probe", type=int, default=4)
    ap.add_argument("--every", type=int, default=8)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--pool", default="rckpt")
    a = ap.parse_args()
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 512),
                            torch.nn.ReLU(), torch.nn.Linear(512, 512))
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    jobs = {n: "restore-chain-%s-%d" % (n, os.getpid()) for n in ("compacted", "never")}
    cks = {n: rckpt.Checkpointer(pool=a.pool, job=j, compact_every=a.every if n == "compacted" else 0)
           for n, j in jobs.items()}
    rows = []
    try:
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "state.pt")
            for s in range(1, a.saves + 1):
                for _ in range(5):
                    loss = m(torch.randn(64, 512)).pow(2).mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                for ck in cks.values():
                    ck.save(s, model=m, optimizer=opt).wait()
                if s % a.probe:
                    continue
                torch.save({"model": m.state_dict(), "optimizer": opt.state_dict()}, path)
                order = ["compacted", "never"] if len(rows) % 2 == 0 else ["never", "compacted"]  # A B, B A
                r = {n: best(cks[n].restore_full, a.reps) for n in order}
                r["torch.load"] = best(lambda: torch.load(path), a.reps)
                rows.append(r)
                print("step %3d: compacted every %d %6.0f ms, never %6.0f ms (%.1fx), torch.load %5.0f ms"
                      % (s, a.every, r["compacted"], r["never"], r["never"] / r["compacted"], r["torch.load"]),
                      flush=True)
    finally:
        for n, ck in cks.items():
            ck.close()
            rckpt.Checkpointer.delete(a.pool, jobs[n])
    ratios = [r["never"] / r["compacted"] for r in rows]
    print("never / compacted, per probe: %.1fx median [%.1f, %.1f]"
          % (statistics.median(ratios), min(ratios), max(ratios)))
    med = {n: statistics.median(r[n] for r in rows) for n in rows[0]}
    print("median over the probes: compacted %.0f ms (%.1fx torch.load), never %.0f ms (%.1fx torch.load)"
          % (med["compacted"], med["compacted"] / med["torch.load"], med["never"], med["never"] / med["torch.load"]))


if __name__ == "__main__":
    main()
