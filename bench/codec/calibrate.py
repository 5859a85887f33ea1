#!/usr/bin/python3
"""calibrate.py — does the codec's quality measure predict the model's real loss?

For each model of the suite (MLP and CNN on scikit-learn's digits, a small
transformer language model on Python's standard library source; SGD, Adam
and AdamW) it trains the model once (kept in DATA), takes checkpoints early,
mid and late in training, quantizes each under many configurations of the
search space (build/bench/calib_quant), restores it, and evaluates the
restored model's held-out loss (bench/data/eval_checkpoint.py). Beside the real
relative loss increase it computes candidate quality measures from the same
tensors, and reports for each measure:

  * the safe threshold: the largest t such that every configuration whose
    measure is <= t raised the real held-out loss by at most --bound
    (default 1%), on every model;
  * the compression the search would reach at that threshold: per checkpoint,
    the smallest base among the configurations the measure accepts.

Writes OUT/calibration.csv (one line per checkpoint and configuration),
OUT/summary.md and, with python3-matplotlib, OUT/calibration.png (measure
against real loss, one panel per measure).

    /usr/bin/python3 bench/codec/calibrate.py --out /tmp/calib            # the whole suite
    /usr/bin/python3 bench/codec/calibrate.py --out /tmp/calib --quick    # fewer configs
"""
import argparse
import csv
import itertools
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "data"))  # eval_checkpoint, make_*

# The suite: name -> (maker, arguments). Each is trained once into DATA/name.
SUITE = {
    "digits-cnn-adam": ("make_checkpoints.py", ["--arch", "cnn", "--optim", "adam", "--steps", "600", "--every", "100"]),
    "digits-mlp-sgd": ("make_checkpoints.py", ["--arch", "mlp", "--optim", "sgd", "--steps", "600", "--every", "100"]),
    "digits-mlp-adamw": ("make_checkpoints.py", ["--arch", "mlp", "--optim", "adamw", "--steps", "600", "--every", "100"]),
    "lm-adamw": ("make_transformer.py", ["--optim", "adamw", "--steps", "2000", "--every", "200"]),
    "lm-sgd": ("make_transformer.py", ["--optim", "sgd", "--steps", "2000", "--every", "200"]),
}

BINS = [4, 6, 8, 12, 16, 24, 32, 48, 64]
PRUNE = [0.0, 0.1, 0.2, 0.3, 0.5]
METRIC = ["mag", "sens"]
PROTECT = [0.0005, 0.005, 0.01]
EMB = [16, 32, 64]


def configs(quick, seed):
    """The configurations tried on every checkpoint: a fixed random sample
    of the search space, always with its corners."""
    cube = list(itertools.product(BINS, EMB, PRUNE, METRIC, PROTECT))
    rng = random.Random(seed)
    pick = rng.sample(cube, 24 if quick else 72)
    for c in [(4, 16, 0.5, "sens", 0.0005), (32, 32, 0.0, "mag", 0.01), (16, 32, 0.1, "mag", 0.005),
              (32, 32, 0.3, "sens", 0.005), (8, 16, 0.0, "mag", 0.005), (64, 64, 0.0, "mag", 0.01),
              (48, 64, 0.1, "sens", 0.005)]:
        if c not in pick:
            pick.append(c)
    return [f"bins={b} emb={e} prune={p} metric={m} protect={q}" for b, e, p, m, q in pick]


def ensure_model(data, name, py):
    maker, args = SUITE[name]
    d = os.path.join(data, name)
    if os.path.exists(os.path.join(d, "model.json")) and any(f.endswith(".grads.safetensors") for f in os.listdir(d)):
        return d
    t0 = time.time()
    print(f"calibrate: training {name} ({maker} {' '.join(args)})", flush=True)
    subprocess.run([py, os.path.join(here, "..", "data", maker), d, "--grads", "both"] + args, check=True,
                   stdout=subprocess.DEVNULL)
    print(f"calibrate: {name} trained in {time.time() - t0:.0f} s", flush=True)
    return d


def steps_of(d):
    return sorted(f[:-len(".safetensors")] for f in os.listdir(d)
                  if f.startswith("step-") and f.count(".") == 1 and f.endswith(".safetensors"))


def measures(orig, deq, grms, gmean, vopt):
    """Candidate measures over the quantized tensors (2-D and up).

    d = w - r per element; F a diagonal Fisher estimate: the gradient RMS
    squared (F_rms) or Adam's exp_avg_sq (F_adam) when there is one; gmean the
    old signed gradient EMA.
    """
    import torch

    out = {}
    num = {"old": 0.0, "Frms": 0.0, "Fadam": 0.0, "u": 0.0}
    den = {"old": 0.0, "Frms": 0.0, "Fadam": 0.0, "u": 0.0}
    per_u, per_F, per_Fd, ns = [], [], [], []
    obd = 0.0
    for name, w in orig.items():
        if w.dim() < 2:
            continue
        w = w.double()
        d = w - deq[name].double()
        d2, w2 = d * d, w * w
        n = w.numel()
        gm = gmean[name].double() if gmean is not None else None
        F = grms[name].double() ** 2 if grms is not None else None
        if gm is not None:
            num["old"] += float((gm * gm * d2).sum())
            den["old"] += float((gm * gm * w2).sum())
        if F is not None:
            num["Frms"] += float((F * d2).sum())
            den["Frms"] += float((F * w2).sum())
            obd += 0.5 * float((F * d2).sum())
            # damped: a floor of 10% of the tensor's mean Fisher, so that an
            # element whose few sampled gradients happened to be small is not
            # free to destroy
            for rho in (0.01, 0.03, 0.1, 0.3):
                Fr = F + rho * float(F.mean())
                num["Fd%g" % rho] = num.get("Fd%g" % rho, 0.0) + float((Fr * d2).sum())
                den["Fd%g" % rho] = den.get("Fd%g" % rho, 0.0) + float((Fr * w2).sum())
            Fd = F + 0.1 * float(F.mean())
            per_Fd.append(float((Fd * d2).sum()) / max(float((Fd * w2).sum()), 1e-300))
            per_F.append(float((F * d2).sum()) / max(float((F * w2).sum()), 1e-300))
        if vopt is not None and ("exp_avg_sq." + name) in vopt:
            v = vopt["exp_avg_sq." + name].double()
            num["Fadam"] += float((v * d2).sum())
            den["Fadam"] += float((v * w2).sum())
        num["u"] += float(d2.sum())
        den["u"] += float(w2.sum())
        per_u.append(float(d2.sum()) / max(float(w2.sum()), 1e-300))
        ns.append(n)
    for k in num:
        if den[k] > 0:
            out["global_" + k] = num[k] / den[k]
    tot = sum(ns)
    out["tmax_u"] = max(per_u)
    out["tmean_u"] = sum(p * n for p, n in zip(per_u, ns)) / tot
    if per_F:
        out["tmax_F"] = max(per_F)
        out["tmean_F"] = sum(p * n for p, n in zip(per_F, ns)) / tot
        out["tmax_Fd"] = max(per_Fd)
        out["tmean_Fd"] = sum(p * n for p, n in zip(per_Fd, ns)) / tot
        out["obd_abs"] = obd
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--out", required=True, help="directory for calibration.csv, summary.md, calibration.png")
    ap.add_argument("--data", default=None, help="where the suite's models are trained and kept (default OUT/../rckpt-calib-data)")
    ap.add_argument("--build", default=os.path.join(here, "..", "..", "build"), help="the build folder (calib_quant)")
    ap.add_argument("--models", default=",".join(SUITE), help="comma-separated subset of: " + ", ".join(SUITE))
    ap.add_argument("--bound", type=float, default=0.01, help="real loss increase judged safe (default 0.01 = 1%%)")
    ap.add_argument("--quick", action="store_true", help="24 configurations a checkpoint instead of 72")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--search-eps", default="0", help="comma-separated eps values at which the codec's own "
                    "search is run on each checkpoint (0: the default eps; default '0')")
    a = ap.parse_args()
    a.search_eps = [float(x) for x in a.search_eps.split(",") if x != ""]

    import torch
    import eval_checkpoint as ev

    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    py = sys.executable
    out = os.path.abspath(a.out)
    data = os.path.abspath(a.data or os.path.join(out, "..", "rckpt-calib-data"))
    os.makedirs(out, exist_ok=True)
    os.makedirs(data, exist_ok=True)
    tool = os.path.join(a.build, "bench", "calib_quant")
    if not os.access(tool, os.X_OK):
        sys.exit(f"calibrate: {tool} not found: build the project first")
    models = [m for m in a.models.split(",") if m]
    for m in models:
        if m not in SUITE:
            ap.error(f"unknown model {m}")
    cfgs = configs(a.quick, a.seed)
    rckpt = os.path.join(a.build, "client", "rckpt")
    rows, searched = [], []
    t0 = time.time()
    for m in models:
        d = ensure_model(data, m, py)
        steps = steps_of(d)
        picks = {"early": steps[0], "mid": steps[len(steps) // 2], "late": steps[-1]}
        for phase, st in picks.items():
            base = os.path.join(d, st)
            orig = ev.read_safetensors(base + ".safetensors")
            grms = ev.read_safetensors(base + ".grads.safetensors")
            gmean = ev.read_safetensors(base + ".gmean.safetensors") if os.path.exists(base + ".gmean.safetensors") else None
            vopt = ev.read_safetensors(base + ".optim.safetensors") if os.path.exists(base + ".optim.safetensors") else None
            meta = ev.model_meta(base + ".safetensors")  # decoded files have no model.json beside them
            l0 = ev.heldout_loss(base + ".safetensors", meta)
            with tempfile.TemporaryDirectory() as tmp:
                # the codec's own measure as it is now: gradients as the trainer hands them
                r = subprocess.run([tool, "--grads", base + ".grads.safetensors", "-o", tmp, base + ".safetensors"],
                                   input="\n".join(cfgs) + "\n", capture_output=True, text=True)
                if r.returncode != 0:
                    sys.exit(f"calibrate: calib_quant failed on {base}: {r.stderr.strip()}")
                for line in r.stdout.splitlines():
                    if not line.startswith("csv:"):
                        continue
                    i, nbytes, raw, q, cfg = line[4:].split(",", 4)
                    f = os.path.join(tmp, f"cfg-{int(i):04d}.safetensors")
                    deq = ev.read_safetensors(f)
                    loss = ev.heldout_loss(f, meta)
                    row = {"model": m, "phase": phase, "step": st, "config": cfg, "bytes": int(nbytes),
                           "raw": int(raw), "ratio": int(raw) / int(nbytes), "loss0": l0, "loss": loss,
                           "real": (loss - l0) / l0, "codec": float(q)}
                    row.update(measures(orig, deq, grms, gmean, vopt))
                    rows.append(row)
            # what the codec's search picks by itself for this checkpoint
            # saved alone (a base), at the default eps and at --eps values
            for eps in a.search_eps:
                with tempfile.TemporaryDirectory() as tmp:
                    cmd = [rckpt, "codec", "encode", "-o", tmp, base + ".safetensors"]
                    if eps:
                        cmd[3:3] = ["--eps", str(eps)]
                    r = subprocess.run(cmd, capture_output=True, text=True)
                    if r.returncode != 0:
                        sys.exit(f"calibrate: rckpt codec encode failed on {base}: {r.stderr.strip()}")
                    line = r.stdout.splitlines()[0]
                    out_f = os.path.join(tmp, "dec.safetensors")
                    subprocess.run([rckpt, "codec", "decode", "-o", out_f, os.path.join(tmp, st + ".rckpt")],
                                   check=True, capture_output=True)
                    loss = ev.heldout_loss(out_f, meta)
                    cfg = line.split(", ", 1)[1].split(" -> ")[0].replace("base, ", "")
                    searched.append({"model": m, "phase": phase, "step": st, "eps": eps or "default",
                                     "config": cfg, "ratio": float(line.split("(")[1].split("x")[0]),
                                     "real": (loss - l0) / l0})
            print(f"calibrate: {m} {phase} ({st}): {len(cfgs)} configurations, loss0 {l0:.4f} "
                  f"[{time.time() - t0:.0f} s]", flush=True)
    keys = sorted({k for r in rows for k in r})
    lead = ["model", "phase", "step", "config", "bytes", "raw", "ratio", "loss0", "loss", "real", "codec"]
    cols = lead + [k for k in keys if k not in lead]
    with open(os.path.join(out, "calibration.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for r in rows:
            w.writerow(r)
    summarize(rows, cols[len(lead) - 1:], a.bound, out, models, searched)
    print(f"calibrate: wrote {out}/calibration.csv and {out}/summary.md [{time.time() - t0:.0f} s]")


def summarize(rows, meas, bound, out, models, searched):
    """Safe threshold and reachable compression for each measure."""
    lines = ["# Quality measure against real held-out loss", "",
             f"Safe threshold: the largest t such that every configuration with measure <= t "
             f"raised the held-out loss by at most {bound:.1%}, over all models. "
             "Ratio: per checkpoint, the best base ratio among configurations the measure accepts "
             "at that threshold (geometric mean over checkpoints; 'worst' the checkpoint with the least).", "",
             "| measure | safe threshold | ratio (geo-mean) | worst | Spearman vs real |", "|---|---:|---:|---:|---:|"]
    groups = {}
    for r in rows:
        groups.setdefault((r["model"], r["phase"]), []).append(r)
    res = {}
    for k in meas:
        pts = [r for r in rows if k in r]
        if len(pts) < len(rows):
            continue
        bad = [r[k] for r in pts if r["real"] > bound]
        thr = min(bad) * 0.999 if bad else max(r[k] for r in pts)
        ratios = []
        for g in groups.values():
            ok = [r["ratio"] for r in g if r[k] <= thr]
            ratios.append(max(ok) if ok else 1.0)
        geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        res[k] = (thr, geo, min(ratios), spearman([r[k] for r in pts], [r["real"] for r in pts]))
    for k, (thr, geo, worst, rho) in sorted(res.items(), key=lambda kv: -kv[1][1]):
        lines.append(f"| {k} | {thr:.3g} | {geo:.2f} | {worst:.2f} | {rho:.2f} |")
    lines += ["", "Per model, the safe threshold of each measure:", "",
              "| measure | " + " | ".join(models) + " |", "|---|" + "---:|" * len(models)]
    for k in res:
        cells = []
        for m in models:
            bad = [r[k] for r in rows if r["model"] == m and r["real"] > bound]
            cells.append(f"{min(bad):.3g}" if bad else "none over")
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    lines += ["", "The codec's own search on each checkpoint saved alone (a base), and the real loss "
              "of the result:", "", "| model | phase | eps | configuration chosen | base ratio | real loss increase |",
              "|---|---|---|---|---:|---:|"]
    for r in searched:
        lines.append(f"| {r['model']} | {r['phase']} | {r['eps']} | {r['config']} | {r['ratio']:.1f} | "
                     f"{r['real']:+.2%} |")
    for eps in sorted({r["eps"] for r in searched}, key=str):
        worst = max((r for r in searched if r["eps"] == eps), key=lambda r: r["real"])
        lines += ["", f"Worst at eps {eps}: {worst['real']:+.2%} ({worst['model']} {worst['phase']}); "
                  f"bound {bound:.1%}: {'held' if worst['real'] <= bound else 'NOT held'}."]
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    ks = list(res)
    ncol = 4
    nrow = (len(ks) + ncol - 1) // ncol
    fig, axs = plt.subplots(nrow, ncol, figsize=(4 * ncol, 3.2 * nrow), squeeze=False)
    colors = {m: c for m, c in zip(models, ["C0", "C1", "C2", "C3", "C4", "C5", "C6"])}
    for ax, k in zip(axs.flat, ks):
        for m in models:
            xs = [max(r[k], 1e-9) for r in rows if r["model"] == m]
            ys = [max(r["real"] * 100, 1e-3) for r in rows if r["model"] == m]
            ax.scatter(xs, ys, s=6, color=colors[m], label=m)
        ax.axhline(bound * 100, color="k", lw=0.6)
        ax.axvline(max(res[k][0], 1e-9), color="r", lw=0.6)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(k, fontsize=9)
        ax.set_xlabel("measure", fontsize=8)
        ax.set_ylabel("real loss increase, %", fontsize=8)
    for ax in list(axs.flat)[len(ks):]:
        ax.axis("off")
    axs.flat[0].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "calibration.png"), dpi=110)


def spearman(x, y):
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        for pos, i in enumerate(order):
            r[i] = pos
        return r
    rx, ry = ranks(x), ranks(y)
    n = len(x)
    mx, my = sum(rx) / n, sum(ry) / n
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx = math.sqrt(sum((a - mx) ** 2 for a in rx))
    vy = math.sqrt(sum((b - my) ** 2 for b in ry))
    return cov / (vx * vy) if vx and vy else 0.0


if __name__ == "__main__":
    main()
