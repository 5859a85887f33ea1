#!/usr/bin/python3
"""share_restore.py: do 16 trainers restoring at once starve the cluster's
other tenants? (issue 29 item 5)

A bystander writes small objects one at a time (4 KiB, one in flight, as a
latency-sensitive tenant does) and times every write. Its latency is
measured in alternating windows: alone, then while N restore processes
(`rckpt ckpt restore`, 16 by default) restore a job over and over, then
alone again, and so on (A B A B ...). A third window in each round is the
control: the same N processes decoding the same steps from local files
(`rckpt codec decode`), the client's CPU load without the cluster's; on a
small machine where the bystander shares the cores it shows how much of
its slowdown is CPU, not the OSDs. Reported: the bystander's p50 and p99
in each window, the median of the per-pair ratios of p99 (loaded / alone),
the restores completed, and every health warning `ceph health detail`
showed while the restores ran (SLOW_OPS above all).

  CEPH_CONF=build/cluster/ceph.conf /usr/bin/python3 bench/store/share_restore.py \\
      --rckpt build/client/rckpt --checkpoints build/bdata/ck

Needs python3-rados (Debian's, for the bystander) and the ceph tool.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def pct(xs, q):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    return xs[min(len(xs) - 1, int(q * len(xs)))]


class Bystander(threading.Thread):
    """Writes 4 KiB objects one after another; each write's latency goes
    into the window open when it started."""

    def __init__(self, conf, pool, tag):
        super().__init__(daemon=True)
        import rados
        self.cl = rados.Rados(conffile=conf)
        self.cl.connect(timeout=30)
        self.io = self.cl.open_ioctx(pool)
        self.tag = tag
        self.window = None
        self.lat = {}
        self.stop = threading.Event()
        self.lock = threading.Lock()

    def open(self, name):
        with self.lock:
            self.window = name
            self.lat[name] = []

    def close(self):
        with self.lock:
            self.window = None

    def run(self):
        data = os.urandom(4096)
        i = 0
        while not self.stop.is_set():
            oid = "share-bystander-%s-%d" % (self.tag, i % 64)
            t0 = time.perf_counter()
            self.io.write_full(oid, data)
            dt = time.perf_counter() - t0
            with self.lock:
                if self.window is not None:
                    self.lat[self.window].append(dt)
            i += 1

    def finish(self):
        self.stop.set()
        self.join(timeout=60)
        for k in range(64):
            try:
                self.io.remove_object("share-bystander-%s-%d" % (self.tag, k))
            except Exception:
                pass
        self.io.close()
        self.cl.shutdown()


def health_checks(conf):
    r = subprocess.run(["ceph", "-c", conf, "health", "detail", "-f", "json"],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return {"(ceph health failed)": r.stderr.strip()[:200]}
    checks = json.loads(r.stdout).get("checks", {})
    return {k: v.get("summary", {}).get("message", "") for k, v in checks.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rckpt", required=True, help="the rckpt tool")
    ap.add_argument("--checkpoints", required=True,
                    help="step-N.safetensors files; the first --steps are saved as one job")
    ap.add_argument("--pool", default="rckpt")
    ap.add_argument("--restores", type=int, default=16, help="concurrent restore processes (16)")
    ap.add_argument("--steps", type=int, default=8, help="steps saved, so restores fold a chain (8)")
    ap.add_argument("--pairs", type=int, default=3, help="rounds of alone, control and loaded windows (3)")
    ap.add_argument("--window", type=float, default=10.0, help="seconds per window (10)")
    ap.add_argument("--json", help="also write the figures here")
    a = ap.parse_args()
    conf = os.environ.get("CEPH_CONF")
    if not conf:
        sys.exit("share_restore.py: set CEPH_CONF to the cluster's ceph.conf")
    if not 1 <= a.restores <= 256 or not 1 <= a.pairs <= 50 or not 1 <= a.window <= 600:
        sys.exit("share_restore.py: --restores 1..256, --pairs 1..50, --window 1..600")
    files = sorted(f for f in os.listdir(a.checkpoints)
                   if f.startswith("step-") and f.endswith(".safetensors") and ".grads." not in f)
    if not files:
        sys.exit("share_restore.py: no step-N.safetensors in %s" % a.checkpoints)
    files = [os.path.join(a.checkpoints, f) for f in files[:a.steps]]
    tag = "%d" % os.getpid()
    job = "share-restore-" + tag
    base = [a.rckpt, "-c", conf, "-p", a.pool]
    subprocess.run(base + ["ckpt", "save", "--job", job] + files, check=True,
                   stdout=subprocess.DEVNULL)
    mb = sum(os.path.getsize(f) for f in files[-1:]) / 1e6
    tmp = tempfile.mkdtemp(prefix="share-restore-")
    by = Bystander(conf, a.pool, tag)
    by.start()
    stop = threading.Event()
    done = [0]
    warnings = {}
    rows = []

    recs = os.path.join(tmp, "records")
    subprocess.run([a.rckpt, "codec", "encode", "-o", recs] + files, check=True,
                   stdout=subprocess.DEVNULL)
    recs = [os.path.join(recs, f) for f in sorted(os.listdir(recs))]
    mode = ["cluster"]

    def restorer(k):
        out = os.path.join(tmp, "r%d.safetensors" % k)
        while not stop.is_set():
            cmd = (base + ["ckpt", "restore", "--job", job, "-o", out] if mode[0] == "cluster" else
                   [a.rckpt, "codec", "decode", "-o", out] + recs)
            r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:
                warnings.setdefault("restore failed", r.stderr.strip()[:200])
            else:
                done[0] += 1

    try:
        time.sleep(1.0)  # the bystander's first writes: connection set-up
        for p in range(a.pairs):
            by.open("alone-%d" % p)
            time.sleep(a.window)
            by.close()
            # the control: the same processes, decoding locally
            mode[0] = "local"
            stop.clear()
            ts = [threading.Thread(target=restorer, args=(k,)) for k in range(a.restores)]
            for t in ts:
                t.start()
            time.sleep(1.0)
            by.open("cpu-%d" % p)
            time.sleep(a.window)
            by.close()
            stop.set()
            for t in ts:
                t.join()
            mode[0] = "cluster"
            stop.clear()
            n0 = done[0]
            ts = [threading.Thread(target=restorer, args=(k,)) for k in range(a.restores)]
            for t in ts:
                t.start()
            time.sleep(1.0)  # every restorer started
            by.open("loaded-%d" % p)
            t_end = time.time() + a.window
            while time.time() < t_end:
                for k, v in health_checks(conf).items():
                    warnings.setdefault(k, v)
                time.sleep(max(0.0, min(1.0, t_end - time.time())))
            by.close()
            stop.set()
            for t in ts:
                t.join()
            al, lo, cpu = by.lat["alone-%d" % p], by.lat["loaded-%d" % p], by.lat["cpu-%d" % p]
            rows.append({"pair": p, "alone_n": len(al), "alone_p50_ms": 1e3 * pct(al, 0.5),
                         "alone_p99_ms": 1e3 * pct(al, 0.99), "loaded_n": len(lo),
                         "loaded_p50_ms": 1e3 * pct(lo, 0.5), "loaded_p99_ms": 1e3 * pct(lo, 0.99),
                         "cpu_p50_ms": 1e3 * pct(cpu, 0.5), "cpu_p99_ms": 1e3 * pct(cpu, 0.99),
                         "restores": done[0] - n0})
            r = rows[-1]
            print("round %d: bystander alone p50 %.2f ms p99 %.2f ms (%d writes); beside %d local "
                  "decodes p50 %.2f ms p99 %.2f ms; with %d restores p50 %.2f ms p99 %.2f ms (%d writes), "
                  "%d restores done" %
                  (p, r["alone_p50_ms"], r["alone_p99_ms"], r["alone_n"], a.restores, r["cpu_p50_ms"],
                   r["cpu_p99_ms"], a.restores, r["loaded_p50_ms"], r["loaded_p99_ms"], r["loaded_n"],
                   r["restores"]), flush=True)
    finally:
        stop.set()
        by.finish()
        subprocess.run(base + ["ckpt", "rm", "--job", job], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        shutil.rmtree(tmp, ignore_errors=True)
    ratios = [r["loaded_p99_ms"] / r["alone_p99_ms"] for r in rows]
    ratios50 = [r["loaded_p50_ms"] / r["alone_p50_ms"] for r in rows]
    cpu = [r["cpu_p99_ms"] / r["alone_p99_ms"] for r in rows]
    vs_cpu = [r["loaded_p99_ms"] / r["cpu_p99_ms"] for r in rows]
    rate = statistics.median(r["restores"] / a.window for r in rows)
    print("bystander p99 with %d concurrent restores / alone: %.2f [%.2f, %.2f] (p50: %.2f), "
          "median of %d pairs; %.1f restores/s of a %.1f MB checkpoint" %
          (a.restores, statistics.median(ratios), min(ratios), max(ratios), statistics.median(ratios50),
           len(rows), rate, mb))
    print("control: p99 beside %d local decodes / alone: %.2f [%.2f, %.2f]; restores / local decodes: "
          "%.2f [%.2f, %.2f]" % (a.restores, statistics.median(cpu), min(cpu), max(cpu),
                                 statistics.median(vs_cpu), min(vs_cpu), max(vs_cpu)))
    slow = {k: v for k, v in warnings.items() if "SLOW" in k}
    print("health while restoring: %s" % ("; ".join("%s: %s" % kv for kv in warnings.items())
                                          if warnings else "no warning"))
    print("SLOW_OPS: %s" % ("yes" if slow else "none"))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"pairs": rows, "p99_ratio": ratios, "p99_ratio_cpu": cpu, "warnings": warnings,
                       "restores": a.restores}, f, indent=1)
    return 1 if slow or "restore failed" in warnings else 0


if __name__ == "__main__":
    sys.exit(main())
