#!/usr/bin/python3
"""A trainer on a preemptible machine: the digits MLP with rckpt.Policy.

It restores the job's latest step if there is one, trains, saves when the
policy says so, and on a notice (SIGTERM, or --notice-file appearing) makes
an emergency save when it fits the grace period and exits. Each line it
prints is "step N", "saved N KIND SECONDS" or "notice-to-commit N SECONDS".

    /usr/bin/python3 client/python/examples/preemptible.py --job demo --steps 500
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import digits  # noqa: E402
import rckpt  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--job", required=True)
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--grace", type=float, default=30.0, help="seconds the platform gives after a notice")
    p.add_argument("--notice-file")
    p.add_argument("--step-sleep", type=float, default=0.0, help="extra seconds per step (a slower model)")
    p.add_argument("--width", type=int, default=256)
    a = p.parse_args()
    torch.set_num_threads(1)
    t_start = time.time()
    t = digits.Trainer(0, a.steps, width=a.width, momentum=0.9)
    with rckpt.Checkpointer(job=a.job, compute="cpu") as ck, \
            rckpt.Policy(ck, grace_s=a.grace, notice_file=a.notice_file, poll_s=0.05) as pol:
        start = 0
        if ck.steps():
            r = ck.restore_into(t.model, optimizer=t.opt)
            start = r.step
            t.step = start
            pol.restarted(time.time() - t_start)
            print("resumed %d" % start, flush=True)
        for step in range(start + 1, a.steps + 1):
            with pol.step(step):
                t.train_step()
                if a.step_sleep:
                    time.sleep(a.step_sleep)
            print("step %d" % step, flush=True)
            d = pol.should_save(step)
            if d:
                r = pol.save(step, t.model.state_dict(), optimizer=t.opt)
                print("saved %d %s %.3f" % (step, d, r.t_encode + r.t_write), flush=True)
                if d == "emergency" and pol.notice_time is not None:
                    print("notice-to-commit %d %.3f" % (step, time.time() - pol.notice_time), flush=True)
            if pol.stopping:
                return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
