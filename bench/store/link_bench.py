#!/usr/bin/python3
"""Saves and restores behind a shaped link: where compression pays.

A one-OSD cluster of its own runs in a network namespace; this process's
namespace reaches it through a veth pair with link-local addresses
(169.254.0.0/16: they never leave the machine), and `tc` shapes both ends
of the pair (a token bucket at RATE each way: writes leave by this end,
reads by the cluster's). At each rate, `bench_store --save-only` saves the
checkpoints through rckpt and writes the same fp32 bytes raw through the
same layout, then restores the last step and reads it raw: a pair per run,
runs interleaved. A `rados bench` write and read of 4 MiB objects says what
the link carries. Everything it set up (the cluster, its folder, the
namespace, the pair) is removed at the end, on an error and on SIGINT,
SIGTERM or SIGHUP.

Needs root (network namespaces, tc), iproute2 and the Ceph daemons.

    link_bench.py --rates 1g,10g [--checkpoints DIR] [--resume SIZES] [--reps N]
                  [--steps N] [--bin BUILD/bench] [--plugins BUILD/rados-classes]

With --resume 50, also a trainer's resume at each rate: resume_bench.py
(load_latest of a 50 M-parameter AdamW state, a base and one delta,
against a raw read of its fp32 bytes from the same pool, in pairs).

rckpt_bench.py's link suite (`rckpt bench --link 1g,10g`) runs the same.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
CLUSTER = os.path.join(here, "..", "..", "ceph-conf", "local-cluster.sh")


class LinkError(Exception):
    pass


def parse_rates(text):
    """'1g,10g,500m' -> [(label, bits per second), ...]; LinkError on a bad one."""
    out = []
    for t in text.split(","):
        m = re.fullmatch(r"(\d+(?:\.\d+)?)([mg])", t.strip().lower())
        if not m:
            raise LinkError("rate '%s': a number of Mbit/s or Gbit/s, as 500m or 10g" % t)
        bps = float(m.group(1)) * (1e6 if m.group(2) == "m" else 1e9)
        if not 1e6 <= bps <= 100e9:
            raise LinkError("rate '%s': between 1m and 100g" % t)
        out.append((t.strip().lower(), int(bps)))
    if not out:
        raise LinkError("no rate given")
    return out


def run(cmd, ns=None, check=True, timeout=300, **kw):
    if ns:
        cmd = ["ip", "netns", "exec", ns] + cmd
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise LinkError("%s: exit %d: %s" % (" ".join(cmd[:6]), p.returncode,
                                             (p.stdout.strip().splitlines() or [""])[-1][:200]))
    return p.stdout


def can_run():
    """None when this machine can build the link, else why not."""
    if os.geteuid() != 0:
        return "needs root (network namespaces and tc)"
    for tool in ("ip", "tc", "ceph-mon", "ceph-osd", "rados"):
        if not shutil.which(tool):
            return "`%s` is not installed" % tool
    return None


def names_for(pid, used):
    """The namespace, the pair's two ends and their addresses for process
    pid: a /30 of 169.254.1.0-169.254.254.255 (link-local: never routed off
    the machine) whose third octet no address in `used` (`ip -4 -o addr
    show`) has, starting from one the pid picks; the client's end first.
    LinkError when every one is taken."""
    nets = 254 * 62  # /30s from .4 to .248 in each of 169.254.1 .. 169.254.254
    for k in range(pid % nets, pid % nets + nets):
        k %= nets
        c, d = 1 + k // 62, 4 * (k % 62) + 4
        if " 169.254.%d." % c not in used:
            return ("rckpt-link-%d" % pid, "rkl%da" % pid, "rkl%db" % pid,
                    "169.254.%d.%d" % (c, d + 1), "169.254.%d.%d" % (c, d + 2))
    raise LinkError("no free /30 in 169.254.0.0/16 for the link")


class ShapedLink:
    """The namespace, the veth pair and the cluster; a context manager that
    removes all three however it is left."""

    def __init__(self, plugins, say=print):
        self.say = say
        self.plugins = plugins
        self.ns, self.dev, self.peer, self.client, self.server = names_for(
            os.getpid(), run(["ip", "-4", "-o", "addr", "show"]))
        self.dir = None
        self.conf = None
        self.made = []
        self.old = {}

    def __enter__(self):
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            self.old[s] = signal.signal(s, self._signalled)
        try:
            self._up()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _signalled(self, sig, frame):
        raise LinkError("stopped by %s" % signal.Signals(sig).name)

    def _up(self):
        try:
            run(["ip", "netns", "add", self.ns])
        except LinkError as e:  # a container without CAP_SYS_ADMIN, say
            raise LinkError("skipped: cannot create a network namespace (%s)" % e)
        self.made.append("ns")
        run(["ip", "link", "add", self.dev, "type", "veth", "peer", "name", self.peer])
        self.made.append("veth")
        run(["ip", "link", "set", self.peer, "netns", self.ns])
        run(["ip", "addr", "add", self.client + "/30", "dev", self.dev])
        run(["ip", "link", "set", self.dev, "up"])
        run(["ip", "addr", "add", self.server + "/30", "dev", self.peer], ns=self.ns)
        run(["ip", "link", "set", self.peer, "up"], ns=self.ns)
        run(["ip", "link", "set", "lo", "up"], ns=self.ns)
        self.dir = tempfile.mkdtemp(prefix="rckpt-link-")
        self.made.append("dir")
        self.say("a cluster at %s in namespace %s, reached through %s (%s)" % (self.server, self.ns,
                                                                               self.dev, self.client))
        self.made.append("cluster")
        run([CLUSTER, "--dir", self.dir, "--addr", self.server, "--plugins", self.plugins,
             "--osd-bytes", str(2 << 30), "start"], ns=self.ns, timeout=600)
        self.conf = os.path.join(self.dir, "ceph.conf")

    def shape(self, bps):
        """A token bucket of bps on both ends: 2 ms of burst (at least 64
        KiB, more than a segment the pair hands over at once), 20 ms of
        queue."""
        burst = max(65536, bps // 8 // 500)
        for dev, ns in ((self.dev, None), (self.peer, self.ns)):
            run(["tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", str(bps), "burst", str(burst),
                 "latency", "20ms"], ns=ns)

    def __exit__(self, *exc):
        errs = []
        for what in reversed(self.made):
            try:
                if what == "cluster":
                    run([CLUSTER, "--dir", self.dir, "stop"], ns=self.ns, timeout=120)
                elif what == "dir":
                    shutil.rmtree(self.dir, ignore_errors=True)
                elif what == "veth":
                    run(["ip", "link", "del", self.dev], check=False)
                elif what == "ns":
                    run(["ip", "netns", "del", self.ns])
            except (LinkError, OSError, subprocess.TimeoutExpired) as e:
                errs.append("%s: %s" % (what, e))
        self.made = []
        for s, h in self.old.items():
            signal.signal(s, h)
        self.old = {}
        if errs:
            self.say("link: left behind: " + "; ".join(errs))
        return False


def parse_store(out):
    """bench_store --save-only's figures: save and raw-path seconds."""
    for line in out.splitlines():
        f = line.split(",")
        if f[0] == "csv:rawpath":
            return dict(save_s=float(f[1]), raw_save_s=float(f[2]), restore_s=float(f[3]),
                        raw_read_s=float(f[4]))
    raise LinkError("bench_store printed no csv:rawpath line")


def parse_rados(out):
    m = re.search(r"Bandwidth \(MB/sec\):\s+([\d.]+)", out)
    if not m:
        raise LinkError("rados bench printed no bandwidth")
    return float(m.group(1))


def resume_rows(link, label, tool, sizes, rounds, pool):
    """resume_bench.py behind the link: load_latest of an AdamW state
    saved as a base and one delta (sizes: M parameters) against a raw read
    of its fp32 bytes from the same pool, --rounds pairs; its JSON rows."""
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        js = os.path.join(tmp, "resume.json")
        tool("link-%s-resume" % label, ["env", "CEPH_CONF=" + link.conf, sys.executable,
                                        os.path.join(here, "resume_bench.py"), "--pool", pool, "--sizes", sizes,
                                        "--chains", "1", "--rounds", str(rounds), "--json", js])
        with open(js) as f:
            return json.load(f)["rows"]


def measure(link, rates, tool, bench_store, checkpoints, reps, steps, pool="rckpt", resume=None):
    """At each rate: a rados bench write and read, then reps pairs of
    bench_store --save-only (without checkpoints, none) and, with resume
    (model sizes, M parameters), resume_bench.py's rows. tool(name, cmd)
    runs a command and returns its output. Returns {label: {"bps",
    "rados_write", "rados_read", "pairs": [...], "resume": [...]}}."""
    res = {}
    for label, bps in rates:
        link.shape(bps)
        run_name = "rckpt-link-%d" % os.getpid()
        base = ["rados", "-c", link.conf, "-p", pool]
        w = parse_rados(tool("link-%s-rados-write" % label, base + [
            "bench", "2", "write", "-b", str(4 << 20), "-t", "16", "--max-objects", "64", "--no-cleanup",
            "--run-name", run_name]))
        r = parse_rados(tool("link-%s-rados-seq" % label, base + [
            "bench", "2", "seq", "-t", "16", "--run-name", run_name]))
        tool("link-%s-rados-cleanup" % label, base + ["cleanup", "--run-name", run_name])
        pairs = []
        for k in range(reps if checkpoints else 0):
            pairs.append(parse_store(tool("link-%s-store-%d" % (label, k), [
                bench_store, "--conf", link.conf, "--pool", pool, "--save-only", "--no-rados-bench",
                "--chains", "1", "--steps", str(steps), "--reps", "1", checkpoints])))
        rows = resume_rows(link, label, tool, resume, reps, pool) if resume else []
        res[label] = dict(bps=bps, rados_write=w, rados_read=r, pairs=pairs, resume=rows)
    return res


def ratios(r):
    """Per pair: save ÷ raw write and restore ÷ raw read (speed, > 1: rckpt faster)."""
    return ([p["raw_save_s"] / p["save_s"] for p in r["pairs"]],
            [p["raw_read_s"] / p["restore_s"] for p in r["pairs"]])


def record(res, metric, metric_pairs):
    """rckpt_bench.py's figures of the link suite."""
    for label, r in res.items():
        s, t = ratios(r)
        metric("link", "rados write at %s, 4 MiB objects" % label, "MB/s", r["rados_write"], "higher")
        metric("link", "rados read at %s, 4 MiB objects" % label, "MB/s", r["rados_read"], "higher")
        if r["pairs"]:
            metric_pairs("link", "save / raw write through the same layout, at %s" % label, s, "higher")
            metric_pairs("link", "restore of the last step / raw read, at %s" % label, t, "higher")
        for row in r.get("resume", []):
            metric_pairs("link", "load_latest / raw read of its fp32 bytes, %gM %s, at %s"
                         % (row["size_m"], row["dtype"], label), row["A/B"], "lower")


def main():
    ap = argparse.ArgumentParser(prog="link_bench.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="1g,10g")
    ap.add_argument("--checkpoints", help="a folder of step-N.safetensors (the save and restore pairs)")
    ap.add_argument("--resume", metavar="SIZES",
                    help="also load_latest of AdamW states of these sizes (M parameters, as 50 or 1,50) "
                         "against a raw read: resume_bench.py behind the link")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--steps", type=int, default=8, help="checkpoints a run saves (at least 2)")
    ap.add_argument("--bin", default=os.path.join(here, "..", "..", "build", "bench"))
    ap.add_argument("--plugins", default=os.environ.get("RCKPT_PLUGIN_DIR",
                                                        os.path.join(here, "..", "..", "build", "rados-classes")))
    a = ap.parse_args()
    try:
        rates = parse_rates(a.rates)
    except LinkError as e:
        ap.error(str(e))
    if a.reps < 1 or a.steps < 2:
        ap.error("--reps must be >= 1 and --steps >= 2")
    if not a.checkpoints and not a.resume:
        ap.error("nothing to measure: give --checkpoints, --resume or both")
    if a.resume:
        try:
            if min(float(x) for x in a.resume.split(",")) <= 0:
                raise ValueError
        except ValueError:
            ap.error("--resume: model sizes in M parameters, as 50 or 1,50")
    why = can_run()
    if why:
        print("link_bench.py: cannot run: " + why, file=sys.stderr)
        return 77
    bench_store = os.path.join(os.path.abspath(a.bin), "bench_store")

    def tool(name, cmd):
        print("link_bench.py: " + name, flush=True)
        out = run(cmd, timeout=1800)
        for line in out.splitlines():  # bench_store's rates, as it words them
            if "MB/s" in line and not line.startswith("csv:"):
                print("    " + line.strip())
        return out
    try:
        with ShapedLink(os.path.abspath(a.plugins)) as link:
            res = measure(link, rates, tool, bench_store, a.checkpoints and os.path.abspath(a.checkpoints),
                          a.reps, a.steps, resume=a.resume)
    except (LinkError, subprocess.TimeoutExpired) as e:
        print("link_bench.py: %s%s" % ("" if str(e).startswith("skipped") else "error: ", e), file=sys.stderr)
        return 77 if str(e).startswith("skipped") else 1
    def f(v):
        return "%.3f [%.3f, %.3f]" % (sorted(v)[len(v) // 2], min(v), max(v)) if v else "-"
    print("| link | rados write MB/s | rados read MB/s | save ÷ raw write | restore ÷ raw read |")
    print("|---|---:|---:|---:|---:|")
    for label, r in res.items():
        s, t = ratios(r)
        print("| %s | %.0f | %.0f | %s | %s |" % (label, r["rados_write"], r["rados_read"], f(s), f(t)))
    if a.resume:
        print("\n| link | model | load_latest ms | raw read ms | load_latest ÷ raw read |")
        print("|---|---|---:|---:|---:|")
        for label, r in res.items():
            for row in r["resume"]:
                print("| %s | %gM %s | %.0f | %.0f | %s |" % (
                    label, row["size_m"], row["dtype"], sorted(row["ms"]["A"])[len(row["ms"]["A"]) // 2],
                    sorted(row["ms"]["B"])[len(row["ms"]["B"]) // 2], f(row["A/B"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
