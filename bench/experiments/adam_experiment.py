#!/usr/bin/python3
"""Fault-tolerant AdamW training with rckpt: Adam's state compressed too.

A converging byte-level transformer (bench/data/make_transformer.py's model: a
pre-LayerNorm decoder on Debian's own Python source, AdamW with weight
decay on the matrices, gradient clipping, a warm-up then a cosine to zero)
trained the same way, same seed, four ways:

  none            no failures; every checkpoint saved into rckpt (weights
                  and Adam's state compressed): the ratio over the run
  rckpt           10 failures evenly spaced, each restoring the latest
                  checkpoint from rckpt, weights and Adam's state compressed
  rckpt-adam-ll   the same with Adam's state lossless (optimizer_state=
                  "lossless"): the weights alone compressed
  torch           10 failures restored from torch.save checkpoints

Each step's batch depends only on (seed, step), so a replayed step sees the
batch it saw before and the torch run ends where the no-failure run ends.

The end of a cosine schedule heals transient damage, so the no-failure run
also resumes from its compressed checkpoint at peak learning rate (the end
of the warm-up) and in the last 5% of training, beside the exact state, for
50 steps on the same batches, three ways: weights and Adam's state both
restored from rckpt ("all"), exact weights with Adam's state from rckpt
("adam": Adam's damage alone), and, for the baselines, exact weights with
Adam's state quantized QD-style (uniform over each tensor's range) and
Check-N-Run-style (uniform asymmetric per row), at the fewest bits whose
update error is no larger than rckpt's. Reported per resume: the ratio of
the first update's norm to the exact resume's, per tensor (worst), and the
worst excess training loss over the 50 steps.

    export CEPH_CONF=$PWD/build/cluster/ceph.conf
    /usr/bin/python3 bench/experiments/adam_experiment.py                   # 3 seeds (the issue's run)
    /usr/bin/python3 bench/experiments/adam_experiment.py --short           # 1 seed, a short run
    /usr/bin/python3 bench/experiments/adam_experiment.py --frontier 0.01,0.05,0.004:0.05 --seeds 1

--frontier trains once, without failures, and saves every checkpoint under
each setting EPS:OPT_EPS (the weights' threshold and the update error's; a
bare OPT_EPS keeps the weights' default) into a job of its own; at peak
learning rate and late it resumes from each beside the exact state, as
above, and also reports the held-out loss of each restored model against
the exact model's.
"""
import argparse
import copy
import io
import json
import math
import os
import statistics
import subprocess
import sys
import time

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "data"))  # eval_checkpoint, make_*
sys.path.insert(0, os.path.join(here, "..", "..", "client", "python"))
import make_transformer as mt  # noqa: E402
try:
    import rckpt  # noqa: E402
except ImportError as _missing:  # --help works without the library
    rckpt, _rckpt_missing = None, _missing

RESUME_STEPS = 50


def torch_bytes(obj):
    b = io.BytesIO()
    torch.save(obj, b)
    return b.getvalue()


class LM:
    """One training run's model, optimizer and step; batches by (seed, step)."""

    def __init__(self, a, seed):
        self.a, self.seed = a, seed
        torch.manual_seed(seed)
        self.cfg = {"d_model": a.d_model, "n_layer": a.n_layer, "n_head": a.n_head, "ctx": a.ctx}
        self.net = mt.build(self.cfg)
        named = dict(self.net.named_parameters())
        emb = ("tok_emb.weight", "wpe.weight")
        decay = [p for n, p in named.items() if p.dim() == 2 and n not in emb]
        rest = [p for n, p in named.items() if p.dim() != 2 or n in emb]
        self.opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                      {"params": rest, "weight_decay": 0.0}],
                                     lr=a.lr, betas=(0.9, 0.95))
        for group in self.opt.param_groups:
            group["initial_lr"] = a.lr  # what torch's LR schedulers set: eps_schedule="lr" reads it
        self.step = 0

    def batch(self, step):
        train = mt.corpus(self.a.corpus_bytes)[0]
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + step)
        starts = torch.randint(0, len(train) - self.a.ctx - 1, (self.a.batch,), generator=g)
        return torch.stack([train[s:s + self.a.ctx + 1] for s in starts.tolist()])

    def train_step(self):
        self.step += 1
        lr = self.a.lr * mt.lr_factor(self.step, self.a.steps, self.a.warmup)
        for group in self.opt.param_groups:
            group["lr"] = lr
        w = self.batch(self.step)
        self.opt.zero_grad(set_to_none=True)
        loss = mt.loss_on(self.net, w[:, :-1], w[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.net.parameters(), 1.0)
        self.opt.step()
        return float(loss)

    def heldout(self):
        held = mt.corpus(self.a.corpus_bytes)[1]
        ex, ey = mt.eval_windows(held, self.a.ctx)
        self.net.eval()
        with torch.no_grad():
            v = float(mt.loss_on(self.net, ex, ey))
        self.net.train()
        return v

    def clone_from(self, model_sd, opt_sd, step):
        t = LM(self.a, self.seed)
        t.net.load_state_dict(model_sd)
        t.opt.load_state_dict(opt_sd)
        t.step = step
        return t


# ---- the optimizer state's measures and baselines ----

def adam_pairs(opt_sd):
    """(pid, exp_avg, exp_avg_sq, eps_eff) of an AdamW state_dict, eps with
    the bias correction folded in (the update is m / (sqrt(v) + eps_eff)
    up to a factor common to the exact and the restored state)."""
    out = []
    for g in opt_sd["param_groups"]:
        for pid in g["params"]:
            st = opt_sd["state"].get(pid)
            if not st or "exp_avg" not in st:
                continue
            t = float(st["step"])
            out.append((pid, st["exp_avg"], st["exp_avg_sq"],
                        g["eps"] * math.sqrt(1 - g["betas"][1] ** t)))
    return out


def update_error(exact_sd, got_sd):
    """sum (u' - u)^2 / sum u^2 over every parameter."""
    got = {pid: (m, v) for pid, m, v, _ in adam_pairs(got_sd)}
    num = den = 0.0
    for pid, m, v, eps in adam_pairs(exact_sd):
        u = m.double() / (v.double().sqrt() + eps)
        m2, v2 = got[pid]
        u2 = m2.double() / (v2.double().clamp_min(0).sqrt() + eps)
        num += float((u2 - u).pow(2).sum())
        den += float(u.pow(2).sum())
    return num / den


def quantize_uniform(t, bits, rows):
    """t quantized uniformly with 2^bits levels over each row's [min, max]
    (rows: the whole tensor as one row when False); its bytes as stored:
    the codes at `bits` each, and two fp32 per row."""
    x = t.float().reshape(t.shape[0], -1) if rows and t.dim() > 1 else t.float().reshape(1, -1)
    lo, hi = x.min(1, keepdim=True).values, x.max(1, keepdim=True).values
    scale = (hi - lo).clamp_min(1e-30) / (2 ** bits - 1)
    q = ((x - lo) / scale).round().clamp(0, 2 ** bits - 1)
    return (q * scale + lo).reshape(t.shape), math.ceil(x.numel() * bits / 8) + 8 * x.shape[0]


def baseline_state(opt_sd, kind, bits):
    """opt_sd with exp_avg and exp_avg_sq quantized QD-style (kind "qd":
    each tensor uniform over its range) or Check-N-Run-style ("cnr": per
    row, asymmetric), and the state's bytes."""
    sd = copy.deepcopy(opt_sd)
    total = 0
    for st in sd["state"].values():
        for key in ("exp_avg", "exp_avg_sq"):
            q, nb = quantize_uniform(st[key], bits, kind == "cnr")
            st[key] = q.clamp_min(0) if key == "exp_avg_sq" else q
            total += nb
    return sd, total


def zstd_bytes(opt_sd):
    raw = b"".join(st[k].float().numpy().tobytes() for st in opt_sd["state"].values()
                   for k in ("exp_avg", "exp_avg_sq"))
    try:
        return len(subprocess.run(["zstd", "-3", "-c"], input=raw, capture_output=True,
                                  check=True).stdout), len(raw)
    except (OSError, subprocess.CalledProcessError):
        return None, len(raw)


def resume_compare(exact, variants, steps):
    """50 steps from the exact state and from each variant (name -> LM),
    the same batches: per variant the worst per-tensor ratio of the first
    update's norm to the exact one's (max(r, 1/r)), the median one, and the
    worst relative excess of the training loss."""
    before = {n: p.detach().clone() for n, p in exact.net.named_parameters()}
    vb = {k: {n: p.detach().clone() for n, p in v.net.named_parameters()} for k, v in variants.items()}
    losses = {"exact": []}
    first = {}
    for k in range(steps):
        losses["exact"].append(exact.train_step())
        if k == 0:
            first["exact"] = {n: (p.detach() - before[n]).norm() for n, p in exact.net.named_parameters()}
        for name, v in variants.items():
            losses.setdefault(name, []).append(v.train_step())
            if k == 0:
                first[name] = {n: (p.detach() - vb[name][n]).norm() for n, p in v.net.named_parameters()}
    out = {}
    for name in variants:
        rs = []
        for n, e in first["exact"].items():
            if float(e) > 0:
                r = float(first[name][n] / e)
                rs.append((max(r, 1 / r) if r > 0 else float("inf"), n, r))
        rs.sort()
        excess = [(lv - le) / le for lv, le in zip(losses[name], losses["exact"])]
        out[name] = {"worst_norm_ratio": rs[-1][2], "worst_tensor": rs[-1][1],
                     "median_norm_ratio": statistics.median(r for _, _, r in rs),
                     "worst_excess_loss": max(excess), "mean_excess_loss": statistics.mean(excess)}
    return out


# ---- one run ----

def run(a, seed, mode, job, opt_eps=None):
    """mode: none, rckpt, rckpt-adam-ll, torch."""
    t = LM(a, seed)
    fail_at = set()
    if mode != "none":
        fail_at = {round(a.steps * (i + 1) / (a.failures + 1)) for i in range(a.failures)}
    failed, saves, resumes = set(), [], {}
    ck, handle, local = None, None, None
    torch_sizes, replayed, eps_used = [], 0, []
    resume_at = {"peak": a.warmup - a.warmup % a.every or a.every,
                 "late": a.steps - a.steps // 20 - (a.steps - a.steps // 20) % a.every}

    def open_ck():
        return rckpt.Checkpointer(a.pool, job, a.conf, eps=a.eps, opt_eps=opt_eps,
                                  optimizer_state="lossless" if mode == "rckpt-adam-ll" else "quantize",
                                  eps_schedule=a.eps_schedule, eps_min=a.eps_min)

    if mode != "torch":
        rckpt.Checkpointer.delete(a.pool, job, a.conf)
        ck = open_ck()
    t0 = time.perf_counter()
    tick = max(1, a.steps // 10)
    while t.step < a.steps:
        loss = t.train_step()
        if t.step % tick == 0:
            print("  seed %d %s: step %d/%d, loss %.4f, %.0f s"
                  % (seed, mode, t.step, a.steps, loss, time.perf_counter() - t0), flush=True)
        if t.step % a.every == 0 or t.step == a.steps:
            if mode == "torch":
                local = (t.step, torch_bytes({"model": t.net.state_dict(), "opt": t.opt.state_dict()}))
            else:
                if handle is not None:
                    saves.append(handle.wait())
                eps_used.append((t.step, ck.save_eps(t.opt, t.step)))
                handle = ck.save(t.step, t.net.state_dict(), optimizer=t.opt)
                torch_sizes.append(len(torch_bytes({"model": t.net.state_dict(), "opt": t.opt.state_dict()})))
                if mode == "none":
                    for which, s in resume_at.items():
                        if s == t.step:
                            saves.append(handle.wait())
                            handle = None
                            resumes[which] = resume_tests(a, t, ck, s)
        if t.step in fail_at and t.step not in failed:
            failed.add(t.step)
            nt = LM(a, seed)
            if mode == "torch":
                if local is not None:  # else nothing saved yet: start over, as a trainer would
                    st = torch.load(io.BytesIO(local[1]))
                    nt = t.clone_from(st["model"], st["opt"], local[0])
            else:
                if handle is not None:
                    saves.append(handle.wait())  # committed before the crash
                    handle = None
                ck.close()
                ck = open_ck()
                if saves:
                    r = ck.restore_into(nt.net, optimizer=nt.opt)
                    nt.step = r.step
            replayed += t.step - nt.step
            t = nt
    if handle is not None:
        saves.append(handle.wait())
    if ck is not None:
        ck.close()
    out = {"mode": mode, "seed": seed, "heldout": t.heldout(), "wall_s": time.perf_counter() - t0,
           "failures": len(failed), "replayed": replayed, "opt_eps": opt_eps}
    if mode != "torch":
        enc = sum(s.enc_bytes for s in saves)
        oenc = sum(s.opt_enc_bytes for s in saves)
        out.update(saves=len(saves), enc_bytes=enc, opt_enc_bytes=oenc,
                   opt_quality=[s.opt_quality for s in saves], ratio=sum(torch_sizes) / enc,
                   eps_used=eps_used)
    if mode == "none":
        tb = sum(torch_sizes)
        pn = sum(p.numel() for p in t.net.parameters())
        out.update(torch_bytes=tb,
                   weights_ratio=(len(saves) * 4 * pn) / (out["enc_bytes"] - out["opt_enc_bytes"]),
                   adam_ratio=(len(saves) * 8 * pn) / out["opt_enc_bytes"], resumes=resumes)
    if mode != "torch":
        rckpt.Checkpointer.delete(a.pool, job, a.conf)
    return out


def frontier_run(a, seed, settings, tag):
    """One training run without failures, each checkpoint saved under every
    setting (eps, opt_eps) into a job of its own: per setting the ratio over
    the run and, at peak learning rate and late, the damage of resuming from
    it (weights and Adam's state from rckpt, "all"; exact weights and Adam's
    state from rckpt, "adam"), beside one exact resume on the same batches."""
    t = LM(a, seed)
    jobs = ["%s-%d-f%d" % (tag, seed, i) for i in range(len(settings))]
    cks = []
    for job, (eps, oe) in zip(jobs, settings):
        rckpt.Checkpointer.delete(a.pool, job, a.conf)
        cks.append(rckpt.Checkpointer(a.pool, job, a.conf, eps=eps, opt_eps=oe,
                                      eps_schedule=a.eps_schedule, eps_min=a.eps_min))
    saves = [[] for _ in settings]
    torch_sizes, resumes = [], {}
    resume_at = {"peak": a.warmup - a.warmup % a.every or a.every,
                 "late": a.steps - a.steps // 20 - (a.steps - a.steps // 20) % a.every}
    tick = max(1, a.steps // 10)
    t0 = time.perf_counter()
    while t.step < a.steps:
        loss = t.train_step()
        if t.step % tick == 0:
            print("  seed %d frontier: step %d/%d, loss %.4f, %.0f s"
                  % (seed, t.step, a.steps, loss, time.perf_counter() - t0), flush=True)
        if t.step % a.every and t.step != a.steps:
            continue
        torch_sizes.append(len(torch_bytes({"model": t.net.state_dict(), "opt": t.opt.state_dict()})))
        for i, ck in enumerate(cks):
            saves[i].append(ck.save(t.step, t.net.state_dict(), optimizer=t.opt).wait())
        for which, st in resume_at.items():
            if st != t.step:
                continue
            exact_m = copy.deepcopy(t.net.state_dict())
            exact_o = copy.deepcopy(t.opt.state_dict())
            exact = t.clone_from(exact_m, exact_o, st)
            h_exact = exact.heldout()
            variants, info = {}, []
            for i, ck in enumerate(cks):
                back = ck.restore_full(step=st)
                variants["all%d" % i] = t.clone_from(back.state_dict, back.optimizer, st)
                variants["adam%d" % i] = t.clone_from(exact_m, back.optimizer, st)
                info.append({"update_error": update_error(exact_o, back.optimizer),
                             "heldout_excess": variants["all%d" % i].heldout() / h_exact - 1})
            cmp = resume_compare(exact, variants, RESUME_STEPS)
            for i, x in enumerate(info):
                x.update(all=cmp["all%d" % i], adam=cmp["adam%d" % i])
            resumes[which] = {"step": st, "lr": a.lr * mt.lr_factor(st, a.steps, a.warmup), "per": info}
    pn = sum(p.numel() for p in t.net.parameters())
    tb = sum(torch_sizes)
    out = []
    for i, (eps, oe) in enumerate(settings):
        enc = sum(x.enc_bytes for x in saves[i])
        oenc = sum(x.opt_enc_bytes for x in saves[i])
        out.append({"mode": "frontier", "seed": seed, "eps": eps, "opt_eps": oe, "ratio": tb / enc,
                    "weights_ratio": len(saves[i]) * 4 * pn / (enc - oenc),
                    "adam_ratio": len(saves[i]) * 8 * pn / oenc,
                    "resumes": {w: dict(r, per=r["per"][i]) for w, r in resumes.items()}})
        cks[i].close()
        rckpt.Checkpointer.delete(a.pool, jobs[i], a.conf)
    return out


def resume_tests(a, t, ck, step):
    """At `step` (just saved): the exact state against rckpt's and the
    baselines', RESUME_STEPS steps each."""
    exact_m = copy.deepcopy(t.net.state_dict())
    exact_o = copy.deepcopy(t.opt.state_dict())
    back = ck.restore_full(step=step)
    got_o = back.optimizer
    err = update_error(exact_o, got_o)
    variants = {"all": t.clone_from(back.state_dict, got_o, step),
                "adam": t.clone_from(exact_m, got_o, step)}
    base = {}
    for kind in ("qd", "cnr"):
        for bits in range(2, 17):
            sd, nb = baseline_state(exact_o, kind, bits)
            e = update_error(exact_o, sd)
            if e <= err or bits == 16:
                base[kind] = {"bits": bits, "bytes": nb, "update_error": e}
                variants[kind] = t.clone_from(exact_m, sd, step)
                break
    zb, raw = zstd_bytes(exact_o)
    cmp = resume_compare(t.clone_from(exact_m, exact_o, step), variants, RESUME_STEPS)
    return {"step": step, "lr": a.lr * mt.lr_factor(step, a.steps, a.warmup), "update_error": err,
            "adam_raw_bytes": raw, "zstd_bytes": zb, "baselines": base, "compare": cmp}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--seed0", type=int, default=0, help="the first seed (to split seeds over processes)")
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--every", type=int, default=100, help="checkpoint every K steps")
    ap.add_argument("--failures", type=int, default=10)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--corpus-bytes", type=int, default=mt.DEFAULT_CORPUS_BYTES)
    ap.add_argument("--eps", type=float, default=None, help="the weights' threshold (library default)")
    ap.add_argument("--opt-eps", type=float, default=None, help="the update error's (library default)")
    ap.add_argument("--eps-schedule", choices=("lr", "restores", "lr+restores"), default=None,
                    help="each save's threshold follows the learning rate, the job's resumes, or both "
                    "(Checkpointer eps_schedule)")
    ap.add_argument("--eps-min", type=float, default=None, help="its floor (default: eps / 10)")
    ap.add_argument("--modes", default="none,rckpt,rckpt-adam-ll,torch")
    ap.add_argument("--frontier", default=None,
                    help="comma-separated settings EPS:OPT_EPS (or OPT_EPS alone: the weights' default): "
                         "one run without failures saving every checkpoint under each, and the resumes")
    ap.add_argument("--short", action="store_true", help="1 seed, 600 steps, 4 failures (a smoke run)")
    ap.add_argument("--pool", default="rckpt")
    ap.add_argument("--conf", default=None, help="ceph.conf (default: $CEPH_CONF)")
    ap.add_argument("--json", default=None, help="also write every run's figures here")
    a = ap.parse_args()
    if rckpt is None:
        sys.exit(str(_rckpt_missing))
    if a.short:
        a.seeds, a.steps, a.failures, a.every, a.warmup = 1, 600, 4, 50, 100
    torch.set_num_threads(1)  # the trainer on one core, the checkpointer's on the other
    tag = "adam-%d" % os.getpid()
    runs = []
    pn = sum(p.numel() for p in LM(a, 0).net.parameters())
    print("AdamW transformer: %d parameters, %d steps, a checkpoint every %d, %d failures, %d seeds"
          % (pn, a.steps, a.every, a.failures, a.seeds), flush=True)
    if a.frontier:
        settings = []
        for x in a.frontier.split(","):
            e, _, o = x.rpartition(":")
            settings.append((float(e) if e else a.eps, float(o)))
        for seed in range(a.seed0, a.seed0 + a.seeds):
            runs += frontier_run(a, seed, settings, tag)
        report_frontier(runs)
    else:
        for seed in range(a.seed0, a.seed0 + a.seeds):
            for mode in a.modes.split(","):
                r = run(a, seed, mode, "%s-%d-%s" % (tag, seed, mode), a.opt_eps)
                runs.append(r)
                print_run(r)
        report(a, runs)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "params": pn, "runs": runs}, f, indent=1)
    print("\nreproduce: /usr/bin/python3 bench/experiments/adam_experiment.py " + " ".join(sys.argv[1:]))


def print_run(r):
    extra = ""
    if r["mode"] not in ("none", "torch"):
        extra = "  ratio %.1fx over its saves; eps (step: eps) %s" % (
            r["ratio"], " ".join("%d:%.2g" % x for x in r["eps_used"]))
    if r["mode"] == "none":
        extra = "  ratio %.1fx (weights %.1fx, Adam %.1fx)" % (r["ratio"], r["weights_ratio"], r["adam_ratio"])
        for which, x in r["resumes"].items():
            c = x["compare"]
            extra += "\n    resume %s (step %d, lr %.2g): update error %.4f; " % (
                which, x["step"], x["lr"], x["update_error"])
            extra += "; ".join("%s: first update norm worst %.3f (%s), median %.3f, excess loss worst %+.2f%%"
                               % (k, v["worst_norm_ratio"], v["worst_tensor"], v["median_norm_ratio"],
                                  100 * v["worst_excess_loss"]) for k, v in c.items())
            extra += "\n      baselines at rckpt's update error: " + ", ".join(
                "%s %d bits (%.1fx)" % (k, b["bits"], x["adam_raw_bytes"] / b["bytes"])
                for k, b in x["baselines"].items())
            if x["zstd_bytes"]:
                extra += ", zstd %.2fx" % (x["adam_raw_bytes"] / x["zstd_bytes"])
    print("seed %d %-14s held-out %.4f  wall %.0f s  failures %d  replayed %d%s"
          % (r["seed"], r["mode"], r["heldout"], r["wall_s"], r["failures"], r["replayed"], extra),
          flush=True)


def report(a, runs):
    by = {}
    for r in runs:
        by.setdefault(r["mode"], []).append(r)
    if "none" not in by:
        return
    print("\nsummary over %d seeds" % a.seeds)
    for m, rs in by.items():
        rel = [100 * (r["heldout"] - n["heldout"]) / n["heldout"] for r, n in zip(rs, by["none"])]
        print("  %-14s held-out %.4f (vs none: %s)" % (m, statistics.mean(r["heldout"] for r in rs),
                                                        ", ".join("%+.2f%%" % v for v in rel)))
    print("  whole checkpoint vs torch.save over the run: %s" % ", ".join(
        "%.1fx" % r["ratio"] for r in by["none"]))
    print("  weights: %s; Adam's state: %s" % (", ".join("%.1fx" % r["weights_ratio"] for r in by["none"]),
                                               ", ".join("%.1fx" % r["adam_ratio"] for r in by["none"])))


def report_frontier(runs):
    print("\nfrontier: per setting the whole checkpoint's ratio against torch.save over the run\n"
          "(weights, Adam's state), and per resume (peak, late) the update error, the held-out\n"
          "loss of the restored model against the exact one's, and for weights and Adam's\n"
          "state from rckpt (all) and Adam's state alone (adam) the worst per-tensor first-update\n"
          "norm ratio and the worst excess training loss over %d steps" % RESUME_STEPS)
    for r in runs:
        line = "  seed %d eps %-7s opt_eps %-5g %5.1fx (%5.1fx, %5.1fx)" % (
            r["seed"], "%g" % r["eps"] if r["eps"] else "default", r["opt_eps"], r["ratio"],
            r["weights_ratio"], r["adam_ratio"])
        for w, x in r["resumes"].items():
            p = x["per"]
            line += "  %s: upd %.3f held %+.2f%% all %.2f %+.2f%% adam %.2f %+.2f%%" % (
                w, p["update_error"], 100 * p["heldout_excess"], p["all"]["worst_norm_ratio"],
                100 * p["all"]["worst_excess_loss"], p["adam"]["worst_norm_ratio"],
                100 * p["adam"]["worst_excess_loss"])
        print(line, flush=True)


if __name__ == "__main__":
    main()
