"""bench_plots.py — the plots of rckpt_bench.py's report, drawn with
matplotlib from the data a run keeps (results.json's "data").

Rules every plot keeps (tests/bench/test_bench_plots.py checks them):
- a method has one colour and one marker, the same in every plot, and no
  two methods of a plot share either (style());
- legends sit outside the axes, never on the data;
- a bar of height 0 still shows: a marker on the axis and its value.

draw(out, data) writes OUT/NAME.png for each plot the data allows and
returns {name: file}; figures(data) returns the figures themselves.
"""
import os

from bench_report import spread

# Colours that stay apart from each other (matplotlib's tab10, then black,
# navy and teal) and markers with distinct outlines: 13 of each.
COLOURS = ["#d62728", "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf", "#000000", "#000075", "#008080"]
MARKERS = ["o", "s", "^", "v", "D", "P", "X", "*", "<", ">", "h", "p", "d"]

# The methods of bench_codec in its order: each keeps its style everywhere
# (rckpt red circles, QD blue squares, ...); others take what is left.
METHODS = ["rckpt", "qd", "checknrun", "abl-huffman-delta", "abl-rle-huffman", "abl-no-rearrange",
           "abl-uniform-bins", "abl-uniform-only", "abl-magnitude-only", "abl-opt-plain-m", "abl-opt-linear-v",
           "zstd-1", "zstd-3"]


def style(names):
    """{name: (colour, marker)} for the names of one plot: a known method its
    own pair, any other the first pair no name of this plot has; distinct
    colours and markers while there are at most len(COLOURS) names, distinct
    pairs beyond that."""
    out, used_c, used_m = {}, set(), set()
    for n in names:
        if n in METHODS:
            i = METHODS.index(n)
            out[n] = (COLOURS[i], MARKERS[i])
            used_c.add(COLOURS[i])
            used_m.add(MARKERS[i])
    k = 0
    for n in names:
        if n in out:
            continue
        free_c = [c for c in COLOURS if c not in used_c]
        free_m = [m for m in MARKERS if m not in used_m]
        c = free_c[0] if free_c else COLOURS[k % len(COLOURS)]
        m = free_m[0] if free_m else MARKERS[(k // len(COLOURS) + k) % len(MARKERS)]
        k += 1
        out[n] = (c, m)
        used_c.add(c)
        used_m.add(m)
    return out


def legend_outside(ax, handles=None, labels=None, below=False, ncol=1):
    """The legend beside the axes (right), or under them (below: where a
    second y axis takes the right side)."""
    kw = dict(fontsize=7, frameon=False, ncol=ncol)
    if handles is not None:
        kw.update(handles=handles, labels=labels)
    if below:
        return ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), **kw)
    return ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0, **kw)


def bars_with_values(ax, xs, heights, width, colour, label, fmt="%.3g"):
    """Bars, each with its value above it; a bar of height 0 gets a marker
    on the axis as well, so that it is seen as a 0 and not as missing."""
    bars = ax.bar(xs, heights, width, color=colour, label=label)
    ax.bar_label(bars, labels=[fmt % h for h in heights], fontsize=7, padding=2)
    zx = [x for x, h in zip(xs, heights) if h == 0]
    if zx:
        ax.plot(zx, [0] * len(zx), ls="none", marker="_", ms=max(8, 60 * width), mew=3, color=colour,
                clip_on=False, zorder=5)
    return bars


def fig_frontier(fr):
    """Every (method, threshold) a point at (real loss of the last
    checkpoint, ratio over the run); each method's frontier (the best ratio
    it reaches within each loss) a step line through them."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    methods = list(dict.fromkeys(r["method"] for r in fr))
    st = style(methods)
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    proxies = []
    for m in methods:
        pts = sorted((100 * r["last"], r["ratio"]) for r in fr if r["method"] == m)
        c, mk = st[m]
        lw = 2.2 if m == "rckpt" else 1.2
        best, front = 0.0, []
        for _, y in pts:
            best = max(best, y)
            front.append(best)
        ax.plot([p[0] for p in pts], front, color=c, lw=lw, drawstyle="steps-post", label="_frontier " + m)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], color=c, marker=mk, ms=6, ls="none", label=m)
        proxies.append(Line2D([], [], color=c, marker=mk, lw=lw, label=m))
    # symlog: a decoded model can be better than the original (a negative
    # increase); it is drawn where it is, not clipped
    ax.set_xscale("symlog", linthresh=0.1)
    ax.axvline(1.0, color="k", lw=0.6, ls=":", label="1% loss")
    proxies.append(Line2D([], [], color="k", lw=0.6, ls=":", label="1% loss"))
    ax.set_xlabel("held-out loss increase of the last checkpoint, % (linear below 0.1, log above)")
    ax.set_ylabel("compression ratio over the run")
    ax.set_title("Compression against real loss (transformer, AdamW)\n"
                 "points: one threshold each; steps: the best ratio within that loss", fontsize=10)
    ax.grid(alpha=.3)
    legend_outside(ax, proxies, [h.get_label() for h in proxies])
    return fig


def fig_compression_per_checkpoint(comp):
    import matplotlib.pyplot as plt

    st = style(list(comp))
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for meth, rows in comp.items():
        c, mk = st[meth]
        ax.plot([r["step"] for r in rows], [r["ratio"] for r in rows], color=c, marker=mk, ms=4,
                lw=2.4 if meth == "rckpt" else 1, label=meth)
    ax.set_yscale("log")
    ax.set_xlabel("training step of the checkpoint")
    ax.set_ylabel("compression ratio (fp32 bytes / stored)")
    ax.set_title("Compression ratio along the training run, per method")
    ax.grid(alpha=.3)
    legend_outside(ax)
    return fig


def fig_compression_overall(comp):
    import matplotlib.pyplot as plt

    names = list(comp)
    st = style(names)
    fig, ax = plt.subplots(figsize=(8, 4))
    tot = [sum(r["raw"] for r in comp[n]) / sum(r["enc"] for r in comp[n]) for n in names]
    bars = ax.bar(range(len(names)), tot, color=[st[n][0] for n in names])
    ax.bar_label(bars, fmt="%.1fx", fontsize=7)
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("ratio over the whole run")
    ax.set_title("Overall compression ratio per method")
    return fig


def fig_restore(rs):
    import matplotlib.pyplot as plt

    ways = [("server", "server-side (in the OSD)"), ("comp", "after compaction"), ("client", "client-side")]
    st = style([w for _, w in ways])
    fig, ax = plt.subplots(figsize=(8, 4))
    for k, label in ways:
        c, mk = st[label]
        ax.errorbar([r["chain"] for r in rs], [r[k]["median"] for r in rs], yerr=spread([r[k] for r in rs]),
                    color=c, marker=mk, capsize=3, label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("chain length (deltas after the base)")
    ax.set_ylabel("restore latency, ms (median, min-max)")
    ax.set_title("Restore latency vs chain length")
    ax.grid(alpha=.3)
    legend_outside(ax)
    return fig


def fig_resume(rows):
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys("%gM %s" % (r["size_m"], r["dtype"]) for r in rows))
    st = style(models)
    fig, ax = plt.subplots(figsize=(8, 4))
    for m in models:
        rs = sorted((r for r in rows if "%gM %s" % (r["size_m"], r["dtype"]) == m), key=lambda r: r["chain"])
        c, mk = st[m]
        a = [sorted(r["ms"]["A"]) for r in rs]
        med = [x[len(x) // 2] for x in a]
        ax.errorbar([max(r["chain"], 1) for r in rs], med, yerr=[[m_ - x[0] for m_, x in zip(med, a)],
                                                               [x[-1] - m_ for m_, x in zip(med, a)]],
                    color=c, marker=mk, capsize=3, label=m)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("chain length (deltas after the base)")
    ax.set_ylabel("load_latest, ms (median, min-max)")
    ax.set_title("Resume time against chain length")
    ax.grid(alpha=.3)
    legend_outside(ax)
    return fig


def fig_pcr(pcr):
    import matplotlib.pyplot as plt

    st = style(["bytes", "ssim", "ips", "base"])
    fig, ax1 = plt.subplots(figsize=(7, 4.8))
    g = [r["group"] for r in pcr["rows"]]
    bars_with_values(ax1, g, [r["frac"] for r in pcr["rows"]], 0.6, st["bytes"][0],
                     "bytes / one object per JPEG", "%.2f")
    ax1.plot(g, [r["ssim"] for r in pcr["rows"]], color=st["ssim"][0], marker=st["ssim"][1], label="mean SSIM")
    ax1.set_xlabel("scan groups read")
    ax1.set_ylabel("fraction")
    ax1.set_ylim(0, 1.2)
    ax1.set_xticks(g)
    ax2 = ax1.twinx()
    ax2.plot(g, [r["ips"]["median"] for r in pcr["rows"]], color=st["ips"][0], marker=st["ips"][1],
             label="images/s (read + decode)")
    ax2.axhline(pcr["base"]["median"], color=st["base"][0], ls="--", label="images/s, one object per JPEG")
    ax2.set_ylabel("images/s")
    ax2.set_ylim(0, None)
    h1, l1 = ax1.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    legend_outside(ax1, h1 + h2, l1 + l2, below=True, ncol=2)
    ax1.set_title("PCR: bytes, fidelity and speed per scan group")
    return fig


def fig_loader(ld):
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    rows = ld["run"]["rows"]
    names = list(dict.fromkeys(r["loader"] for r in rows))
    st = style(names)
    epochs = sorted(set(r["epoch"] for r in rows))
    wdt = 0.8 / len(names)
    for i, n in enumerate(names):
        bars_with_values(a1, [e + i * wdt for e in epochs],
                         [sum(r["storage_bytes"] for r in rows if r["loader"] == n and r["epoch"] == e) / 1e6
                          for e in epochs], wdt, st[n][0], n, "%.1f")
    a1.set_xticks([e + wdt * (len(names) - 1) / 2 for e in epochs], ["epoch %d" % e for e in epochs])
    a1.set_ylabel("MB from the cluster (all learners)")
    a1.set_title("Loader bytes per epoch, %d learners" % ld["run"]["learners"])
    a1.margins(y=0.12)
    legend_outside(a1, below=True, ncol=min(3, len(names)))
    ps = sorted(ld["box"], key=int)
    a2.boxplot([ld["box"][p] for p in ps], labels=[str(p) for p in ps])
    a2.set_xlabel("learners (local batch 32)")
    a2.set_ylabel("imbalance traffic, % of the global batch")
    a2.set_title("Locality-aware loader, simulated")
    return fig


def fig_stall(st):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6))
    ways = list(st["ways"])
    sty = style(ways)
    ms = [{k: v * 1e3 for k, v in st["ways"][w]["stall_s"].items() if k != "n"} for w in ways]
    bars = ax.barh(ways, [m["median"] for m in ms], xerr=spread(ms), capsize=3, color=[sty[w][0] for w in ways])
    ax.bar_label(bars, fmt="%.3g", fontsize=7, padding=4)
    ax.set_xlabel("trainer stall per save, ms (median, min-max)")
    ax.set_title("Stall per checkpoint, %.1f MB model" % st["state_mb"])
    return fig


def figures(data):
    """[(name, figure)] for every plot data allows, in the report's order."""
    out = []
    if data.get("frontier"):
        out.append(("frontier", fig_frontier(data["frontier"])))
    if data.get("compression"):
        out.append(("compression_per_checkpoint", fig_compression_per_checkpoint(data["compression"])))
        out.append(("compression_overall", fig_compression_overall(data["compression"])))
    if data.get("restore"):
        out.append(("restore_vs_chain", fig_restore(data["restore"])))
    if data.get("resume"):
        out.append(("resume_vs_chain", fig_resume(data["resume"])))
    if data.get("pcr") and data["pcr"].get("rows"):
        out.append(("pcr_groups", fig_pcr(data["pcr"])))
    if data.get("loader"):
        out.append(("loader", fig_loader(data["loader"])))
    if data.get("stall"):
        out.append(("save_stall", fig_stall(data["stall"])))
    return out


def draw(out, data):
    """Writes OUT/NAME.png for each plot; returns {name: file}."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    done = {}
    for name, fig in figures(data):
        # the legends outside the axes are inside the saved figure
        fig.tight_layout()
        fig.savefig(os.path.join(out, name + ".png"), dpi=110, bbox_inches="tight")
        plt.close(fig)
        done[name] = name + ".png"
    return done
