#!/usr/bin/python3
"""frontier.py — compression against real held-out loss, per method.

Every method of bench_codec (rckpt, its ablations, QD, Check-N-Run) runs over
a training run's checkpoints at each threshold of --eps (QD and Check-N-Run
search their bit width under it); every decoded step is evaluated on the
model's held-out data (bench/data/eval_checkpoint.py). A point of a method's
frontier is (real loss increase, ratio over the run) at one threshold; the
real loss is that of the last checkpoint ("last") or the worst checkpoint of
the run ("worst"). Methods are compared at equal real loss: for each loss
budget, the best ratio a method reaches with its last checkpoint within it.

    /usr/bin/python3 bench/codec/frontier.py --out /tmp/frontier              # the transformer run
    /usr/bin/python3 bench/codec/frontier.py --out /tmp/f20 --large           # its 22 Mi-parameter sibling
    /usr/bin/python3 bench/codec/frontier.py --out /tmp/f --ckpts DIR         # any run of make_*.py

Writes OUT/frontier.csv (one line per method and threshold), OUT/frontier.md
and, with python3-matplotlib, OUT/frontier.png.
"""
import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "data"))  # eval_checkpoint, make_*

METHODS = ["rckpt", "abl-uniform-bins", "abl-no-rearrange", "abl-magnitude-only", "qd", "checknrun"]
EPS = [0.0003, 0.0005, 0.0008, 0.0012, 0.002, 0.003, 0.005, 0.01, 0.02]
BUDGETS = [0.0025, 0.005, 0.01, 0.02]


# The runs frontier.py trains itself: (directory under --data, what it is,
# make_transformer.py's arguments).
RUNS = {
    "small": ("lm-adamw-frontier", "0.8 Mi parameters, 2000 steps, a checkpoint every 100",
              ["--steps", "2000", "--every", "100"]),
    "large": ("lm20", "22 Mi parameters (7 blocks of width 512), 400 steps, a checkpoint every 50; "
              "about 10 minutes on 2 cores",
              ["--steps", "400", "--every", "50", "--d-model", "512", "--n-layer", "7", "--n-head", "8",
               "--batch", "8"]),
}


def ensure_run(data, py, which="small"):
    sub, what, args = RUNS[which]
    d = os.path.join(data, sub)
    if os.path.exists(os.path.join(d, "model.json")):
        return d
    print(f"frontier: training the transformer (make_transformer.py, {what})", flush=True)
    subprocess.run([py, os.path.join(here, "..", "data", "make_transformer.py"), d] + args,
                   check=True, stdout=subprocess.DEVNULL)
    return d


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--out", required=True)
    ap.add_argument("--ckpts", default=None, help="a directory of checkpoints (default: the transformer run, "
                    "trained once into --data)")
    ap.add_argument("--data", default=None, help="where the default run is kept (default OUT/../rckpt-calib-data)")
    ap.add_argument("--large", action="store_true", help="without --ckpts: the larger transformer run ("
                    + RUNS["large"][1] + ")")
    ap.add_argument("--build", default=os.path.join(here, "..", "..", "build"))
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--eps", default=",".join(str(e) for e in EPS), help="thresholds swept")
    a = ap.parse_args()

    import eval_checkpoint as ev

    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    data = os.path.abspath(a.data or os.path.join(out, "..", "rckpt-calib-data"))
    if a.ckpts and a.large:
        sys.exit("frontier: --large trains its own run: give it or --ckpts, not both")
    ckdir = os.path.abspath(a.ckpts) if a.ckpts else ensure_run(data, sys.executable,
                                                                 "large" if a.large else "small")
    tool = os.path.join(a.build, "bench", "bench_codec")
    if not os.access(tool, os.X_OK):
        sys.exit(f"frontier: {tool} not found: build the project first")
    methods = [m for m in a.methods.split(",") if m]
    epss = [float(e) for e in a.eps.split(",") if e]
    names = sorted(f for f in os.listdir(ckdir) if f.startswith("step-") and f.count(".") == 1
                   and f.endswith(".safetensors"))
    meta = ev.model_meta(os.path.join(ckdir, names[0]))
    l0, keys = {}, {}
    for n in names:
        sd = ev.read_safetensors(os.path.join(ckdir, n))
        keys[n] = set(sd)
        l0[n] = ev.heldout_loss(sd, meta)
    rows = []
    t0 = time.time()
    for eps in epss:
        with tempfile.TemporaryDirectory() as tmp:
            r = subprocess.run([tool, "--eps", str(eps), "--methods", ",".join(methods), "--decode-dir", tmp, ckdir],
                               capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"frontier: bench_codec failed at eps {eps}: {r.stderr.strip()}")
            raw, enc = {}, {}
            for line in r.stdout.splitlines():
                if not line.startswith("csv:") or line.startswith("csv:method"):
                    continue
                f = line[4:].split(",")
                m = f[0]
                raw[m] = raw.get(m, 0) + int(f[2])
                enc[m] = enc.get(m, 0) + int(f[3])
            for m in methods:
                if m not in enc:
                    continue
                inc = [(ev.heldout_loss(model_state(ev, os.path.join(tmp, m, n), keys[n]), meta) - l0[n])
                       / l0[n] for n in names]
                rows.append({"method": m, "eps": eps, "ratio": raw[m] / enc[m], "last": inc[-1],
                             "worst": max(inc), "first": inc[0]})
        print(f"frontier: eps {eps}: " + ", ".join(f"{r['method']} {r['ratio']:.1f}x {r['last']:+.2%}"
                                                    for r in rows if r["eps"] == eps)
              + f" [{time.time() - t0:.0f} s]", flush=True)
    with open(os.path.join(out, "frontier.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["method", "eps", "ratio", "first", "last", "worst"])
        w.writeheader()
        w.writerows(rows)
    report(rows, methods, out, ckdir, len(names), a)


def model_state(ev, path, keys):
    """The model's tensors of a decoded step: bench_codec decodes what it
    saved, the model and, where the run has X.optim.safetensors beside it,
    the optimizer's state (exp_avg.NAME, exp_avg_sq.NAME) in the same file.
    Only the original's tensors are evaluated; one of them missing is an
    error, not a smaller model."""
    sd = ev.read_safetensors(path)
    missing = keys - set(sd)
    if missing:
        sys.exit(f"frontier: {path} lacks {len(missing)} of the model's tensors ({sorted(missing)[0]}, ...)")
    return {k: v for k, v in sd.items() if k in keys}


def best_at(rows, m, budget, key):
    ok = [r["ratio"] for r in rows if r["method"] == m and r[key] <= budget]
    return max(ok) if ok else None


def report(rows, methods, out, ckdir, n, a):
    lines = ["# Compression against real held-out loss", "",
             f"Checkpoints: {n} from {ckdir}. Ratio: fp32 bytes over stored bytes, over the run. "
             "Loss: relative increase of the held-out loss of the restored model.", "",
             ]
    for key, what in (("last", "Best ratio over the run whose last checkpoint is within the loss budget:"),
                      ("worst", "The same with every checkpoint of the run within the budget (worst checkpoint):")):
        lines += [what, "", "| method | " + " | ".join(f"<= {b:.2%}" for b in BUDGETS) + " |",
                  "|---|" + "---:|" * len(BUDGETS)]
        for m in methods:
            cells = [best_at(rows, m, b, key) for b in BUDGETS]
            lines.append(f"| {m} | " + " | ".join(f"{v:.1f}x" if v else "-" for v in cells) + " |")
        lines.append("")
    if "rckpt" in methods and "qd" in methods:
        lines += ["", "rckpt / QD at equal real loss (last checkpoint):", ""]
        for b in BUDGETS:
            r, q = best_at(rows, "rckpt", b, "last"), best_at(rows, "qd", b, "last")
            lines.append(f"- <= {b:.2%}: " + (f"{r / q:.2f}" if r and q else "n/a"))
    lines += ["", "Every point:", "", "| method | eps | ratio | first | last | worst |", "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['method']} | {r['eps']:g} | {r['ratio']:.1f} | {r['first']:+.2%} | {r['last']:+.2%} | "
                     f"{r['worst']:+.2%} |")
    lines += ["", f"reproduce: /usr/bin/python3 bench/codec/frontier.py --out OUT --ckpts {ckdir} --eps {a.eps} "
              f"--methods {a.methods}"]
    with open(os.path.join(out, "frontier.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines[:4 + 2 * len(methods) + 12]))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for m in methods:
        pts = sorted((r["last"], r["ratio"]) for r in rows if r["method"] == m)
        if pts:
            ax.plot([max(p[0] * 100, 1e-3) for p in pts], [p[1] for p in pts], marker="o", ms=3, label=m)
    ax.set_xscale("log")
    ax.set_xlabel("held-out loss increase of the last checkpoint, % (log)")
    ax.set_ylabel("compression ratio over the run")
    ax.axvline(1.0, color="k", lw=0.6)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "frontier.png"), dpi=110)


if __name__ == "__main__":
    main()
