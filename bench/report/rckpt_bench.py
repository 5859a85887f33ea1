#!/usr/bin/python3
"""rckpt's benchmark suites against one Ceph cluster, and a report.

Run through `rckpt bench` (which checks the cluster's plugins first and
passes the paths of this build's tools), or directly:

    rckpt_bench.py run --quick|--full|--tiny --out DIR [--conf C] [--pool P] [--seed S]
                   [--suites a,b,...] [--data DIR] [--checkpoints DIR] [--images DIR]
                   [--lm DIR] [--link RATES [--plugins DIR]] --bin BUILD/bench --rckpt RCKPT
    rckpt_bench.py compare A B

--tiny runs every step of every suite on the least data that does (1 run of
each timed tool, 64 JPEGs, 2 learners, ...): what the tests run, so that a
suite that breaks fails them; its figures mean little. --lm uses a
transformer run of make_transformer.py for the frontier suite instead of
training one. `rckpt bench` passes --quick or --full.

Suites (each a tool of bench/, run here and parsed; see the report):
  baseline     rados bench write and sequential read, the store's object sizes
  save         checkpoint save throughput and peak memory (bench_store), the
               cost of an object-class call (bench_store), trainer stall per
               save (save_stall.py)
  compression  ratio per checkpoint along a training run, per method:
               rckpt, its ablations, baselines (bench_codec)
  frontier     ratio over a transformer run against the restored steps' real
               held-out loss, per method and threshold (frontier.py)
  restore      restore latency vs chain length: server-side, after
               compaction, client-side materialization (bench_store)
  resume       a trainer's load_latest of MLP + AdamW models beside a raw
               RADOS read of their fp32 bytes and torch.load, in pairs, after
               1..N saves, and where its time went (resume_bench.py)
  pcr          PCR bytes and images/s per scan group against one object per
               JPEG (bench_pcr)
  loader       bytes from the cluster per epoch, locality-aware vs regular
               loader (loader_bytes.py; bench_locality's simulation)
  group        group saves (distributed training) by 1, 2 and 4 ranks, and a
               4-rank step restored by 2 (group_bench.py)
  gpu          GPU quantization stages (bench_gpu), when this machine has a
               CUDA device
  link         (with --link RATES, or named in --suites) save and restore
               against raw writes and reads through the same layout, and
               load_latest of a 50 M-parameter AdamW state against a raw
               read, behind a link shaped to each rate: a cluster of its own
               in a network namespace, a veth pair, tc (link_bench.py; needs
               root)

Timed measurements are repeated (--quick: 3 runs, --full: 5) and reported as
median [min, max]; sizes and ratios of bytes are the same in every run and are
measured once. A ratio of two timed cases is measured in interleaved pairs (A
B A B ..., after an untimed warm-up): the save runs each right after a `rados
bench` write, PCR's reads and decodes each between two baseline runs; it is
reported as the median [min, max] of the per-pair ratios, and marked when that
spread is too wide to conclude anything. DIR gets report.md, results.json,
results.csv, the plots (*.png, bench_plots.py) and raw/ (every tool's output).
On a terminal a live line per suite shows suite i of N, its elapsed seconds
and the last line its tool printed (bench_progress.py); not with --json or
when stdout is not a terminal. Real data only: checkpoints of a model trained
here (make_checkpoints.py) and JPEGs cut from Debian's sample photos
(make_pcr_images.py), made once and kept in --data.
"""
import argparse
import csv
import datetime
import json
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time

from bench_progress import Progress
from bench_profiles import PROFILES
from bench_report import codec_speed_metrics, compare, report, summ, summary_table

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "store"))  # link_bench, for the link suite
SUITES = ["baseline", "save", "compression", "frontier", "restore", "resume", "pcr", "loader", "group", "gpu"]
OPT_SUITES = ["link"]  # run when named (or given --link), not by default


class SuiteError(Exception):
    pass


JSON_OUT = False  # --json: progress on stderr, the results (results.json) on stdout
PROGRESS = Progress(sys.stdout, False)  # the live line, on a terminal only (main())


def say(msg):
    PROGRESS.message(lambda: print("rckpt bench: " + msg, flush=True, file=sys.stderr if JSON_OUT else sys.stdout))


class Bench:
    def __init__(self, a):
        self.a = a
        self.p = PROFILES[a.profile]
        self.out = os.path.abspath(a.out)
        self.raw = os.path.join(self.out, "raw")
        self.metrics = []        # {suite, name, unit, better, median, min, max, n}
        self.data = {}           # per suite: what the plots and tables need
        self.status = {}         # suite -> "ok" | "skipped: why" | "failed: why"
        self.env = dict(os.environ)
        if a.conf:
            self.env["CEPH_CONF"] = os.path.abspath(a.conf)
        self.env.setdefault("RCKPT_LIBRARY", os.path.join(os.path.dirname(a.rckpt), "librckpt.so"))
        self.env["PYTHONPATH"] = os.path.join(here, "..", "..", "client", "python") + (
            ":" + self.env["PYTHONPATH"] if self.env.get("PYTHONPATH") else "")
        self.env["PYTHONUNBUFFERED"] = "1"  # the Python tools' steps reach the progress line as they go
        self.py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

    # -- helpers --
    def metric(self, suite, name, unit, values, better=None):
        s = summ(values if isinstance(values, list) else [values])
        if s:
            self.metrics.append(dict(suite=suite, name=name, unit=unit, better=better, **s))
        return s

    def metric_pairs(self, suite, name, ratios, better=None):
        """A ratio measured in interleaved pairs (A B A B ...): the median of
        the per-pair ratios, with their min and max; marked so that the
        report can say when the spread is too wide to conclude."""
        s = self.metric(suite, name, "ratio", list(ratios), better)
        if s:
            self.metrics[-1]["pairs"] = True
        return s

    def tool(self, name, cmd, timeout=1800):
        """Runs cmd, keeps its output in raw/NAME.txt, returns stdout (and
        stderr). Each line it prints is shown on the progress line."""
        t0 = time.time()
        # Ceph's own tools never get a sanitizer runtime meant for ours
        env = self.ceph_env() if os.path.basename(cmd[0]) in ("rados", "ceph") else self.env
        PROGRESS.note(name)
        lines, timed_out = [], []
        try:
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 errors="replace", env=env)
        except OSError as e:
            raise SuiteError("%s: %s" % (os.path.basename(cmd[0]), e))
        timer = threading.Timer(timeout, lambda: (timed_out.append(1), p.kill()))
        timer.start()
        try:
            for line in p.stdout:
                lines.append(line)
                PROGRESS.note(name, line.rsplit("\r", 1)[-1])
            rc = p.wait()
        finally:
            timer.cancel()
            p.stdout.close()
        out = "".join(lines)
        with open(os.path.join(self.raw, name + ".txt"), "w") as f:
            f.write("$ " + " ".join(shlex.quote(c) for c in cmd) + "\n")
            f.write("# %.1f s, exit %d\n" % (time.time() - t0, rc))
            f.write(out)
        if timed_out:
            raise SuiteError("%s: timed out after %d seconds (raw/%s.txt)" % (os.path.basename(cmd[0]), timeout, name))
        if rc != 0:
            tail = out.strip().splitlines()[-1:] or [""]
            how = ("died of signal %s" % signal.Signals(-rc).name if rc < 0 else "exited %d" % rc)
            raise SuiteError("%s %s (%s; raw/%s.txt)" % (os.path.basename(cmd[0]), how, tail[0][:160], name))
        return out

    def ceph_env(self):
        return {k: v for k, v in self.env.items() if k != "LD_PRELOAD"}

    def bin(self, name):
        b = os.path.join(self.a.bin, name)
        if not os.access(b, os.X_OK):
            raise SuiteError("%s is not built (looked in %s)" % (name, self.a.bin))
        return b

    def checkpoints(self):
        if self.a.checkpoints:
            return self.a.checkpoints
        p = self.p
        d = os.path.join(self.a.data, "ckpt-w%d-s%d-seed%d" % (p["ckpt_width"], p["ckpt_steps"], self.a.seed))
        if len([f for f in os.listdir(d) if not f.endswith(".grads.safetensors")] if os.path.isdir(d) else []) < 2:
            say("training a %d-wide model for %d steps for its checkpoints (once; kept in %s)"
                % (p["ckpt_width"], p["ckpt_steps"], d))
            self.tool("make_checkpoints", [self.py, os.path.join(here, "..", "data", "make_checkpoints.py"), d,
                                           "--width", str(p["ckpt_width"]), "--steps", str(p["ckpt_steps"]),
                                           "--seed", str(self.a.seed)])
        return d

    def images(self):
        if self.a.images:
            return self.a.images
        n = self.p["images"]
        d = os.path.join(self.a.data, "jpeg-%d-seed%d" % (n, self.a.seed))
        if not os.path.exists(os.path.join(d, "labels.csv")):
            say("cutting %d JPEGs out of Debian's sample photos (once; kept in %s)" % (n, d))
            self.tool("make_pcr_images", [self.py, os.path.join(here, "..", "data", "make_pcr_images.py"), d,
                                          "--count", str(n), "--seed", str(self.a.seed)])
        return d

    # -- suites --
    def suite_baseline(self):
        rados = shutil.which("rados")
        if not rados:
            raise SuiteError("skipped: the `rados` tool (ceph-common) is not installed")
        conf = ["-c", self.env["CEPH_CONF"]] if self.env.get("CEPH_CONF") else []
        # Bound what a run writes: a quarter of the cluster's free space at
        # most, never enough to fill an OSD (a full OSD blocks every client).
        budget = self.p["rb_budget"]
        try:
            o = subprocess.run(["ceph"] + conf + ["--connect-timeout", "20", "df", "-f", "json"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=30,
                               env=self.ceph_env()).stdout
            budget = min(budget, json.loads(o)["stats"]["total_avail_bytes"] // 4)
        except (OSError, subprocess.TimeoutExpired, ValueError, KeyError, TypeError):
            pass
        self.rb_budget = budget
        rows = []
        for size in self.p["rb_sizes"]:
            w, r = [], []
            for k in range(self.p["reps"]):
                x, y = self.rados_bench(size, "%d-%d" % (size, k))
                w.append(x)
                r.append(y)
            label = "%d KiB" % (size >> 10)
            sw = self.metric("baseline", "rados write, %s objects" % label, "MB/s", w, "higher")
            sr = self.metric("baseline", "rados read, %s objects" % label, "MB/s", r, "higher")
            rows.append((label, sw, sr))
        self.data["baseline"] = {"rows": rows}

    def rados_bench(self, size, tag, read=True):
        """One `rados bench` write then (read) sequential read of size-byte
        objects (16 in flight): their MB/s (the read's None without it)."""
        rados = shutil.which("rados")
        if not rados:
            raise SuiteError("skipped: the `rados` tool (ceph-common) is not installed")
        conf = ["-c", self.env["CEPH_CONF"]] if self.env.get("CEPH_CONF") else []
        budget = getattr(self, "rb_budget", self.p["rb_budget"])
        run = "rckpt-bench-%d-%d" % (os.getpid(), size)
        base = [rados] + conf + ["-p", self.a.pool]
        o = self.tool("rados-bench-write-" + tag,
                      base + ["bench", str(self.p["rb_seconds"]), "write", "-b", str(size), "-t", "16",
                              "--max-objects", str(max(16, budget // size)), "--no-cleanup", "--run-name", run])
        w = float(re.search(r"Bandwidth \(MB/sec\):\s+([\d.]+)", o).group(1))
        r = None
        if read:
            o = self.tool("rados-bench-seq-" + tag,
                          base + ["bench", str(self.p["rb_seconds"]), "seq", "-t", "16", "--run-name", run])
            r = float(re.search(r"Bandwidth \(MB/sec\):\s+([\d.]+)", o).group(1))
        self.tool("rados-cleanup-%d" % size, base + ["cleanup", "--run-name", run])
        return w, r

    def run_store(self):
        """bench_store, reps times: the save and restore suites share it."""
        if "store" in self.data:
            return self.data["store"]
        ck = self.checkpoints()
        runs = []
        # one untimed save run first (the OSD's threads, the pool's PGs)
        self.tool("bench_store-warmup", [self.bin("bench_store"), "--pool", self.a.pool, "--reps", "1",
                                         "--no-rados-bench", "--mem-sizes", "0", "--chains", "1", ck])
        for k in range(self.p["reps"]):
            # its baseline right before it: a pair (rados write, save)
            try:
                rb = self.rados_bench(65536, "pair-%d" % k, read=False)
            except SuiteError:
                rb = None
            o = self.tool("bench_store-%d" % k,
                          [self.bin("bench_store"), "--pool", self.a.pool, "--reps", "1", "--no-rados-bench",
                           "--mem-sizes", "0", "--chains", self.p["chains"], ck])
            r = {"chain": {}, "rados_write": rb[0] if rb else None, "rados_read": rb[1] if rb else None}
            for line in o.splitlines():
                f = line.split(",")
                if f[0] == "csv:save":
                    r["save"] = dict(n=int(f[1]), s=float(f[2]), mbs=float(f[3]), peak=float(f[4]),
                                     raw=int(f[6]), stored=int(f[7]))
                elif f[0] == "csv:savesplit":
                    r["split"] = dict(base_mbs=float(f[2]), base_stored=int(f[3]), deltas=int(f[4]),
                                      delta_mbs=float(f[6]), delta_stored=int(f[7]))
                elif f[0] == "csv:cls":
                    r["cls"] = dict(read50=float(f[2]), read99=float(f[3]), call50=float(f[4]), call99=float(f[5]))
                elif f[0] == "csv:chain":
                    r["chain"][int(f[1])] = dict(server=float(f[2]), server_wire=int(f[3]), comp=float(f[4]),
                                                 comp_wire=int(f[5]), client=float(f[6]), client_wire=int(f[7]))
                elif f[0] == "csv:materialize":
                    r["materialize"] = dict(chain=int(f[1]), elems=int(f[2]), ms=float(f[3]))
                elif f[0] == "csv:rawpath":
                    # restore_s, raw_read_s: the medians of the run's pairs; ratio: their pairs' median
                    r["rawpath"] = dict(save_s=float(f[1]), raw_save_s=float(f[2]), restore_s=float(f[3]),
                                        raw_read_s=float(f[4]),
                                        ratio=float(f[5]) if len(f) > 5 else float(f[4]) / float(f[3]))
            if "save" not in r or not r["chain"]:
                raise SuiteError("bench_store printed no results (raw/bench_store-%d.txt)" % k)
            runs.append(r)
        self.data["store"] = runs
        return runs

    def suite_save(self):
        runs = self.run_store()
        s0 = runs[0]["save"]
        self.metric("save", "save throughput (fp32 logical)", "MB/s", [r["save"]["mbs"] for r in runs], "higher")
        self.metric("save", "peak extra memory of a save", "MiB", [r["save"]["peak"] for r in runs], "lower")
        self.metric("save", "stored bytes per step", "KB", s0["stored"] / s0["n"] / 1e3, "lower")
        self.metric("save", "compression ratio of the saves", "x", s0["raw"] / s0["stored"], "higher")
        self.metric("save", "cls call (rckpt.ping) p50", "us", [r["cls"]["call50"] for r in runs], "lower")
        self.metric("save", "plain 4 KiB read p50", "us", [r["cls"]["read50"] for r in runs], "lower")
        self.metric("save", "cls call / read, p50", "ratio", [r["cls"]["call50"] / r["cls"]["read50"] for r in runs])
        # side by side: each save run against the raw writes just before it
        pairs = [r for r in runs if r.get("rados_write")]
        if pairs:
            self.metric_pairs("save", "save logical MB/s / rados write MB/s (64 KiB)",
                              [r["save"]["mbs"] / r["rados_write"] for r in pairs], "higher")
            sp = [r for r in pairs if "split" in r]
            if sp:
                self.metric_pairs("save", "base save logical MB/s / rados write MB/s (64 KiB)",
                                  [r["split"]["base_mbs"] / r["rados_write"] for r in sp], "higher")
                self.metric_pairs("save", "delta save logical MB/s / rados write MB/s (64 KiB)",
                                  [r["split"]["delta_mbs"] / r["rados_write"] for r in sp], "higher")
        # the second baseline, in the same run: the same path with raw fp32
        rp = [r["rawpath"] for r in runs if "rawpath" in r]
        if rp:
            self.metric_pairs("save", "save MB/s / the same path writing raw fp32 MB/s",
                              [x["raw_save_s"] / x["save_s"] for x in rp], "higher")
            self.metric_pairs("save", "restore MB/s of the last step / the same path reading raw fp32 MB/s",
                              [x["ratio"] for x in rp], "higher")
        sp = [r for r in runs if "split" in r]
        if sp:
            self.metric("save", "base save (fp32 logical)", "MB/s", [r["split"]["base_mbs"] for r in sp], "higher")
            self.metric("save", "delta save (fp32 logical)", "MB/s", [r["split"]["delta_mbs"] for r in sp],
                        "higher")
        self.tool("save_stall", [self.py, os.path.join(here, "..", "store", "save_stall.py"), "--pool", self.a.pool,
                                     "--width", str(self.p["stall_width"]), "--saves", str(self.p["stall_saves"]),
                                     "--seed", str(self.a.seed), "--rckpt", self.a.rckpt,
                                     "--json", os.path.join(self.raw, "save_stall.json")])
        with open(os.path.join(self.raw, "save_stall.json")) as f:
            st = json.load(f)
        self.data["stall"] = st
        for way, v in st["ways"].items():
            s = v["stall_s"]
            self.metrics.append(dict(suite="save", name="trainer stall per save: " + way, unit="ms",
                                     better="lower", median=s["median"] * 1e3, min=s["min"] * 1e3,
                                     max=s["max"] * 1e3, n=s["n"]))
        ts = st["ways"]["torch.save"]["stall_s"]["median"]
        for way in ("rckpt default", "rckpt snapshot"):
            self.metric("save", "stall %s / torch.save" % way, "ratio",
                        st["ways"][way]["stall_s"]["median"] / ts, "lower")
        # the CPU a save costs the trainer's process (background threads too), per GB of state
        for way in ("torch.save", "rckpt default"):
            c = st["ways"][way]["cpu_s_per_gb"]
            self.metrics.append(dict(suite="save", name="save CPU per GB of state: " + way, unit="CPU s/GB",
                                     better="lower", median=c["median"], min=c["min"], max=c["max"], n=c["n"]))
        self.metric("save", "save CPU per GB, rckpt default / torch.save", "ratio",
                    st["ways"]["rckpt default"]["cpu_s_per_gb"]["median"]
                    / max(st["ways"]["torch.save"]["cpu_s_per_gb"]["median"], 1e-9), "lower")

    def suite_compression(self):
        ck = self.checkpoints()
        o = self.tool("bench_codec", [self.bin("bench_codec"), ck])
        per = {}
        for line in o.splitlines():
            if not line.startswith("csv:") or line.startswith("csv:method,"):
                continue
            f = line[4:].split(",")
            m = re.search(r"step-0*(\d+)", f[1])
            per.setdefault(f[0], []).append(dict(step=int(m.group(1)) if m else len(per.get(f[0], [])),
                                                 raw=int(f[2]), enc=int(f[3]), ratio=float(f[4]),
                                                 loss=float(f[5]), mbs=float(f[8])))
        if not per:
            raise SuiteError("bench_codec printed no results (raw/bench_codec.txt)")
        self.data["compression"] = per
        for meth, rows in per.items():
            self.metric("compression", "ratio over the run: " + meth, "x",
                        sum(r["raw"] for r in rows) / sum(r["enc"] for r in rows), "higher")
        for meth, rows in per.items():
            self.metric("compression", "encode, one core: " + meth, "MB/s", [r["mbs"] for r in rows], "higher")
        for line in o.splitlines():  # rckpt's encode by stage, fp32 MB over each stage's seconds
            f = line.split(",")
            if f[0] == "stages:rckpt":
                for name, sec in zip(("prepare", "search", "quantize", "record"), f[2:6]):
                    if float(sec) > 0:  # 0: done within another stage
                        self.metric("compression", "encode stage, one core: " + name, "MB/s",
                                    float(f[1]) / 1e6 / float(sec), "higher")
            if f[0] == "dstages:rckpt":
                for name, sec in zip(("records", "digests", "values"), f[2:5]):
                    if float(sec) > 0:
                        self.metric("compression", "decode stage, one core: " + name, "MB/s",
                                    float(f[1]) / 1e6 / float(sec), "higher")
        self.codec_speed(ck)

    def codec_speed(self, ck):
        """codec_speed.py on the run's last two checkpoints (a base and a
        delta): CPU seconds of rckpt's encode and decode against zstd -1
        and zstd -d in rounds, each round a pair."""
        if not shutil.which("zstd"):
            return say("no encode/decode pairs against zstd: zstd is not installed")
        steps = sorted(f for f in os.listdir(ck) if re.fullmatch(r"step-\d+\.safetensors", f))[-2:]
        o = self.tool("codec_speed", [self.py, os.path.join(here, "..", "codec", "codec_speed.py"), "--rounds",
                                      str(self.p["reps"]), "--scaling", "--rckpt", self.a.rckpt]
                      + [os.path.join(ck, f) for f in steps])
        ms = codec_speed_metrics(o)
        if not ms:
            raise SuiteError("codec_speed.py printed no rounds (raw/codec_speed.txt)")
        for name, unit, values, pairs in ms:
            if pairs:
                self.metric_pairs("compression", name, values, "higher")
            else:
                self.metric("compression", name, unit, values, "higher")

    def lm_checkpoints(self):
        """The transformer run the frontier is judged on (make_transformer.py,
        AdamW, cosine to zero), trained once into the data folder; or --lm."""
        if self.a.lm:
            return self.a.lm
        p = self.p
        d = os.path.join(self.a.data, "lm-%s-seed%d" % ("-".join(p["lm"][1::2]), self.a.seed))
        if not os.path.exists(os.path.join(d, "model.json")):
            say("training a transformer language model for its checkpoints (once; kept in %s)" % d)
            self.tool("make_transformer", [self.py, os.path.join(here, "..", "data", "make_transformer.py"), d,
                                           "--seed", str(self.a.seed)] + p["lm"])
        return d

    def suite_frontier(self):
        d = self.lm_checkpoints()
        out = os.path.join(self.raw, "frontier")
        self.tool("frontier", [self.py, os.path.join(here, "..", "codec", "frontier.py"), "--out", out, "--ckpts", d,
                               "--build", os.path.dirname(self.a.bin), "--eps", self.p["fr_eps"],
                               "--methods", self.p["fr_methods"]])
        with open(os.path.join(out, "frontier.csv")) as f:
            rows = [dict(r, ratio=float(r["ratio"]), last=float(r["last"]), worst=float(r["worst"]),
                         eps=float(r["eps"])) for r in csv.DictReader(f)]
        self.data["frontier"] = rows
        best = {}
        for m in self.p["fr_methods"].split(","):
            ok = [r["ratio"] for r in rows if r["method"] == m and r["last"] <= 0.01]
            if ok:
                best[m] = max(ok)
                self.metric("frontier", "ratio at <= 1% real loss: " + m, "x", best[m], "higher")
        if "rckpt" in best and "qd" in best:
            self.metric("frontier", "rckpt / qd at <= 1% real loss", "ratio", best["rckpt"] / best["qd"], "higher")

    def suite_restore(self):
        runs = self.run_store()
        rows = []
        for L in sorted(runs[0]["chain"]):
            c = [r["chain"][L] for r in runs if L in r["chain"]]
            row = {"chain": L}
            for k, label in (("server", "server-side"), ("comp", "after compaction"), ("client", "client-side")):
                row[k] = self.metric("restore", "restore, chain %d: %s" % (L, label), "ms", [x[k] for x in c], "lower")
                row[k + "_wire"] = c[0][k + "_wire"]
            rows.append(row)
            # bench_store times server-side and client-side restores in turn
            self.metric_pairs("restore", "restore, chain %d: server-side / client-side time" % L,
                              [x["server"] / x["client"] for x in c], "lower")
        self.data["restore"] = rows
        self.big_restore()
        m = [r["materialize"]["ms"] for r in runs if "materialize" in r]
        if m:
            r0 = runs[0]["materialize"]
            self.metric("restore", "OSD materialize of the longest chain: fp32 folded", "GB/s",
                        [r0["elems"] * 4 * (r0["chain"] + 1) / (x / 1e3) / 1e9 for x in m], "higher")

    def big_restore(self):
        """--full: a model of big_mi Mi parameters (synthetic fp32, bench_store
        --mem-sizes) saved as a base and deltas, its second step (one delta on
        the base) restored and read out as fp32, each run right after a
        `rados bench` write and sequential read of 4 MiB objects: restore
        MB/s of fp32 over the raw read's MB/s, in pairs."""
        mi = self.p["big_mi"]
        if not mi:
            return
        ratios, mbs = [], []
        for k in range(self.p["reps"]):
            _, rd = self.rados_bench(4 << 20, "big-%d" % k)
            o = self.tool("bench_store-big-%d" % k,
                          [self.bin("bench_store"), "--pool", self.a.pool, "--reps", "1", "--no-rados-bench",
                           "--mem-sizes", str(mi), "--chains", "1", self.checkpoints()])
            for line in o.splitlines():
                f = line.split(",")
                if f[0] == "csv:memrestore":
                    mbs.append(float(f[4]))
                    ratios.append(float(f[4]) / rd)
        if not ratios:
            raise SuiteError("bench_store printed no restore of the %d Mi model (raw/bench_store-big-0.txt)" % mi)
        self.metric("restore", "restore of a %d Mi-parameter model (a delta on a base), fp32" % mi, "MB/s", mbs,
                    "higher")
        self.metric_pairs("restore", "restore of a %d Mi-parameter model, fp32 MB/s / rados seq read MB/s (4 MiB)"
                          % mi, ratios, "higher")

    def suite_resume(self):
        """resume_bench.py: load_latest against a raw read and torch.load
        (pairs, every round A B C then C B A), per model and chain length;
        the chain's cost as the ratio of the longest chain's time to the
        shortest's; the stages of one restore per row."""
        p = self.p
        js = os.path.join(self.raw, "resume.json")
        self.tool("resume_bench", [self.py, os.path.join(here, "..", "store", "resume_bench.py"), "--pool",
                                   self.a.pool, "--sizes", p["rs_sizes"], "--dtypes", p["rs_dtypes"], "--chains",
                                   p["rs_chains"], "--rounds", str(p["reps"]), "--json", js], timeout=7200)
        with open(js) as f:
            rows = json.load(f)["rows"]
        if not rows:
            raise SuiteError("resume_bench.py measured nothing (raw/resume_bench.txt)")
        for r in rows:
            what = "%gM %s, chain %d" % (r["size_m"], r["dtype"], r["chain"])
            self.metric("resume", "load_latest, %s" % what, "ms", r["ms"]["A"], "lower")
            self.metric_pairs("resume", "load_latest / raw read of its fp32 bytes, %s" % what, r["A/B"], "lower")
            self.metric_pairs("resume", "load_latest / torch.load + load_state_dict, %s" % what, r["A/C"], "lower")
        for model in dict.fromkeys((r["size_m"], r["dtype"]) for r in rows):
            by = sorted((r for r in rows if (r["size_m"], r["dtype"]) == model), key=lambda r: r["chain"])
            if len(by) > 1:
                lo, hi = by[0], by[-1]
                self.metric("resume", "load_latest at chain %d / at chain %d, %gM %s"
                            % (hi["chain"], lo["chain"], model[0], model[1]), "ratio",
                            summ(hi["ms"]["A"])["median"] / summ(lo["ms"]["A"])["median"], "lower")
        self.data["resume"] = rows

    def suite_pcr(self):
        imgs = self.images()
        # one run: bench_pcr measures every case in pairs with its baseline
        # (base, 1, base, 2, ...), --reps rounds after an untimed one
        o = self.tool("bench_pcr", [self.bin("bench_pcr"), "--pool", self.a.pool, "--reps", str(self.p["reps"])]
                      + self.p["pcr_args"] + [imgs])
        r = {"read": {}, "ssim": {}, "ratio": {}}
        for line in o.splitlines():
            f = line.split(",")
            if f[:2] == ["csv", "build"]:
                r["build"] = dict(images=int(f[2]), s=float(f[4]), stored=int(f[5]), src=int(f[6]))
            elif f[:2] == ["csv", "read"] and f[3] == "1":
                key = "base" if f[2] == "base" else int(f[2])
                r["read"][key] = dict(bytes=int(f[4]), s=float(f[5]), n=int(f[6]))
                if key != "base":
                    r["ssim"][key] = float(f[7])
            elif f[:3] in (["csv", "ratio", "read"], ["csv", "ratio", "decode"]):
                r["ratio"][(f[2], int(f[3]), int(f[4]))] = dict(median=float(f[5]), min=float(f[6]),
                                                                 max=float(f[7]), n=int(f[8]))
            elif f[:3] in (["csv", "ratio", "read-scale"], ["csv", "ratio", "decode-scale"]):
                # against the baseline at full size, then at the same scale
                for k, vs in ((6, "full"), (9, "same")):
                    r["ratio"][(f[2], f[3], int(f[4]), int(f[5]), vs)] = dict(
                        median=float(f[k]), min=float(f[k + 1]), max=float(f[k + 2]), n=int(f[12]))
        if "build" not in r or "base" not in r["read"] or not r["ratio"]:
            raise SuiteError("bench_pcr printed no results (raw/bench_pcr.txt)")
        b = r["build"]
        self.metric("pcr", "build", "images/s", b["images"] / b["s"], "higher")
        self.metric("pcr", "stored / source JPEG bytes", "ratio", b["stored"] / b["src"], "lower")
        base = self.metric("pcr", "one object per JPEG: read + decode", "images/s",
                           r["read"]["base"]["n"] / r["read"]["base"]["s"], "higher")

        def paired(name, x, better="higher"):
            self.metrics.append(dict(suite="pcr", name=name, unit="ratio", better=better, pairs=True, **x))
            return x
        rows = []
        for g in sorted(k for k in r["read"] if k != "base"):
            ips = self.metric("pcr", "groups 1..%d: read + decode" % g, "images/s",
                              r["read"][g]["n"] / r["read"][g]["s"], "higher")
            frac = r["read"][g]["bytes"] / r["read"]["base"]["bytes"]
            self.metric("pcr", "groups 1..%d: bytes / one object per JPEG" % g, "ratio", frac, "lower")
            sp = {}
            for t in (1, 2):
                x = r["ratio"].get(("read", g, t))
                if x:
                    sp[t] = paired("groups 1..%d: read + decode images/s / one object per JPEG, %d thread%s"
                                   % (g, t, "s" if t > 1 else ""), x)
            x = r["ratio"].get(("decode", g, 1))
            if x:
                paired("groups 1..%d: decode only Mpx/s / baseline JPEG, one core" % g, x)
            for key, x in sorted(r["ratio"].items(), key=lambda kv: str(kv[0])):
                if len(key) != 5 or key[2] != g:
                    continue
                kind, sc, _, t, vs = key
                at = "full size" if vs == "full" else "the same scale"
                if kind == "read-scale":
                    paired("groups 1..%d at scale %s: read + decode images/s / one object per JPEG at %s, "
                           "%d thread%s" % (g, sc, at, t, "s" if t > 1 else ""), x)
                else:
                    paired("groups 1..%d at scale %s: decode only images/s / baseline JPEG at %s, one core"
                           % (g, sc, at), x)
            rows.append(dict(group=g, bytes=r["read"][g]["bytes"], frac=frac, ips=ips,
                             speedup=sp[1]["median"] if 1 in sp else ips["median"] / base["median"],
                             ssim=r["ssim"][g]))
        self.data["pcr"] = dict(rows=rows, base=base, base_bytes=r["read"]["base"]["bytes"], build=b)

    def suite_loader(self):
        imgs = self.images()
        js = os.path.join(self.raw, "loader_bytes.json")
        self.tool("loader_bytes", [self.py, os.path.join(here, "..", "loader", "loader_bytes.py"), imgs, "--pool", self.a.pool,
                                   "--images", str(self.p["loader_images"]), "--epochs", str(self.p["loader_epochs"]),
                                   "--learners", str(self.p["loader_learners"]), "--seed", str(self.a.seed),
                                   "--rckpt", self.a.rckpt,
                                   "--json", js])
        with open(js) as f:
            lb = json.load(f)
        last = lb["rows"][-1]["epoch"]
        reg = [r for r in lb["rows"] if r["loader"] == "regular" and r["epoch"] == last][0]
        for r in lb["rows"]:
            if r["epoch"] == last:
                self.metric("loader", "epoch %d, MB from the cluster: %s" % (last, r["loader"]), "MB",
                            r["storage_bytes"] / 1e6, "lower")
                if r["loader"] != "regular":
                    self.metric("loader", "epoch %d bytes / regular: %s" % (last, r["loader"]), "ratio",
                                r["storage_bytes"] / reg["storage_bytes"], "lower")
        sim = os.path.join(self.raw, "bench_locality.csv")
        self.tool("bench_locality", [self.bin("bench_locality"), "--learners", self.p["loc_learners"],
                                     "--batches", "32", "--steps", "100", "--seed", str(self.a.seed), "--csv", sim])
        box = {}
        with open(sim) as f:
            for row in csv.DictReader(f):
                box.setdefault(int(row["learners"]), []).append(float(row["moved_pct"]))
        for p_, v in sorted(box.items()):
            self.metric("loader", "simulated imbalance traffic, %d learners" % p_, "% of batch", v, "lower")
        self.data["loader"] = dict(run=lb, box=box)

    def suite_group(self):
        js = os.path.join(self.raw, "group_bench.json")
        self.tool("group_bench", [self.py, os.path.join(here, "..", "store", "group_bench.py"), self.checkpoints(),
                                  "--ranks", "1,2,4", "--steps", str(self.p["group_steps"]),
                                  "--reps", str(self.p["reps"]), "--json", js])
        with open(js) as f:
            gb = json.load(f)
        for p_, s in sorted(gb["summary"].items(), key=lambda kv: int(kv[0])):
            if p_ != "1":
                self.metric("group", "save time, %s ranks / 1 rank (deltas)" % p_, "ratio",
                            s["ratio_later_to_1"], "lower")
                self.metric("group", "save time, %s ranks / 1 rank (the first, bases)" % p_, "ratio",
                            s["ratio_first_to_1"], "lower")
                self.metric("group", "bytes sent per rank, %s ranks (mean)" % p_, "B",
                            sum(s["sent_bytes_per_rank"]) / len(s["sent_bytes_per_rank"]), "lower")
            self.metric("group", "bytes a step stores, %s rank(s)" % p_, "B", s["stored_bytes"], "lower")
            if "restore_ratio_2_to_1" in s:
                self.metric("group", "restore of a %s-rank step: 2 ranks' slices / 1 process whole" % p_,
                            "ratio", s["restore_ratio_2_to_1"], "lower")
        self.data["group"] = gb

    def suite_link(self):
        import link_bench
        why = link_bench.can_run()
        if why:
            raise SuiteError("skipped: " + why)
        try:
            rates = link_bench.parse_rates(self.a.link or "1g,10g")
            with link_bench.ShapedLink(self.a.plugins, say) as link:
                res = link_bench.measure(link, rates, self.tool, self.bin("bench_store"), self.checkpoints(),
                                         self.p["reps"], self.p["link_steps"], resume=self.p["link_resume"])
        except link_bench.LinkError as e:
            raise SuiteError(str(e))
        link_bench.record(res, self.metric, self.metric_pairs)
        self.data["link"] = res

    def suite_gpu(self):
        o = self.tool("rckpt-version", [self.a.rckpt, "version"])
        if "device(s)" not in o:
            raise SuiteError("skipped: no CUDA device on this machine (%s)" %
                             (([l for l in o.splitlines() if l.startswith("gpu")] or ["not built with CUDA"])[0]))
        o = self.tool("bench_gpu", [self.bin("bench_gpu"), "--sizes", self.p["gpu_sizes"],
                                    "--reps", str(self.p["reps"])])
        rows = []
        for line in o.splitlines():
            f = line.split(",")
            if f[0] == "csv" and len(f) >= 6:
                rows.append(dict(n=int(f[1]), stage=f[2], ms=float(f[3]), gbs=float(f[4])))
                self.metric("gpu", "%s, %s parameters" % (f[2], f[1]), "ms", float(f[3]), "lower")
        self.data["gpu"] = rows

    # -- the whole run --
    def run(self):
        os.makedirs(self.raw, exist_ok=True)
        os.makedirs(self.a.data, exist_ok=True)
        t0 = time.time()
        n = len(self.a.suites)
        for i, s in enumerate(self.a.suites, 1):
            if PROGRESS.on:
                PROGRESS.start(i, n, s)
            else:
                say("suite %s ..." % s)
            ts = time.time()
            try:
                getattr(self, "suite_" + s)()
                self.status[s] = "ok (%.0f s)" % (time.time() - ts)
            except SuiteError as e:
                msg = str(e)
                self.status[s] = msg if msg.startswith("skipped") else "failed: " + msg
            except (OSError, ValueError, KeyError, IndexError, AttributeError) as e:
                self.status[s] = "failed: %s: %s" % (type(e).__name__, e)
            if PROGRESS.on:
                PROGRESS.end("rckpt bench: suite %d/%d %s: %s" % (i, n, s, self.status[s]))
            elif not self.status[s].startswith("ok"):
                say("suite %s %s" % (s, self.status[s]))
        self.seconds = time.time() - t0
        self.write()
        return 1 if any(v.startswith("failed") for v in self.status.values()) else 0

    def describe(self):
        d = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
             "command": self.a.cmdline or " ".join(shlex.quote(x) for x in sys.argv),
             "profile": self.a.profile, "seed": self.a.seed, "pool": self.a.pool,
             "conf": self.env.get("CEPH_CONF", "(Ceph's search path)"), "reps": self.p["reps"],
             "host": platform.node(), "kernel": platform.release(), "cpus": os.cpu_count()}
        try:
            with open("/proc/cpuinfo") as f:
                m = re.search(r"model name\s*:\s*(.*)", f.read())
                d["cpu"] = m.group(1) if m else platform.machine()
            with open("/proc/meminfo") as f:
                d["memory_gib"] = round(int(f.readline().split()[1]) / 2**20, 1)
        except OSError:
            pass
        for key, cmd in (("rckpt", [self.a.rckpt, "version"]), ("cluster", [self.a.rckpt, "-p", self.a.pool, "status"])):
            try:
                d[key] = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        env=self.env, timeout=60).stdout.strip()
            except (OSError, subprocess.TimeoutExpired) as e:
                d[key] = str(e)
        if shutil.which("ceph"):
            conf = ["-c", self.env["CEPH_CONF"]] if self.env.get("CEPH_CONF") else []
            for key, args in (("ceph_version", ["version"]), ("osds", ["osd", "stat"]),
                              ("pool_size", ["osd", "pool", "get", self.a.pool, "size"])):
                try:
                    d[key] = subprocess.run(["ceph"] + conf + ["--connect-timeout", "20"] + args,
                                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                            timeout=30, env=self.ceph_env()).stdout.strip()
                except (OSError, subprocess.TimeoutExpired):
                    pass
            m = re.search(r"(\d+) osds: (\d+) up", d.get("osds", ""))
            if m:
                d["osds"] = "%s OSDs, %s up" % (m.group(1), m.group(2))
        return d

    def write(self):
        meta = self.describe()
        meta["seconds"] = round(self.seconds, 1)
        meta["suites"] = self.status
        with open(os.path.join(self.out, "results.json"), "w") as f:
            json.dump({"meta": meta, "metrics": self.metrics, "data": self.data}, f, indent=1, default=str)
        with open(os.path.join(self.out, "results.csv"), "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(["suite", "metric", "unit", "median", "min", "max", "n", "better"])
            for m in self.metrics:
                w.writerow([m["suite"], m["name"], m["unit"], "%.6g" % m["median"], "%.6g" % m["min"],
                            "%.6g" % m["max"], m["n"], m["better"] or ""])
        plots = self.plot()
        report(self.out, meta, self.metrics, self.data, self.status, plots)
        say("report: %s" % os.path.join(self.out, "report.md"))
        if JSON_OUT:
            json.dump({"meta": meta, "metrics": self.metrics, "data": self.data}, sys.stdout,
                      indent=4 if JSON_OUT == "pretty" else None, default=str)
            print(flush=True)
        else:
            print(summary_table(self.metrics, self.data), flush=True)

    def plot(self):
        """PNGs with matplotlib (bench_plots.py); returns {name: file} of those drawn."""
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            say("no plots: python3-matplotlib is not installed")
            return {}
        import bench_plots
        return bench_plots.draw(self.out, self.data)


def main():
    ap = argparse.ArgumentParser(prog="rckpt_bench.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    g = r.add_mutually_exclusive_group(required=True)
    g.add_argument("--quick", dest="profile", action="store_const", const="quick")
    g.add_argument("--full", dest="profile", action="store_const", const="full")
    g.add_argument("--tiny", dest="profile", action="store_const", const="tiny",
                   help="every suite on the least data that runs it (the tests'; its figures mean little)")
    r.add_argument("--out", required=True)
    r.add_argument("--conf")
    r.add_argument("--pool", default="rckpt")
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--suites", default=",".join(SUITES))
    r.add_argument("--data", help="where the generated data is kept (default: OUT/../rckpt-bench-data)")
    r.add_argument("--checkpoints", help="a folder of step-*.safetensors to use instead of training a model")
    r.add_argument("--images", help="a folder of JPEGs to use instead of cutting them from sample photos")
    r.add_argument("--lm", help="a run of make_transformer.py (model.json, step-*.safetensors) for the "
                   "frontier suite instead of training one")
    r.add_argument("--link", help="rates of the link suite, as 1g,10g (adds the suite)")
    r.add_argument("--plugins", help="the plugins the link suite's cluster loads (default: "
                   "$RCKPT_PLUGIN_DIR, else BIN/../rados-classes)")
    r.add_argument("--bin", default=os.path.join(here, "..", "..", "build", "bench"))
    r.add_argument("--rckpt", default=os.path.join(here, "..", "..", "build", "client", "rckpt"))
    r.add_argument("--cmdline", help=argparse.SUPPRESS)
    r.add_argument("--json", choices=("compact", "pretty"),
                   help="print the results as JSON (what results.json holds) instead of the summary")
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    a = ap.parse_args()
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet under `| head`
    if a.cmd == "compare":
        return compare(a.a, a.b)
    a.suites = [s for s in a.suites.split(",") if s]
    bad = [s for s in a.suites if s not in SUITES + OPT_SUITES]
    if bad:
        ap.error("no suite %s (suites: %s)" % (",".join(bad), ",".join(SUITES + OPT_SUITES)))
    if a.link is not None:
        import link_bench
        try:
            link_bench.parse_rates(a.link)
        except link_bench.LinkError as e:
            ap.error("--link: %s" % e)
        if "link" not in a.suites:
            a.suites.append("link")
    a.data = os.path.abspath(a.data or os.path.join(os.path.dirname(os.path.abspath(a.out)), "rckpt-bench-data"))
    # the restore suite's chains reach 16; the loader's learners need a batch of 32 each
    for opt, pat, least in (("checkpoints", r"^step-\d+\.safetensors$", 17),
                            ("images", r"\.jpe?g$", 32 * PROFILES[a.profile]["loader_learners"])):
        d = getattr(a, opt)
        if d is None:
            continue
        d = os.path.abspath(d)
        n = len([f for f in os.listdir(d) if re.search(pat, f, re.I)]) if os.path.isdir(d) else 0
        if n < least:
            ap.error("--%s %s: needs at least %d files matching %s, found %d" % (opt, d, least, pat, n))
        setattr(a, opt, d)
    if a.lm is not None:
        a.lm = os.path.abspath(a.lm)
        n = len([f for f in os.listdir(a.lm) if re.search(r"^step-\d+\.safetensors$", f)]) \
            if os.path.isdir(a.lm) else 0
        if n < 2 or not os.path.exists(os.path.join(a.lm, "model.json")):
            ap.error("--lm %s: needs model.json and at least 2 step-N.safetensors (make_transformer.py's), "
                     "found %d" % (a.lm, n))
    a.rckpt = os.path.abspath(a.rckpt)
    a.bin = os.path.abspath(a.bin)
    a.plugins = os.path.abspath(a.plugins or os.environ.get("RCKPT_PLUGIN_DIR")
                                or os.path.join(a.bin, "..", "rados-classes"))
    global JSON_OUT, PROGRESS
    JSON_OUT = a.json or False
    # the live line only where someone watches it: a terminal, and no JSON
    PROGRESS = Progress(sys.stdout, not JSON_OUT and sys.stdout.isatty() and os.environ.get("TERM") != "dumb")
    return Bench(a).run()


if __name__ == "__main__":
    sys.exit(main())
