#!/usr/bin/python3
"""test_bench_report.py — the summary of `rckpt bench`'s report
(bench/report/bench_report.py): each performance goal's row carries the
goal and whether its median meets it; a row with no goal says nothing."""
import os
import sys
import unittest

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "bench", "report"))
import bench_report as br  # noqa: E402


def metric(name, median, suite="save", unit="ratio", pairs=True):
    return {"name": name, "median": median, "min": median * 0.95, "max": median * 1.05, "n": 3,
            "pairs": pairs, "suite": suite, "unit": unit}


class Goals(unittest.TestCase):
    def test_status(self):
        m = metric("x", 1.0)
        self.assertEqual(br.goal_status(m, (">=", 1)), "≥ 1: met")
        self.assertEqual(br.goal_status(m, (">=", 1.01)), "≥ 1.01: not met")
        self.assertEqual(br.goal_status(m, ("<=", 0.5)), "≤ 0.5: not met")
        self.assertEqual(br.goal_status(m, None), "")

    def test_link(self):
        self.assertEqual(br.link_goal("save / raw write through the same layout, at 1g"), (">=", 3))
        self.assertEqual(br.link_goal("restore of the last step / raw read, at 1000m"), (">=", 2))
        self.assertEqual(br.link_goal("restore of the last step / raw read, at 10g"), (">=", 1))
        self.assertIsNone(br.link_goal("save / raw write through the same layout, at 500m"))

    def test_rows(self):
        ms = [metric("save logical MB/s / rados write MB/s (64 KiB)", 0.15),
              metric("stall rckpt default / torch.save", 0.4),
              metric("delta save logical MB/s / rados write MB/s (64 KiB)", 0.2),
              metric("decode, MB of fp32 per CPU second: rckpt", 99, unit="MB/s", pairs=False),
              metric("save / raw write through the same layout, at 1g", 1.85, suite="link"),
              metric("decode stage, one core: digests", 4489, unit="MB/s", pairs=False),
              metric("encode speed, all 2 cores / 1 core", 1.6, suite="compression")]
        rows = {r[0]: r for r in br.summary_rows(ms, {})}
        self.assertEqual(rows["save / rados write (64 KiB)"][3], "≥ 1: not met")
        self.assertEqual(rows["trainer stall, rckpt default / torch.save"][3], "≤ 1: met")
        self.assertEqual(rows["delta save / rados write (64 KiB)"][3], "")
        self.assertEqual(rows["decode, MB of fp32 per CPU second"][3], "≥ 1000: not met")
        self.assertEqual(rows["behind a shaped link: save / raw write through the same layout, at 1g"][3],
                         "≥ 3: not met")
        self.assertEqual(rows["decode stage digests, one core"][3], "≥ 1000: met")
        self.assertEqual(rows["encode speed, all 2 cores / 1 core"][1], "1.6 [1.52, 1.68] (pairs)")
        table = br.summary_table(ms, {}).splitlines()
        self.assertEqual(table[0], "| measure | value | unit | goal |")
        self.assertTrue(all(line.count("|") == 5 for line in table))


if __name__ == "__main__":
    unittest.main()
