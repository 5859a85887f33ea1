"""testskip.py — the rule of tests/common/test_skip.h for the Python tests.

skip_test(need, why) says "skipped: why" and exits 77 (ctest: skipped), or
exits 1 when need is required here: RCKPT_REQUIRE_ALL=1 (CI) requires every
need; RCKPT_REQUIRE_CLUSTER=1 (./dev.sh test) the cluster. need: "cluster"
or "data" (a fixture, or a Debian package such as python3-torch).

A test that ctest would kill for its time says where it hangs first: with
RCKPT_TEST_WATCHDOG_S set (tests/CMakeLists.txt sets it short of each
Python test's TIMEOUT), importing this module arms a watchdog that then
prints the Python stacks of every thread of the test and of its forked
children (DataLoader workers), and ends the test.
"""
import os
import sys


def required(need):
    if os.environ.get("RCKPT_REQUIRE_ALL") == "1":
        return "RCKPT_REQUIRE_ALL=1"
    if need == "cluster" and os.environ.get("RCKPT_REQUIRE_CLUSTER") == "1":
        return "RCKPT_REQUIRE_CLUSTER=1"
    return None


def skip_test(need, why):
    print(f"skipped: {why}", flush=True)
    req = required(need)
    if req:
        print(f"failed: it cannot run, and {req} requires it to", flush=True)
        sys.exit(1)
    sys.exit(77)


def _descendants(pid):
    """Every process below pid, from /proc (children first found, then theirs)."""
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


def _arm_watchdog():
    try:
        s = float(os.environ.get("RCKPT_TEST_WATCHDOG_S") or 0)
    except ValueError:
        s = 0
    if s <= 0:
        return
    import faulthandler
    import signal
    import threading
    import time
    # forked children inherit the handler: SIGUSR2 makes each print its stacks
    faulthandler.register(signal.SIGUSR2, all_threads=True, chain=False)

    def children():
        print(f"watchdog: still running after {s:.0f} s; the stacks of its children, "
              "then its own, follow", file=sys.stderr, flush=True)
        kids = _descendants(os.getpid())
        for sig in (signal.SIGUSR2, signal.SIGKILL):  # then leave none behind
            for pid in kids:
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
            time.sleep(1)
    t = threading.Timer(s, children)
    t.daemon = True
    t.start()
    # its own stacks from faulthandler's thread, which needs no interpreter
    # lock: printed even when a thread holding it is stuck
    faulthandler.dump_traceback_later(s + 3, exit=True)


_arm_watchdog()
