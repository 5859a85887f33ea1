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


class CodecSpeed(unittest.TestCase):
    OUT = ("csv:round,1,0.316,0.240445,0.014016,0.005632,0.004869\n"
           "csv:scaling,1,0.316,0.278251,0.293862,2\n"
           "csv:round,2,0.316,0.25,0.014,0.0056,0.0049\n"
           "csv:scaling,2,0.316,0.28,0.29,2\n")

    def test_metrics(self):
        ms = {m[0]: m for m in br.codec_speed_metrics(self.OUT)}
        self.assertAlmostEqual(ms["encode, MB of fp32 per CPU second: rckpt"][2][0], 0.316 / 0.240445)
        self.assertAlmostEqual(ms["encode speed per CPU second / zstd -1"][2][1], 0.0056 / 0.25)
        self.assertTrue(ms["decode speed per CPU second / zstd -d"][3])
        self.assertAlmostEqual(ms["encode speed, all 2 cores / 1 core"][2][0], 0.278251 / 0.293862)
        self.assertEqual(len(ms["encode, MB of fp32 per wall second: 1 core"][2]), 2)
        self.assertEqual(br.codec_speed_metrics("no rounds\n"), [])


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
              metric("encode speed, all 2 cores / 1 core", 1.6, suite="compression"),
              metric("restore MB/s of the last step / the same path reading raw fp32 MB/s", 0.03)]
        rows = {r[0]: r for r in br.summary_rows(ms, {})}
        self.assertEqual(rows["save / rados write (64 KiB)"][3], "≥ 1: not met")
        self.assertEqual(rows["trainer stall, rckpt default / torch.save"][3], "≤ 1: met")
        self.assertEqual(rows["delta save / rados write (64 KiB)"][3], "")
        self.assertEqual(rows["decode, MB of fp32 per CPU second"][3], "≥ 1000: not met")
        self.assertEqual(rows["behind a shaped link: save / raw write through the same layout, at 1g"][3],
                         "≥ 3: not met")
        self.assertEqual(rows["decode stage digests, one core"][3], "≥ 1000: met")
        self.assertEqual(rows["encode speed, all 2 cores / 1 core"][1], "1.6 [1.52, 1.68] (pairs)")
        self.assertEqual(rows["restore of the last step / the same path reading raw fp32"][3], "≥ 1: not met")
        table = br.summary_table(ms, {}).splitlines()
        self.assertEqual(table[0], "| measure | value | unit | goal |")
        self.assertTrue(all(line.count("|") == 5 for line in table))


if __name__ == "__main__":
    unittest.main()
