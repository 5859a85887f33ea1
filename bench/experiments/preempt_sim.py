#!/usr/bin/python3
"""Preemptible-machine simulator: adaptive vs fixed checkpoint intervals.

A job of W training steps runs on machines preempted after exponential
lifetimes (mean MTTP). Each save costs delta seconds, each restart R. On a
preemption the run loses the steps since its last save (rework), unless the
notice's grace period fits an emergency save (step + delta + beta < grace),
which then saves everything. Policies: fixed intervals of N steps (the
thesis' 10, 51 and 100) and the adaptive one (librckpt's Daly interval,
rckpt.interval). Step, save and restart times default to those measured
for the example trainer at width 4096 (17 M parameters; bench/experiments/emergency_save.py:
a step 1.47 s, a save 0.47 s, a restart 3.1 s to the first step after the
restore, without the machine's own start-up); every policy sees the same
preemption times in a run.

    /usr/bin/python3 bench/experiments/preempt_sim.py                       # no grace: insurance only
    /usr/bin/python3 bench/experiments/preempt_sim.py --grace 30            # notices leave 30 s
"""
import argparse
import os
import random
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "client", "python"))
try:
    import rckpt  # noqa: E402
except ImportError as _missing:  # --help works without the library
    rckpt, _rckpt_missing = None, _missing


def simulate(policy, a, rng):
    """(total seconds, rework steps, checkpoint seconds) of one run."""
    t = ck_t = 0.0
    done = saved = rework = 0
    life_end = rng.expovariate(1 / a.mttp)
    emergency = a.grace > 0 and a.step + a.delta + a.beta < a.grace
    every = policy if policy else max(1, round(rckpt.interval(a.delta, a.mttp, a.restart) / a.step))
    while done < a.steps:
        if t + a.step > life_end:  # preempted during this step
            t = life_end
            if emergency:
                t += a.delta
                ck_t += a.delta
                saved = done
            rework += done - saved
            done = saved
            t += a.restart
            life_end = t + rng.expovariate(1 / a.mttp)
            continue
        t += a.step
        done += 1
        if done % every == 0 and done < a.steps:
            if t + a.delta > life_end:  # preempted while saving: the save is lost
                t = life_end
                rework += done - saved
                done = saved
                t += a.restart
                life_end = t + rng.expovariate(1 / a.mttp)
                continue
            t += a.delta
            ck_t += a.delta
            saved = done
    return t, rework, ck_t


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=20000, help="W: training steps of the job")
    p.add_argument("--step", type=float, default=1.47, help="seconds per step")
    p.add_argument("--delta", type=float, default=0.47, help="seconds per save")
    p.add_argument("--restart", type=float, default=3.1, help="R: seconds per restart")
    p.add_argument("--mttp", type=float, default=1800.0, help="mean time to preemption, seconds")
    p.add_argument("--grace", type=float, default=0.0, help="notice grace, seconds (0: no notice)")
    p.add_argument("--beta", type=float, default=1.0)
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    if rckpt is None:
        sys.exit(str(_rckpt_missing))
    pols = [10, 51, 100, 0]
    res = {q: [] for q in pols}
    for r in range(a.runs):
        for q in pols:
            res[q].append(simulate(q, a, random.Random(a.seed * 7919 + r)))
    adaptive = max(1, round(rckpt.interval(a.delta, a.mttp, a.restart) / a.step))
    print("W=%d steps of %.2f s, save %.2f s, restart %.0f s, MTTP %.0f s, grace %.0f s, %d runs"
          % (a.steps, a.step, a.delta, a.restart, a.mttp, a.grace, a.runs))
    print("| policy | interval (steps) | total time (h) | rework (steps) | checkpoint time (min) | time vs adaptive |")
    print("|---|---:|---:|---:|---:|---:|")
    base = statistics.mean(x[0] for x in res[0])
    for q in pols:
        tt = [x[0] for x in res[q]]
        rw = [x[1] for x in res[q]]
        ck = [x[2] for x in res[q]]
        print("| %s | %d | %.2f ± %.2f | %.0f ± %.0f | %.1f | %.3f |" % (
            "adaptive" if q == 0 else "fixed", q or adaptive, statistics.mean(tt) / 3600,
            statistics.stdev(tt) / 3600, statistics.mean(rw), statistics.stdev(rw),
            statistics.mean(ck) / 60, statistics.mean(tt) / base))
    print("command: %s" % " ".join(sys.argv))


if __name__ == "__main__":
    main()
