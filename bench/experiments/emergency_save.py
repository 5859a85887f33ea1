#!/usr/bin/python3
"""The emergency-save path, measured: notice-to-commit time of the example
trainer (client/python/examples/preemptible.py, the digits MLP 64-W-W-10
with SGD momentum) for several widths, and the largest model that fits a
grace period, from the measured throughput.

For each width, a fresh job: the trainer starts, makes its first save (a
base) at step 1, trains; after --notice-after steps it gets SIGTERM; the
policy makes an emergency save (a delta on the base) and the trainer exits.
Measured per width: the base save, the emergency save (encode + write), and
notice-to-commit (from the signal's arrival to the commit, as the trainer
sees it, so it includes the step in progress). Throughput is the state's
bytes (fp32 parameters plus the momentum, kept losslessly) over the
emergency save's time; the largest model for a grace G is then
(G - beta - step time) x that throughput, stated in parameters (with its
momentum) of this trainer's kind. The restart time is a new process's
wall time to its first step after restoring the emergency save (Python
and torch start-up included), less one step.

The trainer keeps its momentum losslessly in the step's attachment,
which holds at most 64 MiB compressed: widths past about 4096 (17 M
parameters) fail with EFBIG there.

    export CEPH_CONF=$PWD/build/cluster/ceph.conf
    /usr/bin/python3 bench/experiments/emergency_save.py                 # widths 512..4096
    /usr/bin/python3 bench/experiments/emergency_save.py --widths 512 --grace 30
"""
import argparse
import os
import signal
import subprocess
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
example = os.path.join(here, "..", "..", "client", "python", "examples", "preemptible.py")


def params_of(width):
    return 64 * width + width + width * width + width + width * 10 + 10


def run_one(job, width, grace, notice_after, timeout):
    cmd = [sys.executable, example, "--job", job, "--steps", "1000000", "--grace", str(grace),
           "--width", str(width)]
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    lines, t_steps = [], []
    t0 = None
    for line in child.stdout:
        lines.append(line.strip())
        if line.startswith("step "):
            n = int(line.split()[1])
            if n == 2:
                t0 = time.time()
            if n == notice_after:
                t_steps.append(time.time() - t0)
                break
    child.send_signal(signal.SIGTERM)
    try:
        out, _ = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        out, _ = child.communicate()
    lines += out.split("\n")
    res = {"width": width, "params": params_of(width)}
    for ln in lines:
        f = ln.split()
        if ln.startswith("saved "):
            key = "base_s" if int(f[1]) == 1 else "emergency_s"
            res[key] = float(f[3])
            if int(f[1]) != 1:
                res["kind"] = f[2]
                res["saved_step"] = int(f[1])
        elif ln.startswith("notice-to-commit"):
            res["n2c_s"] = float(f[2])
    res["step_s"] = t_steps[0] / max(1, notice_after - 2) if t_steps else float("nan")
    # the restart: a new process restores the emergency save and takes a step
    if "n2c_s" in res:
        s = res["saved_step"]
        t0 = time.time()
        out = subprocess.run(cmd[:4] + ["--steps", str(s + 1)] + cmd[6:], stdout=subprocess.PIPE,
                             text=True, timeout=600).stdout.split("\n")
        if len(out) > 1 and out[0] == "resumed %d" % s:
            res["restart_s"] = time.time() - t0 - res["step_s"]
    return res, lines


def cleanup(job):
    sys.path.insert(0, os.path.join(here, "..", "..", "client", "python"))
    import rckpt
    rckpt.Checkpointer.delete(job=job)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--widths", default="512,1024,2048,4096")
    ap.add_argument("--grace", type=float, default=30.0)
    ap.add_argument("--beta", type=float, default=1.0, help="the policy's margin (seconds)")
    ap.add_argument("--notice-after", type=int, default=20, help="steps before the notice")
    a = ap.parse_args()
    if not os.environ.get("CEPH_CONF"):
        sys.exit("emergency_save.py: set CEPH_CONF (export CEPH_CONF=$PWD/build/cluster/ceph.conf)")
    rows = []
    for w in [int(x) for x in a.widths.split(",")]:
        job = "bench-emerg-%d-%d" % (w, os.getpid())
        print("width %d (%d parameters): running ..." % (w, params_of(w)), file=sys.stderr, flush=True)
        r, lines = run_one(job, w, a.grace, a.notice_after, a.grace + 5)
        if "n2c_s" not in r:
            sys.exit("emergency_save.py: width %d: no emergency save; the trainer said:\n%s"
                     % (w, "\n".join(lines[-8:])))
        cleanup(job)
        rows.append(r)
    print("| width | parameters | state MB | step s | base save s | emergency save s | notice-to-commit s |"
          " restart s | MB/s | largest model for %g s grace |" % a.grace)
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        mb = r["params"] * 8 / 1e6  # fp32 parameters + fp32 momentum
        thr = mb / r["emergency_s"]
        budget = a.grace - a.beta - r["step_s"]
        fit = budget * thr * 1e6 / 8
        print("| %d | %d | %.1f | %.3f | %.3f | %.3f | %.3f | %.2f | %.0f | %.2g parameters (%.1f GB of state) |"
              % (r["width"], r["params"], mb, r["step_s"], r.get("base_s", float("nan")), r["emergency_s"],
                 r["n2c_s"], r.get("restart_s", float("nan")), thr, fit, fit * 8 / 1e9))
    return 0


if __name__ == "__main__":
    sys.exit(main())
