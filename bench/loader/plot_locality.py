#!/usr/bin/python3
"""Box plot of the locality-aware loader's imbalance traffic from
bench_locality's CSV: one box per number of learners, one panel per local
batch size, traffic as % of the global batch.

    build/bench/bench_locality --csv /tmp/loc.csv
    /usr/bin/python3 bench/loader/plot_locality.py /tmp/loc.csv /tmp/loc.png
"""
import argparse
import csv
import sys
from collections import defaultdict


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("png")
    a = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_locality.py: needs python3-matplotlib (apt-get install python3-matplotlib)")
    data = defaultdict(lambda: defaultdict(list))
    with open(a.csv) as f:
        for row in csv.DictReader(f):
            data[int(row["local_batch"])][int(row["learners"])].append(float(row["moved_pct"]))
    if not data:
        sys.exit("plot_locality.py: %s has no rows" % a.csv)
    bs = sorted(data)
    fig, axes = plt.subplots(1, len(bs), figsize=(4.5 * len(bs), 4), sharey=True, squeeze=False)
    for ax, b in zip(axes[0], bs):
        ps = sorted(data[b])
        ax.boxplot([data[b][p] for p in ps], labels=[str(p) for p in ps], showfliers=False)
        allv = sorted(v for p in ps for v in data[b][p])
        ax.axhline(allv[len(allv) // 2], color="grey", lw=0.8, ls="--")
        ax.set_title("local batch %d (median %.1f%%)" % (b, allv[len(allv) // 2]))
        ax.set_xlabel("learners")
        ax.tick_params(axis="x", labelrotation=45)
    axes[0][0].set_ylabel("imbalance traffic, % of global batch")
    fig.tight_layout()
    fig.savefig(a.png, dpi=110)
    print(a.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
