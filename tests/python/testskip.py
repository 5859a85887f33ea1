"""testskip.py — the rule of tests/common/test_skip.h for the Python tests.

skip_test(need, why) says "skipped: why" and exits 77 (ctest: skipped), or
exits 1 when need is required here: RCKPT_REQUIRE_ALL=1 (CI) requires every
need; RCKPT_REQUIRE_CLUSTER=1 (./dev.sh test) the cluster. need: "cluster"
or "data" (a fixture, or a Debian package such as python3-torch).
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
