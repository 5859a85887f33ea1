"""bench_report.py — the report of rckpt_bench.py: the summary table,
report.md, results.json and results.csv of a run, and the comparison of two
runs (rckpt_bench.py compare A B).
"""
import json
import os
import re
import statistics
import sys


def spread(ms):
    """Error bars from min and max around each median."""
    return [[m["median"] - m["min"] for m in ms], [m["max"] - m["median"] for m in ms]]


# A paired ratio whose min-max spans more than this fraction of its median
# says nothing by itself: the report marks it.
WIDE = 0.5


def wide(m):
    return bool(m.get("pairs")) and m["n"] > 1 and m["median"] > 0 and \
        (m["max"] - m["min"]) / m["median"] > WIDE


def fmt(m):
    if m is None:
        return "-"
    v = m["median"]
    s = "%.3g" % v if abs(v) < 100 else "%.0f" % v
    if m["n"] > 1 and m["max"] > m["min"]:
        s += " [%.3g, %.3g]" % (m["min"], m["max"])
    if m.get("pairs"):
        s += " (pairs)"
    if wide(m):
        s += " **spread too wide to conclude**"
    return s


def find(metrics, name):
    for m in metrics:
        if m["name"] == name:
            return m
    return None


def summ(v):
    """median, min, max and count of the values that are not None; None
    when there are none."""
    v = [x for x in v if x is not None]
    if not v:
        return None
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)}


def codec_speed_metrics(out):
    """The figures in codec_speed.py's output, as (name, unit, values,
    pairs): MB of fp32 per CPU second and the ratios to zstd a round each
    ("csv:round,R,MB,ENC,DEC,ZSTD1,ZSTDD"), and the scaling table, the
    encode on 1 core and on all N in pairs ("csv:scaling,R,MB,WALL1,WALLN,N");
    [] when it printed no round."""
    def rows(tag):
        return [[float(x) for x in line.split(",")[2:]] for line in out.splitlines() if line.startswith(tag)]
    r, sc = rows("csv:round,"), rows("csv:scaling,")
    if not r:
        return []
    ms = [("encode, MB of fp32 per CPU second: rckpt", "MB/s", [x[0] / x[1] for x in r], False),
          ("decode, MB of fp32 per CPU second: rckpt", "MB/s", [x[0] / x[2] for x in r], False),
          ("encode speed per CPU second / zstd -1", "ratio", [x[3] / x[1] for x in r], True),
          ("decode speed per CPU second / zstd -d", "ratio", [x[4] / x[2] for x in r], True)]
    if sc:
        n = int(sc[0][3])
        ms += [("encode, MB of fp32 per wall second: 1 core", "MB/s", [x[0] / x[1] for x in sc], False),
               ("encode, MB of fp32 per wall second: all %d cores" % n, "MB/s", [x[0] / x[2] for x in sc], False),
               ("encode speed, all %d cores / 1 core" % n, "ratio", [x[1] / x[2] for x in sc], True)]
    return ms


def goal_status(m, goal):
    """'>= 1: met' (or 'not met'), judged on the median; '' without a goal."""
    if goal is None:
        return ""
    op, target = goal
    ok = m["median"] >= target if op == ">=" else m["median"] <= target
    return "%s %g: %s" % ("≥" if op == ">=" else "≤", target, "met" if ok else "not met")


def link_goal(name):
    """Behind a link of 1 Gbit/s: save >= 3x the raw write, restore >= 2x
    the raw read; of 10 Gbit/s: both >= 1x; other rates: no goal."""
    r = re.search(r"at (\d+(?:\.\d+)?)([mg])$", name)
    if not r:
        return None
    gbit = float(r.group(1)) / (1000 if r.group(2) == "m" else 1)
    if gbit == 1:
        return (">=", 3 if name.startswith("save") else 2)
    return (">=", 1) if gbit == 10 else None


def summary_rows(metrics, data):
    """(label, value, unit, goal) for each measure the summary shows; goal
    is the performance goal the measure is held to (docs/benchmarks.md,
    "Where performance stands"), with whether its median meets it."""
    rows = []

    def add(label, name, unit=None, goal=None):
        m = find(metrics, name)
        if m:
            rows.append((label, fmt(m), unit or m["unit"], goal_status(m, goal)))
    add("rados write, 64 KiB objects", "rados write, 64 KiB objects")
    add("rados read, 64 KiB objects", "rados read, 64 KiB objects")
    for m in metrics:
        if m["name"].startswith("save throughput"):
            rows.append(("checkpoint save (fp32 logical)", fmt(m), m["unit"], ""))
    add("save / rados write (64 KiB)", "save logical MB/s / rados write MB/s (64 KiB)", goal=(">=", 1))
    add("base save / rados write (64 KiB)", "base save logical MB/s / rados write MB/s (64 KiB)",
        goal=(">=", 0.5))
    add("delta save / rados write (64 KiB)", "delta save logical MB/s / rados write MB/s (64 KiB)")
    add("save / the same path writing raw fp32", "save MB/s / the same path writing raw fp32 MB/s")
    add("restore of the last step / the same path reading raw fp32",
        "restore MB/s of the last step / the same path reading raw fp32 MB/s", goal=(">=", 1))
    add("OSD materialize, fp32 folded (longest chain)", "OSD materialize of the longest chain: fp32 folded",
        goal=(">=", 2))
    add("trainer stall, rckpt default / torch.save", "stall rckpt default / torch.save", goal=("<=", 1))
    add("trainer stall: rckpt snapshot", "trainer stall per save: rckpt snapshot")
    add("trainer stall: torch.save to a local file", "trainer stall per save: torch.save")
    add("save CPU per GB of state: rckpt default", "save CPU per GB of state: rckpt default")
    add("save CPU per GB of state: torch.save", "save CPU per GB of state: torch.save")
    add("save CPU per GB, rckpt default / torch.save", "save CPU per GB, rckpt default / torch.save")
    add("encode, MB of fp32 per CPU second", "encode, MB of fp32 per CPU second: rckpt")
    add("encode speed per CPU second / zstd -1", "encode speed per CPU second / zstd -1", goal=(">=", 1))
    for st in ("prepare", "search", "quantize", "record"):
        add("encode stage %s, one core" % st, "encode stage, one core: " + st, goal=(">=", 1000))
    add("decode, MB of fp32 per CPU second", "decode, MB of fp32 per CPU second: rckpt", goal=(">=", 1000))
    for st in ("records", "digests", "values"):
        add("decode stage %s, one core" % st, "decode stage, one core: " + st, goal=(">=", 1000))
    for m in metrics:  # the scaling table
        if m["name"].startswith("encode, MB of fp32 per wall second: ") or m["name"].startswith("encode speed, all "):
            rows.append((m["name"], fmt(m), m["unit"], ""))
    add("decode speed per CPU second / zstd -d", "decode speed per CPU second / zstd -d")
    add("compression ratio over the run: rckpt", "ratio over the run: rckpt")
    add("compression ratio over the run: qd (baseline)", "ratio over the run: qd")
    add("compression ratio over the run: zstd -3", "ratio over the run: zstd-3")
    add("transformer, ratio at <= 1% real loss: rckpt", "ratio at <= 1% real loss: rckpt")
    add("transformer, ratio at <= 1% real loss: rckpt / qd", "rckpt / qd at <= 1% real loss")
    rs = data.get("restore")
    if rs:
        L = rs[-1]["chain"]
        add("restore, chain %d, server-side" % L, "restore, chain %d: server-side" % L)
        add("restore, chain %d, after compaction" % L, "restore, chain %d: after compaction" % L)
        add("restore, chain %d, client-side" % L, "restore, chain %d: client-side" % L)
        add("restore, chain %d, server-side / client-side" % L, "restore, chain %d: server-side / client-side time" % L)
    for m in metrics:
        if m["name"].startswith("restore of a ") and m.get("pairs"):
            rows.append((m["name"], fmt(m), m["unit"], goal_status(m, (">=", 0.5))))
    rz = data.get("resume")
    if rz:  # the largest model's rows: a trainer's resume (issue 65's goals)
        big = max(r["size_m"] for r in rz)
        for r in (r for r in rz if r["size_m"] == big):
            what = "%gM %s, chain %d" % (r["size_m"], r["dtype"], r["chain"])
            add("resume (load_latest), " + what, "load_latest, " + what)
            add("resume / raw read of its fp32 bytes, " + what, "load_latest / raw read of its fp32 bytes, " + what,
                goal=("<=", 1.5))
            add("resume / torch.load + load_state_dict, " + what,
                "load_latest / torch.load + load_state_dict, " + what)
        for m in metrics:
            if m["suite"] == "resume" and m["name"].startswith("load_latest at chain"):
                rows.append((m["name"], fmt(m), m["unit"], goal_status(m, ("<=", 1.3))))
    pcr = data.get("pcr")
    if pcr and pcr["rows"]:
        r = next((r for r in pcr["rows"] if r["ssim"] >= 0.9), pcr["rows"][-1])
        rows.append(("PCR, %d groups (SSIM %.2f): bytes / one object per JPEG" % (r["group"], r["ssim"]),
                     "%.3f" % r["frac"], "ratio", ""))
        for g in range(1, 6):
            add("PCR, groups 1..%d: read + decode images/s / one object per JPEG, 1 thread" % g,
                "groups 1..%d: read + decode images/s / one object per JPEG, 1 thread" % g)
        for g in range(1, 6):
            add("PCR, groups 1..%d at auto scale: read + decode images/s / one object per JPEG (full size), 1 thread"
                % g, "groups 1..%d at scale auto: read + decode images/s / one object per JPEG at full size, "
                "1 thread" % g)
        G = pcr["rows"][-1]["group"]
        add("PCR, %d groups (full fidelity): decode Mpx/s / baseline JPEG" % G,
            "groups 1..%d: decode only Mpx/s / baseline JPEG, one core" % G)
    for m in metrics:
        if m["suite"] == "link" and m.get("pairs"):
            rows.append(("behind a shaped link: " + m["name"], fmt(m), m["unit"], goal_status(m, link_goal(m["name"]))))
    for m in metrics:
        if m["suite"] == "loader" and "bytes / regular: locality" in m["name"]:
            rows.append(("loader, " + m["name"], fmt(m), m["unit"], ""))
    return rows


def summary_table(metrics, data):
    rows = summary_rows(metrics, data)
    lines = ["| measure | value | unit | goal |", "|---|---:|---|---|"]
    lines += ["| %s | %s | %s | %s |" % r for r in rows]
    return "\n".join(lines)


def report(out, meta, metrics, data, status, plots):
    L = []
    L.append("# rckpt benchmark report (%s)" % meta["profile"])
    L.append("")
    L.append("- date: %s; the whole run: %.0f s" % (meta["date"], meta["seconds"]))
    L.append("- command: `%s`" % meta["command"])
    L.append("- machine: %s, %s CPUs, %s GiB, Linux %s (%s)" % (meta.get("cpu", "?"), meta["cpus"],
                                                               meta.get("memory_gib", "?"), meta["kernel"], meta["host"]))
    L.append("- cluster: conf `%s`, pool `%s`%s%s%s" % (
        meta["conf"], meta["pool"], "; " + meta["osds"] if meta.get("osds") else "",
        "; pool size " + meta["pool_size"].split()[-1] if meta.get("pool_size") else "",
        "; " + meta["ceph_version"] if meta.get("ceph_version") else ""))
    L.append("- timed figures: median [min, max] of %d runs unless the table says otherwise; seed %d"
             % (meta["reps"], meta["seed"]))
    L.append("- ratios marked (pairs): each case measured right beside its baseline (A B A B, after a "
             "warm-up), median [min, max] of the per-pair ratios; marked **spread too wide to conclude** "
             "when max - min exceeds %d%% of the median" % int(WIDE * 100))
    L.append("")
    L.append("```")
    L.append(meta.get("rckpt", ""))
    L.append(meta.get("cluster", ""))
    L.append("```")
    L.append("")
    L.append("## Summary")
    L.append("")
    L.append(summary_table(metrics, data))
    L.append("")
    L.append("| suite | status |")
    L.append("|---|---|")
    for s, v in status.items():
        L.append("| %s | %s |" % (s, v))
    L.append("")

    def table(suite):
        ms = [m for m in metrics if m["suite"] == suite]
        if not ms:
            return
        L.append("| measure | median [min, max] | unit | runs |")
        L.append("|---|---:|---|---:|")
        for m in ms:
            L.append("| %s | %s | %s | %d |" % (m["name"], fmt(m), m["unit"], m["n"]))
        L.append("")

    def img(name, alt):
        if name in plots:
            L.append("![%s](%s)" % (alt, plots[name]))
            L.append("")

    sections = [
        ("baseline", "Raw cluster baseline",
         "`rados bench` write (16 in flight; at most a quarter of the cluster's free space, 256 MiB quick, "
         "1 GiB full) then sequential read of the same objects, for object sizes around what the store "
         "writes: a step's records appended to chunk objects (tens of KB for deltas) and whole bases (MB)."),
        ("save", "Checkpoint save and trainer stall",
         "`bench_store`: one writer saves the training run's checkpoints in order (encode + append + commit) "
         "into a fresh job; MB/s of the fp32 bytes saved, and the library's peak extra memory. The cost of "
         "an object-class call is a no-op `rckpt.ping` beside a 4 KiB read of the same object, interleaved. "
         "`save_stall.py`: a trainer saves the same state four ways in turn (the stall is what the training "
         "loop waits for; the spread is over the saves)."),
        ("compression", "Compression ratio along a training run (Inshrinkerator Fig. 11/12 analogues)",
         "`bench_codec` on every checkpoint of the run, every method on the same files at the same quality "
         "threshold: rckpt, its ablations (`abl-*`), the baselines QD and Check-N-Run, and lossless zstd. "
         "Ratios are exact (one run); encode MB/s is the median over the checkpoints."),
        ("frontier", "Compression against real held-out loss",
         "`frontier.py` on a transformer language model's run (`make_transformer.py`, AdamW, cosine to "
         "zero): each method at a sweep of thresholds, every restored step evaluated on the model's "
         "held-out data. A point is (loss increase of the last checkpoint, ratio over the run); methods "
         "compare at equal real loss."),
        ("restore", "Restore latency vs chain length",
         "`bench_store`: restore the newest step of a chain of L deltas: materialized in the OSD "
         "(server-side), the same after a compaction made it a base, and client-side (fetch every record, "
         "fold here)."),
        ("resume", "A trainer's resume against a raw read and torch.load",
         "`resume_bench.py`: an MLP with AdamW per size, saved every training step with nothing compacted; "
         "after 1..N deltas, rounds of `load_latest(model, optimizer)` (A), a raw RADOS read of the state's "
         "fp32 bytes from the same pool, every 4 MiB object in flight (B), and `torch.load` of the same "
         "state from a warm local file plus both `load_state_dict` calls (C), in the order A B C then "
         "C B A; ratios are per round. The stages are one `restore_into` per row (the library's "
         "RestoreStats and the tensors' read)."),
        ("pcr", "PCR: bytes and images/s per scan group",
         "`bench_pcr`: the same JPEGs as a PCR dataset and as one object per original JPEG; read and decode "
         "every image through the first k scan groups (one thread), and decode the same prefixes from memory "
         "on one core. Each case runs between two runs of its baseline (base, 1, base, 2, ..., after an "
         "untimed round); its ratio is the median [min, max] of the per-pair ratios."),
        ("loader", "Locality-aware vs regular loader",
         "`loader_bytes.py`: learners (4; --tiny 2; processes on this machine, gloo on loopback) read a PCR dataset "
         "per epoch with the regular loader, the locality-aware one with whole caches, and with caches of "
         "half a share. `bench_locality`: the planner's imbalance traffic at larger scale, simulated."),
        ("group", "Group saves (distributed training)",
         "`group_bench.py`: the suite's real checkpoints saved by 1, 2 and 4 ranks (processes, gloo on "
         "loopback), each holding a ZeRO-3 slice of every tensor; each repetition runs every rank count in "
         "a rotating order, and a case's figure is the median of its per-repetition ratio to 1 rank. A "
         "save's time is its slowest rank's. Bytes: what a step stores, and what each rank sent over the "
         "transport. Chunks of 256 Ki parameters (the suite's models would have too few of the default 4 Mi "
         "to share). Resharding: a step saved by 4 ranks restored by 2 (each its slice) against one "
         "process restoring it whole. With fewer cores than ranks the ranks share them."),
        ("gpu", "GPU suites", "`bench_gpu`: the quantization stages on the device."),
        ("link", "Where compression pays: behind a shaped link",
         "`link_bench.py`: a one-OSD cluster of its own in a network namespace, reached through a veth pair "
         "(link-local addresses) that `tc` shapes to each rate both ways. At each rate a `rados bench` write and "
         "read of 4 MiB objects, then `bench_store --save-only` in pairs: the checkpoints saved through rckpt "
         "and the same fp32 bytes written raw through the same layout, the last step restored and read raw. "
         "A ratio above 1: rckpt is faster than moving the raw bytes."),
    ]
    for suite, title, text in sections:
        L.append("## " + title)
        L.append("")
        L.append(text)
        L.append("")
        st = status.get(suite)
        if st is None:
            L.append("Not run (give --link RATES)." if suite == "link" else "Not run (not in --suites).")
            L.append("")
            continue
        if not st.startswith("ok"):
            L.append("**%s**" % st)
            L.append("")
        if suite == "save":
            table("save")
            img("save_stall", "trainer stall per save")
        elif suite == "compression":
            comp = data.get("compression")
            if comp:
                L.append("| method | ratio over the run | per checkpoint min | max | encode MB/s |")
                L.append("|---|---:|---:|---:|---:|")
                for n, rows in comp.items():
                    r = [x["ratio"] for x in rows]
                    L.append("| %s | %.1fx | %.1fx | %.1fx | %.0f |" % (
                        n, sum(x["raw"] for x in rows) / sum(x["enc"] for x in rows), min(r), max(r),
                        statistics.median(x["mbs"] for x in rows)))
                L.append("")
            img("compression_per_checkpoint", "ratio per checkpoint")
            img("compression_overall", "overall ratio")
        elif suite == "frontier":
            table("frontier")
            fr = data.get("frontier")
            if fr:
                L.append("| method | eps | ratio over the run | last checkpoint | worst checkpoint |")
                L.append("|---|---:|---:|---:|---:|")
                for r in fr:
                    L.append("| %s | %g | %.1fx | %+.2f%% | %+.2f%% |" % (r["method"], r["eps"], r["ratio"],
                                                                      100 * r["last"], 100 * r["worst"]))
                L.append("")
            img("frontier", "ratio against real loss")
        elif suite == "restore":
            rs = data.get("restore")
            if rs:
                L.append("| chain | server-side ms | wire KB | after compaction ms | wire KB | client-side ms | wire KB |")
                L.append("|---:|---:|---:|---:|---:|---:|---:|")
                for r in rs:
                    L.append("| %d | %s | %.0f | %s | %.0f | %s | %.0f |" % (
                        r["chain"], fmt(r["server"]), r["server_wire"] / 1e3, fmt(r["comp"]),
                        r["comp_wire"] / 1e3, fmt(r["client"]), r["client_wire"] / 1e3))
                L.append("")
            m = [x for x in metrics if x["suite"] == "restore" and x["name"].startswith("OSD")]
            for x in m:
                L.append("%s (%d deltas): %s %s." % (x["name"], rs[-1]["chain"] if rs else 0, fmt(x), x["unit"]))
                L.append("")
            img("restore_vs_chain", "restore latency vs chain length")
        elif suite == "resume":
            table("resume")
            rs = data.get("resume")
            if rs:
                L.append("| model | chain | load_latest ms | / raw read | / torch.load | locate | fetch | decode "
                         "after | decode CPU | read into tensors |")
                L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
                for r in rs:
                    st = r.get("stages_ms", {})
                    L.append("| %gM %s | %d | %.1f | %.2fx | %.2fx | %.1f | %.1f | %.1f | %.1f | %.1f |" % (
                        r["size_m"], r["dtype"], r["chain"], statistics.median(r["ms"]["A"]),
                        statistics.median(r["A/B"]), statistics.median(r["A/C"]), st.get("t_locate", 0),
                        st.get("t_fetch", 0), st.get("t_decode", 0), st.get("decode_cpu", 0), st.get("t_read", 0)))
                L.append("")
            img("resume_vs_chain", "resume time against chain length")
        elif suite == "pcr":
            p = data.get("pcr")
            if p:
                b = p["build"]
                L.append("%d images, %.1f MB of JPEGs; stored as PCR: %.1f MB. One object per JPEG: %s images/s."
                         % (b["images"], b["src"] / 1e6, b["stored"] / 1e6, fmt(p["base"])))
                L.append("")
                L.append("| groups | MB read | / one object per JPEG | images/s | images/s / one object per JPEG "
                         "(1 thread) | decode Mpx/s / baseline JPEG | SSIM |")
                L.append("|---:|---:|---:|---:|---:|---:|---:|")
                for r in p["rows"]:
                    g = r["group"]
                    rd = find(metrics, "groups 1..%d: read + decode images/s / one object per JPEG, 1 thread" % g)
                    dc = find(metrics, "groups 1..%d: decode only Mpx/s / baseline JPEG, one core" % g)
                    L.append("| %d | %.2f | %.3f | %s | %s | %s | %.3f |" % (
                        g, r["bytes"] / 1e6, r["frac"], fmt(r["ips"]),
                        fmt(rd) if rd else "%.2f" % r["speedup"], fmt(dc), r["ssim"]))
                L.append("")
            img("pcr_groups", "PCR per scan group")
        else:
            table(suite)
            if suite == "loader":
                img("loader", "loader bytes per epoch")
    L.append("## Files")
    L.append("")
    L.append("`results.json` (every figure, with the data behind the plots), `results.csv` (one line per "
             "figure), `raw/` (each tool's output and command line). Compare two runs with "
             "`rckpt bench compare A B`.")
    L.append("")
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(L))


def load(path):
    p = os.path.join(path, "results.json") if os.path.isdir(path) else path
    try:
        with open(p) as f:
            r = json.load(f)
        return r["meta"], {(m["suite"], m["name"]): m for m in r["metrics"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit("rckpt bench compare: %s: not a benchmark result (%s)" % (path, e))


def compare(a, b):
    ma, A = load(a)
    mb, B = load(b)
    print("A: %s  (%s, %s)" % (a, ma.get("date", "?"), ma.get("command", "?")))
    print("B: %s  (%s, %s)" % (b, mb.get("date", "?"), mb.get("command", "?")))
    print()
    print("%-62s %-10s %12s %12s %8s" % ("measure", "unit", "A", "B", "B/A"))
    worse = 0
    for key in list(A) + [k for k in B if k not in A]:
        x, y = A.get(key), B.get(key)
        name = "%s: %s" % key
        va = "%.4g" % x["median"] if x else "-"
        vb = "%.4g" % y["median"] if y else "-"
        ratio, mark = "-", ""
        if x and y and x["median"]:
            r = y["median"] / x["median"]
            ratio = "%.3f" % r
            better = (x or y).get("better")
            # a change counts only outside both runs' spread
            apart = y["min"] > x["max"] or y["max"] < x["min"]
            if better and apart and abs(r - 1) > 0.05:
                good = (r > 1) == (better == "higher")
                mark = " better" if good else " WORSE"
                worse += not good
        print("%-62s %-10s %12s %12s %8s%s" % (name[:62], (x or y)["unit"][:10], va, vb, ratio, mark))
    print()
    print("%d measure(s) worse in B beyond both runs' spread and 5%%" % worse)
    return 0
