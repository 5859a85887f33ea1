#!/usr/bin/python3
"""test_bench_plots.py — the plots of `rckpt bench`'s report (bench/report/bench_plots.py)
keep their rules, on data shaped as a run's (every method of bench_codec, a
frontier with a loss below the original's, a loader epoch of 0 bytes):

  * every method of a plot has its own colour and its own marker, and a
    method the same pair in every plot;
  * no legend overlaps an axes' data area;
  * a bar of height 0 has a marker on the axis and its value written;
  * draw() writes each plot as a PNG, the frontier among them.

    /usr/bin/python3 tests/python/test_bench_plots.py [--keep DIR]   (DIR: the PNGs, to look at)
"""
import os
import sys
import tempfile
import unittest

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "bench", "report"))
sys.path.insert(0, here)
from testskip import skip_test  # noqa: E402

KEEP = None
METHODS = ["rckpt", "abl-huffman-delta", "abl-rle-huffman", "abl-no-rearrange", "abl-uniform-bins",
           "abl-magnitude-only", "abl-opt-plain-m", "abl-opt-linear-v", "qd", "checknrun", "zstd-1", "zstd-3"]


def m3(v):
    return {"median": v, "min": v * 0.9, "max": v * 1.1, "n": 3}


def run_data():
    comp = {}
    for i, m in enumerate(METHODS):
        comp[m] = [dict(step=s, raw=4_000_000, enc=int(4_000_000 / (2 + i + s / 100)), ratio=2 + i + s / 100,
                        loss=0.0, mbs=100.0) for s in range(25, 800, 25)]
    fr = []
    for m, base in (("rckpt", 12.0), ("qd", 7.0), ("checknrun", 5.0), ("abl-uniform-bins", 9.0)):
        for k, eps in enumerate((0.0006, 0.0012, 0.003)):
            # the first point of rckpt: the decoded model is better than the original
            fr.append(dict(method=m, eps=eps, ratio=base * (1 + k), last=-0.0004 if (m == "rckpt" and k == 0)
                           else 0.002 * (k + 1) * base / 10, worst=0.01, first="0"))
    rows = []
    for e in (1, 2):
        for name, b in (("regular", 40e6), ("locality", 0.0 if e == 1 else 5e6), ("locality-partial", 20e6)):
            rows.append(dict(loader=name, epoch=e, storage_bytes=b))
    return {
        "compression": comp,
        "frontier": fr,
        "restore": [dict(chain=L, server=m3(5 + L), comp=m3(4.0), client=m3(5 + 3 * L), server_wire=1, comp_wire=1,
                         client_wire=1) for L in (1, 2, 4, 8, 16)],
        "pcr": dict(rows=[dict(group=g, bytes=g * 1e6, frac=min(1, 0.2 * g), ips=m3(300 - 30 * g), speedup=1.5,
                               ssim=0.6 + 0.08 * g) for g in range(1, 6)],
                    base=m3(250), base_bytes=5e6, build={}),
        "loader": dict(run=dict(rows=rows, learners=4), box={"4": [1, 2, 3], "16": [2, 3, 4], "64": [3, 4, 5]}),
        "stall": dict(state_mb=16.0, ways={w: {"stall_s": m3(0.01 * (i + 1))} for i, w in
                                           enumerate(("torch.save", "rckpt default", "rckpt snapshot", "rckpt sync"))}),
    }


class Plots(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        try:
            import matplotlib
            matplotlib.use("Agg")
        except ImportError:
            skip_test("data", "python3-matplotlib is not installed")
        import bench_plots
        cls.bp = bench_plots
        cls.data = run_data()
        cls.figs = dict(bench_plots.figures(cls.data))
        for f in cls.figs.values():
            f.tight_layout()
            f.canvas.draw()

    def lines(self, name, ax_index=0):
        ax = self.figs[name].axes[ax_index]
        return {ln.get_label(): (ln.get_color(), ln.get_marker()) for ln in ax.get_lines()
                if not ln.get_label().startswith("_")}

    def assert_distinct(self, styles, what):
        cs = [c for c, _ in styles.values()]
        ms = [m for _, m in styles.values()]
        self.assertEqual(len(set(cs)), len(cs), "%s: a colour is shared: %s" % (what, styles))
        self.assertEqual(len(set(ms)), len(ms), "%s: a marker is shared: %s" % (what, styles))

    def test_style_distinct_and_stable(self):
        st = self.bp.style(METHODS + ["mine"])
        self.assert_distinct(st, "style()")
        # a method keeps its pair whatever else the plot holds
        self.assertEqual(self.bp.style(["zstd-1", "rckpt"])["rckpt"], st["rckpt"])
        self.assertEqual(self.bp.style(["qd", "mine"])["qd"], st["qd"])
        self.assertNotEqual(st["zstd-1"][0], st["rckpt"][0])

    def test_compression_lines(self):
        got = self.lines("compression_per_checkpoint")
        self.assertEqual(sorted(got), sorted(METHODS))
        self.assert_distinct(got, "compression_per_checkpoint")

    def test_frontier(self):
        got = self.lines("frontier")
        del got["1% loss"]  # the reference line
        self.assertEqual(set(got), {"rckpt", "qd", "checknrun", "abl-uniform-bins"})
        self.assert_distinct(got, "frontier")
        # the same method, the same pair as in the compression plot
        comp = self.lines("compression_per_checkpoint")
        for m, s in got.items():
            self.assertEqual(s, comp[m], m)
        # a loss below the original's is drawn where it is (not clipped to a floor)
        ax = self.figs["frontier"].axes[0]
        rk = [ln for ln in ax.get_lines() if ln.get_label() == "rckpt"][0]
        self.assertLess(min(rk.get_xdata()), 0)
        self.assertEqual(sorted(rk.get_ydata()), [12.0, 24.0, 36.0])

    def test_legends_off_the_data(self):
        seen = 0
        for name, fig in self.figs.items():
            r = fig.canvas.get_renderer()
            legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()] + list(fig.legends)
            for lg in legends:
                seen += 1
                lb = lg.get_window_extent(r)
                for ax in fig.axes:
                    self.assertFalse(lb.overlaps(ax.get_window_extent(r)),
                                     "%s: the legend lies on the data of an axes" % name)
        self.assertGreaterEqual(seen, 5)

    def test_zero_bar_visible(self):
        ax = self.figs["loader"].axes[0]
        zero = [p for p in ax.patches if p.get_height() == 0]
        self.assertEqual(len(zero), 1, "the data has one bar of 0 MB")
        x = zero[0].get_x() + zero[0].get_width() / 2
        marks = [ln for ln in ax.get_lines() if ln.get_marker() not in ("None", "", None)
                 and any(abs(a - x) < 1e-9 and b == 0 for a, b in zip(ln.get_xdata(), ln.get_ydata()))]
        self.assertTrue(marks, "no marker on the axis where the bar of 0 is")
        self.assertFalse(marks[0].get_clip_on(), "the marker would be cut by the axes")
        from matplotlib.colors import to_rgba
        self.assertEqual(to_rgba(marks[0].get_color())[:3], tuple(zero[0].get_facecolor()[:3]),
                         "the marker is not the colour of its bar")
        labels = [t.get_text() for t in ax.texts]
        self.assertIn("0.0", labels)

    def test_draw_writes_pngs(self):
        out = KEEP or tempfile.mkdtemp()
        got = self.bp.draw(out, self.data)
        self.assertEqual(set(got), {"frontier", "compression_per_checkpoint", "compression_overall",
                                    "restore_vs_chain", "pcr_groups", "loader", "save_stall"})
        for f in got.values():
            with open(os.path.join(out, f), "rb") as fh:
                self.assertEqual(fh.read(8), b"\x89PNG\r\n\x1a\n", f)
        # no data, no plot
        self.assertEqual(self.bp.draw(out, {"frontier": []}), {})


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--keep":
        KEEP = sys.argv[2]
        os.makedirs(KEEP, exist_ok=True)
        del sys.argv[1:3]
    unittest.main()
