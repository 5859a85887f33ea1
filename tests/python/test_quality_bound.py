#!/usr/bin/python3
"""test_quality_bound.py — the promise of eps, judged by the model's real loss.

A small transformer language model (bench/data/make_transformer.py, AdamW, cosine
schedule to zero) is trained by a fixture into $RCKPT_TEST_LM_DIR. With the
codec's defaults and no quality callback:

  * the late checkpoint saved alone, as a base (what a restarted writer of
    old, or `rckpt codec encode` of one file, writes);
  * the early and middle checkpoints saved alone;
  * the last step of the whole run saved as one chain of deltas;

each restore to a model whose held-out loss is at most BOUND (1%) above the
original's. The bound is the one docs/compression.md, "What eps means",
documents for the default eps. The codec runs as the `rckpt` command
($RCKPT_CLI).
"""
import os
import subprocess
import sys
import tempfile
import unittest

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "bench", "data"))
from testskip import skip_test  # noqa: E402

BOUND = 0.01


def need(var):
    v = os.environ.get(var)
    if not v:
        skip_test("data", f"{var} is not set (ctest sets it)")
    return v


class QualityBound(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import eval_checkpoint as ev

        cls.ev = ev
        cls.dir = need("RCKPT_TEST_LM_DIR")
        cls.cli = need("RCKPT_CLI")
        cls.steps = sorted(os.path.join(cls.dir, f) for f in os.listdir(cls.dir)
                           if f.startswith("step-") and f.count(".") == 1)
        if len(cls.steps) < 3:
            raise AssertionError(f"the fixture in {cls.dir} has {len(cls.steps)} checkpoints")

    def restored_increase(self, chain):
        """Encodes chain (base first) with the defaults, decodes its last
        step and returns its relative held-out loss increase."""
        with tempfile.TemporaryDirectory() as tmp:
            r = subprocess.run([self.cli, "codec", "encode", "-o", tmp] + chain, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            recs = [os.path.join(tmp, os.path.basename(c)[:-len(".safetensors")] + ".rckpt") for c in chain]
            out = os.path.join(tmp, "restored.safetensors")
            r = subprocess.run([self.cli, "codec", "decode", "-o", out] + recs, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            meta = self.ev.model_meta(chain[-1])  # the restored file has no model.json beside it
            l0 = self.ev.heldout_loss(chain[-1], meta)
            l1 = self.ev.heldout_loss(out, meta)
        return (l1 - l0) / l0

    def test_late_checkpoint_alone(self):
        inc = self.restored_increase([self.steps[-1]])
        self.assertLessEqual(inc, BOUND, f"late checkpoint saved alone: held-out loss +{inc:.2%}")

    def test_early_and_middle_alone(self):
        for c in (self.steps[0], self.steps[len(self.steps) // 2]):
            inc = self.restored_increase([c])
            self.assertLessEqual(inc, BOUND, f"{os.path.basename(c)} saved alone: held-out loss +{inc:.2%}")

    def test_chain_last_step(self):
        inc = self.restored_increase(self.steps)
        self.assertLessEqual(inc, BOUND, f"last step of the chain: held-out loss +{inc:.2%}")


if __name__ == "__main__":
    try:
        import torch  # noqa: F401
    except ImportError:
        skip_test("data", "python3-torch is not installed")
    unittest.main(verbosity=2)
