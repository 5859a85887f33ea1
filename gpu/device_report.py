#!/usr/bin/env python3
"""device_report.py OUTDIR — gpu/device-check.sh's report: reads the steps
(steps.csv), bench_gpu's CSV lines (bench.log) and the baselines'
(baselines.log) from OUTDIR and writes OUTDIR/device-check.md, judged
against issue 31's goals, and OUTDIR/device-check.csv (every figure:
source,size,what,value,unit). The standard library alone."""
import csv
import os
import sys

GOALS = (
    ("end to end >= 65% of the device-to-device copy's bandwidth", "e2e", 0.65),
    ("thresholds >= 10x faster than sorting", "thr", 10.0),
    ("clustering >= 20x faster than 30 Lloyd iterations on the raw values", "km", 20.0),
)


def read_csv_lines(path, head, tail):
    """The 'csv,...' lines of a log, split into `head` fields, the name
    between (which may hold commas: bench_gpu's stage names do) and `tail`
    fields."""
    rows = []
    if not os.path.exists(path):
        return rows
    with open(path, errors="replace") as f:
        for line in f:
            # a line cut short (the program killed at its time limit) or
            # mixed with other output is left out
            if not line.startswith("csv,") or not line.endswith("\n"):
                continue
            parts = line.rstrip("\n").split(",")[1:]
            if len(parts) <= head + tail:
                continue
            row = (parts[:head] + [",".join(parts[head:len(parts) - tail])]
                   + parts[len(parts) - tail:])
            try:
                int(row[0])
                [float(x) for x in row[len(row) - tail:]]
            except ValueError:
                continue
            rows.append(row)
    return rows


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print(__doc__.split("\n\n")[0] if len(argv) == 2 else "usage: device_report.py OUTDIR",
              file=sys.stdout if len(argv) == 2 else sys.stderr)
        return 0 if len(argv) == 2 else 2
    out = argv[1]
    steps_path = os.path.join(out, "steps.csv")
    if not os.path.exists(steps_path):
        print("device_report.py: no %s" % steps_path, file=sys.stderr)
        return 1
    with open(steps_path) as f:
        steps = list(csv.DictReader(f))
    device = next((s["detail"] for s in steps if s["step"] == "device"), "unknown")
    figures = []  # (source, size, what, value, unit)
    bench = {}    # (size, stage) -> (ms, frac of copy)
    for n, stage, ms, gbs, frac in read_csv_lines(os.path.join(out, "bench.log"), 1, 3):
        bench[(int(n), stage)] = (float(ms), float(frac))
        figures.append(("bench_gpu", n, stage, ms, "ms"))
        if float(frac) > 0:
            figures.append(("bench_gpu", n, stage, frac, "fraction of copy bandwidth"))
    base = {}
    for n, tool, what, ms in read_csv_lines(os.path.join(out, "baselines.log"), 2, 1):
        base[(int(n), tool, what)] = float(ms)
        figures.append((tool, n, what, ms, "ms"))

    sizes = sorted({n for n, _ in bench})
    judged = {}  # goal key -> list of (size, value)
    for n in sizes:
        def ms(stage):
            return bench.get((n, stage), (None, None))[0]
        e2e = bench.get((n, "END TO END quantize (no gradients)"))
        if e2e:
            judged.setdefault("e2e", []).append((n, e2e[1]))
        ours = [ms("sketch |w|"), ms("thresholds from histogram (device)")]
        if None not in ours and ms("thresholds by sort (baseline)"):
            judged.setdefault("thr", []).append((n, ms("thresholds by sort (baseline)") / sum(ours)))
        if ms("k-means on raw values, 30 it (baseline)") and ms("histogram to host + k-means (host)"):
            judged.setdefault("km", []).append(
                (n, ms("k-means on raw values, 30 it (baseline)") / ms("histogram to host + k-means (host)")))
    for key, vals in judged.items():
        for n, v in vals:
            figures.append(("goal", str(n), key, "%.4f" % v, "ratio"))

    with open(os.path.join(out, "device-check.csv"), "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(("source", "size", "what", "value", "unit"))
        w.writerows(figures)

    md = ["# GPU device check", "", "Device: %s" % device, ""]
    md += ["## Steps", "", "| step | status | seconds | detail |", "| --- | --- | ---: | --- |"]
    md += ["| %s | %s | %s | %s |" % (s["step"], s["status"], s["seconds"], s["detail"].replace("|", "/"))
           for s in steps]
    parity = next((s for s in steps if s["step"] == "parity"), None)
    md += ["", "## Goals (issue 31)", "", "| goal | " + "".join("%d | " % n for n in sizes) + "met |",
           "| --- |" + " ---: |" * len(sizes) + " --- |"]
    for text, key, want in GOALS:
        vals = dict(judged.get(key, []))
        cells = ["%.0f%%" % (100 * vals[n]) if key == "e2e" and n in vals else
                 ("%.1fx" % vals[n] if n in vals else "—") for n in sizes]
        met = "—" if not vals else ("yes" if all(v >= want for v in vals.values()) else "no")
        md.append("| %s | %s%s |" % (text, "".join(c + " | " for c in cells), met))
    md.append("| records byte-identical to the CPU path (test_gpu_parity) | %s%s |"
              % ("".join(" | " for _ in sizes), {"ok": "yes", "fail": "NO", "incomplete": "not all cases ran"}.get(
                  parity["status"] if parity else "", "not run")))
    if base:
        md += ["", "## Framework baselines (ms, medians)", "", "| size | tool | what | ms |",
               "| ---: | --- | --- | ---: |"]
        md += ["| %d | %s | %s | %.3f |" % (n, t, w_, v) for (n, t, w_), v in sorted(base.items())]
    if bench:
        md += ["", "## bench_gpu (ms, medians; fraction of the copy's bandwidth)", "",
               "| size | stage | ms | of copy |", "| ---: | --- | ---: | ---: |"]
        md += ["| %d | %s | %.3f | %s |" % (n, st.replace("|", "\\|"), v[0], "%.0f%%" % (100 * v[1]) if v[1] > 0 else "")
               for (n, st), v in sorted(bench.items())]
    if not bench and not base:
        md += ["", "No figures: %s." % next((s["detail"] for s in steps if s["step"] == "bench"), "not run")]
    with open(os.path.join(out, "device-check.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
