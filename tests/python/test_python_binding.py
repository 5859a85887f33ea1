#!/usr/bin/python3
"""The Python binding (client/python/rckpt) against the local cluster:
save/restore round trips of real state_dicts (a model trained on the
digits, a BatchNorm model with an int64 buffer), optimizer state kept
exactly or quantized, asynchronous and snapshot saves giving the same
bytes, partial restore, the gradient EMA, the quality callback from Python,
errors as exceptions, and PCR datasets.

Runs with CUDA hidden (CUDA_VISIBLE_DEVICES=""), the CPU path. Skips (exit
77) without python3-torch, or without a cluster (CEPH_CONF) unless
RCKPT_REQUIRE_CLUSTER=1. Env: RCKPT_LIBRARY (the librckpt.so to test),
RCKPT_CLI (the rckpt command, to build a PCR dataset) and
RCKPT_TEST_PCR_DIR (JPEGs); the PCR tests skip without the last two.
"""
import copy
import os
import subprocess
import sys
import textwrap
import time
import unittest

os.environ["CUDA_VISIBLE_DEVICES"] = ""
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "client", "python"))
sys.path.insert(0, os.path.join(here, "..", "..", "client", "python", "examples"))

from testskip import skip_test  # noqa: E402

try:
    import torch
except ImportError:
    skip_test("data", "python3-torch is not installed")

import ctypes  # noqa: E402

import numpy as np  # noqa: E402  (python3-torch depends on python3-numpy)

import rckpt  # noqa: E402
from rckpt import _plain  # noqa: E402

ctypes_u32 = ctypes.c_uint32

CONF = os.environ.get("CEPH_CONF")
TAG = "py-%d" % os.getpid()


def rel_err(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def bf16(t):
    """What the codec keeps of a 1-D tensor: each value's bf16 (round to
    nearest even), in the tensor's dtype."""
    return t.to(torch.bfloat16).to(t.dtype)


def trained_digits(steps=60, momentum=0.9):
    import digits
    torch.set_num_threads(1)
    t = digits.Trainer(0, steps, width=128, momentum=momentum)
    for _ in range(steps):
        t.train_step()
    return t


class NoCluster(unittest.TestCase):
    """What needs no cluster."""

    def test_plain_round_trip(self):
        obj = {"state": {0: {"step": torch.tensor(3.0), "buf": torch.arange(6).view(2, 3)}},
               "param_groups": [{"lr": 0.1, "betas": (0.9, 0.999), "params": [0, 1],
                                 "nesterov": False, "weight_decay": None}],
               "nan": float("inf"), "empty": torch.empty(0, 4), "b": torch.ones(3, dtype=torch.bool),
               "bf": torch.randn(5).bfloat16()}
        back = _plain.loads(_plain.dumps(obj))
        self.assertEqual(back["param_groups"], obj["param_groups"])
        self.assertIsInstance(back["param_groups"][0]["betas"], tuple)
        self.assertIn(0, back["state"])  # int keys stay ints
        for k in ("step", "buf"):
            self.assertTrue(torch.equal(back["state"][0][k], obj["state"][0][k]))
            self.assertEqual(back["state"][0][k].dtype, obj["state"][0][k].dtype)
        self.assertEqual(back["empty"].shape, (0, 4))
        self.assertTrue(torch.equal(back["bf"], obj["bf"]))
        self.assertEqual(back["nan"], float("inf"))

    def test_plain_refuses(self):
        with self.assertRaises(TypeError):
            _plain.dumps({"f": lambda: 0})
        raw = _plain.dumps({"t": torch.arange(10)})
        for bad in (b"", b"XXXX" + raw[4:], raw[:12], raw[:-1]):
            with self.assertRaises(ValueError):
                _plain.loads(bad)

    def test_plain_numpy(self):
        """NumPy arrays and scalars of numeric and boolean dtypes (a random
        state, a sampler's permutation) round-trip with their dtypes and
        shapes (issue 30 item 7); other dtypes are refused when saved, and
        a tampered attachment's array is refused when read."""
        st = np.random.RandomState(7).get_state()
        obj = {"rng": st, "perm": np.random.RandomState(1).permutation(10),
               "view": np.arange(12, dtype=np.float16).reshape(3, 4)[:, ::2],
               "s": np.float32(1.5), "i": np.int64(-3), "b": np.array([True, False]),
               "c": np.array([1 + 2j], dtype=np.complex64), "e": np.zeros((0, 3), np.uint8)}
        back = _plain.loads(_plain.dumps(obj))
        self.assertEqual(back["rng"][0], "MT19937")
        self.assertTrue(np.array_equal(back["rng"][1], st[1]) and back["rng"][1].dtype == np.uint32)
        np.random.set_state(back["rng"])  # NumPy takes it back
        for k in ("perm", "view", "b", "c", "e"):
            self.assertTrue(np.array_equal(back[k], obj[k]), k)
            self.assertEqual((back[k].dtype, back[k].shape), (obj[k].dtype, obj[k].shape), k)
        self.assertIsInstance(back["s"], np.float32)
        self.assertEqual(back["s"], 1.5)
        self.assertIsInstance(back["i"], np.int64)
        for bad in (np.array(["a"]), np.array([object()], dtype=object), np.datetime64("2026-01-01")):
            with self.assertRaises(TypeError):
                _plain.dumps({"x": bad})
        raw = _plain.dumps({"x": np.arange(4, dtype=np.int32)})
        for a, b in ((b'"<i4"', b'"|O8"'), (b'"<i4"', b'"<i8"'), (b"[4]", b"[5]"), (b"[4]", b"[-4]")):
            forged = raw.replace(a, b, 1)
            doc_len = len(forged) - len(raw) + int.from_bytes(raw[4:8], "little")
            forged = forged[:4] + doc_len.to_bytes(4, "little") + forged[8:]
            with self.assertRaises(ValueError, msg=b.decode()):
                _plain.loads(forged)

    def test_gradient_ema(self):
        m = torch.nn.Linear(4, 3)
        ema = rckpt.GradientEMA(m, beta=0.5)
        grads = []
        for i in range(4):
            ema.enabled = i >= 1  # the first backward is not folded in
            m.zero_grad()
            (m(torch.randn(8, 4)) ** 2).sum().backward()
            grads.append(m.weight.grad.clone())
        want = grads[1] ** 2  # the root of the moving average of grad**2
        for g in grads[2:]:
            want = 0.5 * want + 0.5 * g * g
        self.assertTrue(torch.allclose(ema.state()["weight"], want.sqrt()))
        self.assertEqual(set(ema.state()), {"weight", "bias"})
        self.assertTrue(ema.track(100, 50) and ema.track(45, 50) and not ema.track(10, 50))
        ema.remove()

    def test_adam_state_stands_in_for_grads(self):
        # an Adam-style optimizer's exp_avg_sq, bias-corrected, is the
        # gradient RMS the compressor weighs values by
        m = torch.nn.Linear(4, 3)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2, betas=(0.9, 0.99))
        for _ in range(3):
            opt.zero_grad()
            (m(torch.randn(8, 4)) ** 2).sum().backward()
            opt.step()
        comp = {k: v for k, v in m.state_dict().items()}
        rms = rckpt.Checkpointer._adam_rms(opt, comp)
        self.assertEqual(set(rms), {"weight", "bias"})
        v = opt.state[m.weight]["exp_avg_sq"]
        self.assertTrue(torch.allclose(rms["weight"], (v / (1 - 0.99 ** 3)).sqrt()))
        self.assertEqual(rckpt.Checkpointer._adam_rms(torch.optim.SGD(m.parameters(), lr=1), comp), {})

    def test_bad_arguments(self):
        with self.assertRaises(ValueError):
            rckpt.Checkpointer(job=None)
        with self.assertRaises(ValueError):
            rckpt.Checkpointer(job="x", optimizer_state="zip")
        with self.assertRaises(ValueError):
            rckpt.GradientEMA(torch.nn.Linear(2, 2), beta=1.5)


@unittest.skipIf(not CONF, "no cluster: CEPH_CONF is not set")
class WithCluster(unittest.TestCase):
    def job(self, name):
        j = "%s-%s" % (TAG, name)
        rckpt.Checkpointer.delete(job=j)
        self.addCleanup(rckpt.Checkpointer.delete, job=j)
        return j

    def test_round_trip_real_model(self):
        t = trained_digits()
        sd = t.model.state_dict()
        job = self.job("rt")
        with rckpt.Checkpointer(job=job, compute="cpu", optimizer_state="lossless") as ck:
            saved_rng = np.random.RandomState(60).get_state()  # NumPy arrays in the attachment
            h = ck.save(60, sd, optimizer=t.opt, extra={"epoch": 2, "note": "x", "rng": saved_rng})
            r = h.wait()
            self.assertEqual(r.step, 60)
            self.assertTrue(r.is_base)
            self.assertGreater(r.raw_bytes, 0)
            self.assertLessEqual(r.quality, 0.003)
            back = ck.restore_full()
        self.assertEqual(back.step, 60)
        self.assertEqual(list(back.state_dict), list(sd))
        for k, v in sd.items():
            self.assertEqual(back.state_dict[k].shape, v.shape)
            self.assertEqual(back.state_dict[k].dtype, v.dtype)
            if v.dim() == 1:  # biases are kept as bf16 (round to nearest even)
                self.assertTrue(torch.equal(back.state_dict[k], bf16(v)), k)
            else:
                self.assertLess(rel_err(back.state_dict[k], v), 0.1, k)
                self.assertFalse(torch.equal(back.state_dict[k], v), k)  # it was compressed
        # momentum kept exactly (optimizer_state="lossless")
        want = t.opt.state_dict()
        for pid, st in want["state"].items():
            self.assertTrue(torch.equal(back.optimizer["state"][pid]["momentum_buffer"],
                                        st["momentum_buffer"]))
        self.assertEqual(back.optimizer["param_groups"], want["param_groups"])
        rng = back.extra.pop("rng")
        self.assertEqual(back.extra, {"epoch": 2, "note": "x"})
        self.assertEqual(rng[0], saved_rng[0])
        self.assertTrue(np.array_equal(rng[1], saved_rng[1]) and rng[1].dtype == saved_rng[1].dtype)
        self.assertEqual(rng[2:], saved_rng[2:])
        # the attachment as stored, decoded by the reference decoder (from
        # store.md alone, no code shared with the C one): the same meta
        import tempfile
        sys.path.insert(0, os.path.join(here, "..", "reference"))
        import rckpt_ref
        with tempfile.NamedTemporaryFile() as f:
            subprocess.run(["rados", "-p", "rckpt", "-N", job, "get", "rckpt.attach.%020d" % 60, f.name],
                           check=True, capture_output=True)
            meta = rckpt._plain.loads(rckpt_ref.attachment(open(f.name, "rb").read(), 60))
        self.assertTrue(np.array_equal(meta["extra"].pop("rng")[1], saved_rng[1]))
        self.assertEqual(meta["extra"], {"epoch": 2, "note": "x"})
        self.assertEqual(meta["keys"], list(sd))
        # restore_into a fresh model and optimizer: they then hold the step
        import digits
        m2 = digits.make_model(128)
        o2 = torch.optim.SGD(m2.parameters(), lr=1.0, momentum=0.5)
        with rckpt.Checkpointer(job=job, writer=False) as ro:
            info = ro.restore_into(m2, optimizer=o2)
            self.assertEqual(info.step, 60)
            self.assertEqual([s.step for s in ro.steps()], [60])
        for k, v in m2.state_dict().items():
            self.assertTrue(torch.equal(v, back.state_dict[k]))
        self.assertEqual(o2.param_groups[0]["momentum"], 0.9)

    def test_buffers_dtypes_and_partial(self):
        torch.manual_seed(1)
        m = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3), torch.nn.BatchNorm2d(16),
                                torch.nn.Flatten(), torch.nn.Linear(16 * 30 * 30, 10))
        m(torch.randn(4, 3, 32, 32))  # moves the BatchNorm statistics
        sd = m.state_dict()
        sd["half"] = torch.randn(64, 64).half()
        sd["bf"] = torch.randn(64, 64).bfloat16()
        sd["f64"] = torch.randn(5, dtype=torch.float64)
        sd["scalar"] = torch.tensor(1.5)
        sd["noncontig"] = torch.randn(40, 30).t()
        job = self.job("dt")
        with rckpt.Checkpointer(job=job) as ck:
            ck.save(1, sd).wait()
            back = ck.restore()
            self.assertEqual(list(back), list(sd))
            for k in ("1.num_batches_tracked", "f64", "scalar"):  # as they were
                self.assertTrue(torch.equal(back[k], sd[k]), k)
                self.assertEqual(back[k].dtype, sd[k].dtype)
            for k in ("1.running_mean", "1.running_var", "1.bias"):  # 1-D: kept as bf16
                self.assertTrue(torch.equal(back[k], bf16(sd[k])), k)
                self.assertEqual(back[k].dtype, sd[k].dtype)
            for k in ("half", "bf", "noncontig", "0.weight", "3.weight"):
                self.assertEqual(back[k].dtype, sd[k].dtype)
                # without gradients: no tensor's relative squared error over
                # 20 x the default eps (0.0012), whatever its share of the model
                self.assertLessEqual(rel_err(back[k], sd[k]) ** 2, 20 * 0.0012 * 1.001, k)
            part = ck.restore_full(names=["3.weight"]).state_dict
            self.assertIn("3.weight", part)
            self.assertTrue(torch.equal(part["3.weight"], back["3.weight"]))
            with self.assertRaises(rckpt.RckptError) as e:
                ck.restore(names=["no.such.tensor"])
            self.assertEqual(e.exception.code, -2)
            self.assertIn("no.such.tensor", str(e.exception))

    def test_async_snapshot_same_bytes(self):
        """In place or snapshot, the records are the same bytes: the
        restored steps are bit-identical, and the trainer may change its
        tensors as soon as save() returns."""
        t = trained_digits(steps=30, momentum=0.0)
        steps = []
        for i in range(3):
            for _ in range(5):
                t.train_step()
            steps.append({k: v.clone() for k, v in t.model.state_dict().items()})
        out = {}
        for snap in (False, True):
            job = self.job("snap%d" % snap)
            with rckpt.Checkpointer(job=job, snapshot=snap) as ck:
                live = {k: v.clone() for k, v in steps[0].items()}
                hs, calls = [], []
                for i, sd in enumerate(steps):
                    for k in live:
                        live[k].copy_(sd[k])
                    t0 = time.perf_counter()
                    hs.append(ck.save(10 * (i + 1), live))
                    calls.append(time.perf_counter() - t0)
                    for v in live.values():  # the trainer scribbles at once
                        v.fill_(7.0)
                res = [h.wait() for h in hs]
                self.assertEqual([r.step for r in res], [10, 20, 30])
                self.assertEqual([r.is_base for r in res], [True, False, False])
                # the time reported blocked is a part of the save() call
                # the caller timed, not of the wait after it
                for r, c in zip(res, calls):
                    self.assertLessEqual(r.t_blocked, c)
                out[snap] = [ck.restore(s) for s in (10, 20, 30)]
        for a, b, sd in zip(out[False], out[True], steps):
            for k in sd:
                self.assertTrue(torch.equal(a[k], b[k]), k)
                self.assertLess(rel_err(a[k], sd[k]), 0.1, k)

    def test_quantized_optimizer_state(self):
        t = trained_digits()
        job = self.job("qo")
        with rckpt.Checkpointer(job=job, optimizer_state="quantize") as ck:
            r = ck.save(1, t.model.state_dict(), optimizer=t.opt).wait()
            back = ck.restore_full()
        want = t.opt.state_dict()
        self.assertEqual(back.optimizer["param_groups"], want["param_groups"])
        self.assertNotIn("@optimizer/0/momentum_buffer", back.state_dict)
        for pid, st in want["state"].items():
            got = back.optimizer["state"][pid]["momentum_buffer"]
            self.assertEqual(got.shape, st["momentum_buffer"].shape)
            self.assertLess(rel_err(got, st["momentum_buffer"]), 0.5)
        # the momentum went through the compressor: far fewer bytes than
        # keeping it exactly
        job2 = self.job("qo2")
        with rckpt.Checkpointer(job=job2, optimizer_state="lossless") as ck:
            r2 = ck.save(1, t.model.state_dict(), optimizer=t.opt).wait()
        self.assertLess(r.enc_bytes * 2, r2.enc_bytes)

    def test_adam_state(self):
        """AdamW's state, compressed by default as the optimizer's (issue
        28): the step reports the optimizer's share and its update error;
        a restored optimizer's next step moves every tensor as the original
        state's would, within the update error's bound; the state takes a
        fraction of its fp32 bytes; optimizer_state="lossless" keeps it
        exact."""
        torch.manual_seed(7)
        model = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128,
                                                 batch_first=True)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        for _ in range(40):
            x = torch.randn(16, 16, 64)
            loss = (model(x) - x.roll(1, dims=1)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        job = self.job("adam")
        with rckpt.Checkpointer(job=job) as ck:
            r = ck.save(1, model.state_dict(), optimizer=opt).wait()
            back = ck.restore_full()
            info = ck.steps()[-1]
        nparam = sum(p.numel() for p in model.parameters())
        self.assertEqual(r.opt_raw_bytes, 2 * 4 * nparam)  # exp_avg, exp_avg_sq in fp32
        self.assertEqual((info.opt_raw_bytes, info.opt_enc_bytes), (r.opt_raw_bytes, r.opt_enc_bytes))
        self.assertGreater(r.opt_quality, 0)
        self.assertLessEqual(r.opt_quality, 0.1)  # RCKPT_OPT_EPS_DEFAULT
        self.assertLess(r.opt_enc_bytes * 5, r.opt_raw_bytes)
        for pid, st in opt.state_dict()["state"].items():
            got = back.optimizer["state"][pid]
            self.assertTrue(torch.equal(got["step"], st["step"]))  # integer state: exact
            self.assertTrue(bool((got["exp_avg_sq"] >= 0).all()))

        # the next step from the original state and from the restored one,
        # on the same weights and the same batch
        def step_from(state):
            m = copy.deepcopy(model)
            o = torch.optim.AdamW(m.parameters(), lr=1e-3)
            o.load_state_dict(state)
            before = [p.detach().clone() for p in m.parameters()]
            torch.manual_seed(99)
            x = torch.randn(16, 16, 64)
            (m(x) - x.roll(1, dims=1)).pow(2).mean().backward()
            o.step()
            return [p.detach() - b for p, b in zip(m.parameters(), before)]

        want = step_from(opt.state_dict())
        got = step_from(back.optimizer)
        num = sum(float((a - b).pow(2).sum()) for a, b in zip(got, want))
        den = sum(float(b.pow(2).sum()) for b in want)
        self.assertLess(num / den, 0.1)  # RCKPT_OPT_EPS_DEFAULT
        for a, b in zip(got, want):
            ratio = float(a.norm() / b.norm())
            self.assertTrue(0.8 < ratio < 1.25, ratio)
        # lossless: the state exactly, at its cost
        with rckpt.Checkpointer(job=self.job("adam2"), optimizer_state="lossless") as ck:
            r2 = ck.save(1, model.state_dict(), optimizer=opt).wait()
            back2 = ck.restore_full()
        self.assertEqual(r2.opt_raw_bytes, 0)
        for pid, st in opt.state_dict()["state"].items():
            self.assertTrue(torch.equal(back2.optimizer["state"][pid]["exp_avg_sq"], st["exp_avg_sq"]))
        self.assertLess(r.enc_bytes * 2, r2.enc_bytes)

    def test_eps_per_save_and_lr_schedule(self):
        """A save's threshold: save(eps=...) for one save, eps_schedule="lr"
        to follow the learning rate (eps times lr / initial_lr, at least
        eps_min); each save's quality stays within the eps it took and a
        finer save is larger; bad values are refused before anything is
        written."""
        torch.manual_seed(3)
        model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: max(0.0, 1 - k / 100))
        job = self.job("epsched")
        with self.assertRaises(ValueError):
            rckpt.Checkpointer(job=job, eps_schedule="cosine")
        with self.assertRaises(ValueError):
            rckpt.Checkpointer(job=job, eps=0.01, eps_schedule="lr", eps_min=0.02)
        with rckpt.Checkpointer(job=job, eps=0.01, eps_schedule="lr", eps_min=0.002,
                                optimizer_state="lossless") as ck:
            self.assertEqual(ck.save_eps(), 0.01)  # no optimizer: eps
            bare = torch.optim.AdamW(model.parameters(), lr=1e-3)  # no initial_lr: eps, said once
            with self.assertWarnsRegex(UserWarning, "initial_lr"):
                self.assertEqual(ck.save_eps(bare), 0.01)
            sizes, qual = [], []
            for step, k in ((1, 0), (2, 50), (3, 95)):
                while sched.last_epoch < k:
                    opt.step()
                    sched.step()
                want = max(0.002, 0.01 * opt.param_groups[0]["lr"] / 1e-3)
                self.assertAlmostEqual(ck.save_eps(opt), want, places=12)
                with torch.no_grad():
                    for p in model.parameters():
                        p.add_(torch.randn_like(p), alpha=1e-3)
                r = ck.save(step, model.state_dict(), optimizer=opt).wait()
                self.assertLessEqual(r.quality, want)
                sizes.append(r.enc_bytes)
                qual.append(r.quality)
            self.assertLess(sizes[1], sizes[2])  # eps 0.005, then 0.002 (the floor)
            for bad in (0, 1.0, -0.1, float("nan")):
                with self.assertRaises(ValueError):
                    ck.save(4, model.state_dict(), optimizer=opt, eps=bad)
            r = ck.save(4, model.state_dict(), optimizer=opt, eps=0.0005).wait()
            self.assertLessEqual(r.quality, 0.0005)
            self.assertEqual([s.step for s in ck.steps()], [1, 2, 3, 4])

    def test_eps_following_restores(self):
        """eps_schedule="restores": a trainer that resumes often stores its
        saves finer. Each resume (a writer's restore before it saves) is
        in the job's record; a save's eps is eps times RESUME_RATE_REF over
        the chance that a resume reads it (the resumes per step so far
        times the steps since the last save), at most eps, at least
        eps_min; with "lr+restores" times the lr factor as well."""
        torch.manual_seed(4)
        model = torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 32))
        job = self.job("eprst")

        def ck(**kw):
            return rckpt.Checkpointer(job=job, eps=0.01, eps_schedule="restores", eps_min=0.001, **kw)

        with ck() as c:  # a new run: no resumes, eps
            self.assertEqual(c.save_eps(None, 10), 0.01)
            c.save(10, model.state_dict()).wait()
            c.save(20, model.state_dict()).wait()
            c.restore()  # after its saves: a check, not a resume
        took = []
        for resumes, step in ((1, 30), (2, 40), (3, 50)):
            with ck() as c:
                self.assertIsNotNone(c.load_latest(model))  # resumes from step - 10
                p = min(1.0, resumes * 10 / step)
                want = max(0.001, 0.01 * min(1.0, rckpt.checkpoint.RESUME_RATE_REF / p))
                self.assertAlmostEqual(c.save_eps(None, step), want, places=12)
                r = c.save(step, model.state_dict()).wait()
                self.assertLessEqual(r.quality, want)
                took.append(want)
                c.restore()  # after a save: not a resume
        self.assertEqual(took, [0.01, 0.01, 0.01 * 0.5 / 0.6])
        with ck() as c:  # 4 resumes over 60 steps, saves 10 apart: p = 2/3 when saving 60
            c.load_latest(model)
            self.assertAlmostEqual(c.save_eps(None, 60), 0.01 * 0.5 / (4 * 10 / 60), places=12)
            self.assertEqual(c.save_eps(None, 55), 0.01)  # 5 steps on: less likely read
        with rckpt.Checkpointer(job=job, writer=False) as r:
            self.assertEqual([x.step for x in r.steps()], [10, 20, 30, 40, 50])
        with self.assertRaises(ValueError):
            rckpt.Checkpointer(job=job, eps_schedule="restores+lr")

    def test_quality_callback(self):
        import digits
        t = trained_digits()
        seen = []

        def lax(sd):
            seen.append({k: v.clone() for k, v in sd.items()})
            return 0.0

        job = self.job("q1")
        with rckpt.Checkpointer(job=job, eps=0.05, quality=lax) as ck:
            r_lax = ck.save(1, t.model.state_dict()).wait()
            back = ck.restore()
        self.assertGreaterEqual(len(seen), 1)
        self.assertEqual(set(seen[-1]), {k for k, v in t.model.state_dict().items()})
        for k, v in seen[-1].items():  # it judged exactly what was stored
            self.assertTrue(torch.equal(v, back[k].float()), k)

        q = digits.ValQuality(t)
        q.set_reference(t.model)
        strict = []

        def tight(sd):
            strict.append(q(sd))
            return strict[-1] / 1e-4 * 0.01  # accepts a val-loss rise of 1e-4 only

        job = self.job("q2")
        with rckpt.Checkpointer(job=job, eps=0.05, quality=tight) as ck:
            r_tight = ck.save(1, t.model.state_dict()).wait()
        self.assertGreater(len(strict), 1)
        self.assertGreater(r_tight.enc_bytes, r_lax.enc_bytes)

        def broken(sd):
            raise KeyError("boom")

        job = self.job("q3")
        with rckpt.Checkpointer(job=job, quality=broken, snapshot=False) as ck:
            with self.assertRaises(RuntimeError) as e:
                ck.save(1, t.model.state_dict())
            self.assertIn("boom", str(e.exception))
            self.assertEqual(ck.steps(), [])  # nothing committed
        job = self.job("q4")  # the default snapshot save: at its wait, naming the step
        with rckpt.Checkpointer(job=job, quality=broken) as ck:
            with self.assertRaises(RuntimeError) as e:
                ck.save(1, t.model.state_dict()).wait()
            self.assertIn("boom", str(e.exception))
            self.assertIn("save of step 1", str(e.exception))

    def test_prioritized_partial_saves_and_recovery(self):
        t = trained_digits(steps=40, momentum=0.0)
        job = self.job("scar")
        with rckpt.Checkpointer(job=job, compute="cpu", partial_block=256) as ck:
            r1 = ck.save(1, t.model.state_dict(), partial=0.125).wait()
            self.assertFalse(r1.is_partial)  # a writer's first save is full
            before = {k: v.clone() for k, v in ck.restore(1).items()}
            for _ in range(20):
                t.train_step()
            sd = t.model.state_dict()
            r2 = ck.save(2, sd, partial=0.125).wait()
            self.assertTrue(r2.is_partial)
            self.assertEqual(r2.blocks_saved, -(-r2.blocks // 8))
            self.assertLess(r2.enc_bytes * 2, r1.enc_bytes)
            got = ck.restore(2)
            # the eighth of the blocks that moved most came back near the
            # live values; every other quantized value is step 1's
            w = "0.weight"
            changed = (got[w] != before[w]).float().mean().item()
            self.assertGreater(changed, 0.0)
            self.assertLess(changed, 0.2)
            moved_saved = (got[w] - sd[w]).abs()[got[w] != before[w]].max().item()
            self.assertLess(moved_saved, (before[w] - sd[w]).abs().max().item())
            # partial recovery: lose the first 1000 weights of 0.weight and
            # recover them; the others keep their live values
            live = {k: v.clone() for k, v in sd.items()}
            live[w].view(-1)[:1000] = float("nan")
            step = ck.recover_into(live, {w: [(0, 1000)]})
            self.assertEqual(step, 2)
            self.assertTrue(torch.equal(live[w].view(-1)[:1000], got[w].view(-1)[:1000]))
            self.assertTrue(torch.equal(live[w].view(-1)[1000:], sd[w].view(-1)[1000:]))
            for k in sd:
                if k != w:
                    self.assertTrue(torch.equal(live[k], sd[k]), k)
            with self.assertRaises(ValueError):
                ck.recover_into(live, {w: [(0, live[w].numel() + 1)]})
            with self.assertRaises(ValueError):
                ck.save(3, sd, partial=0.1, select="worst")
        with rckpt.Checkpointer(job=self.job("scar-no"), compute="cpu") as ck:
            ck.save(1, sd).wait()
            with self.assertRaises(rckpt.RckptError):
                ck.save(2, sd, partial=0.5).wait()

    def test_preemption_notice_live(self):
        """A trainer gets SIGTERM, commits an emergency save within the grace
        and exits by itself, and its restart resumes from exactly that step.
        The grace is a generous liveness bound (60 s: CI runs on 2 shared
        cores under sanitizers); how fast the save commits is `rckpt bench`'s
        to measure, not a test's."""
        import signal
        import subprocess
        grace = 60
        job = self.job("preempt")
        ex = os.path.join(here, "..", "..", "client", "python", "examples", "preemptible.py")
        cmd = [sys.executable, ex, "--job", job, "--steps", "100000", "--grace", str(grace),
               "--step-sleep", "0.01", "--width", "64"]
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        lines = []
        for line in child.stdout:
            lines.append(line.strip())
            if line.startswith("step 30"):
                break
        child.send_signal(signal.SIGTERM)
        try:
            out, _ = child.communicate(timeout=grace)
        except subprocess.TimeoutExpired:
            child.kill()  # the platform's kill at the end of the grace
            out, _ = child.communicate()
        lines += out.split("\n")
        self.assertEqual(child.returncode, 0, "the trainer did not exit by itself: %s" % lines[-5:])
        n2c = [ln.split() for ln in lines if ln.startswith("notice-to-commit")]
        self.assertEqual(len(n2c), 1, lines[-5:])
        step, secs = int(n2c[0][1]), float(n2c[0][2])
        self.assertLess(secs, grace)
        with rckpt.Checkpointer(job=job, writer=False) as ro:
            self.assertEqual(ro.steps()[-1].step, step)
        out = subprocess.run(cmd[:4] + ["--steps", str(step + 3)] + cmd[6:], stdout=subprocess.PIPE,
                             text=True, timeout=120, check=True).stdout.split("\n")
        self.assertEqual(out[0], "resumed %d" % step)
        self.assertEqual(out[1], "step %d" % (step + 1))

    def test_handles_closed_at_exit(self):
        # A trainer that never calls close(): the binding must close its
        # handle when the interpreter exits, before Python and the C runtime
        # tear down (a live librados client there crashed 6 of 400 exits in
        # a C loop: SIGSEGV or SIGABRT in its timer and messenger threads).
        # The child registers its check before importing rckpt, so it runs
        # after the binding's own exit handler (atexit is last in, first out).
        job = self.job("atexit")
        child = textwrap.dedent("""
            import atexit, os, sys
            ck = None
            def after():
                print("open" if ck is not None and ck._h is not None else "closed", flush=True)
            atexit.register(after)
            sys.path.insert(0, %r)
            import rckpt, rckpt._lib
            if sys.argv[1] == "without":  # the control: no exit handler
                atexit.unregister(rckpt._lib._close_open)
            ck = rckpt.Checkpointer(job=%r, compute="cpu")
        """) % (os.path.join(here, "..", "..", "client", "python"), job)
        for mode, want in (("with", "closed"), ("without", "open")):
            r = subprocess.run([sys.executable, "-c", child, mode], capture_output=True, text=True, timeout=300)
            self.assertEqual(r.stdout.strip(), want, "%s the binding's exit handler: stdout %r, stderr %s"
                             % (mode, r.stdout, r.stderr[-2000:]))
            if mode == "with":
                self.assertEqual(r.returncode, 0, "exited %d: %s" % (r.returncode, r.stderr[-2000:]))

    def test_handles_in_forked_child(self):
        """A forked child (a DataLoader worker) inherits the parent's open
        handles but not the threads behind them: closing one there, by
        close(), by the garbage collector or at exit, waited for librados
        threads that do not exist in the child and hung it (a DataLoader
        epoch that never ended). The child leaves them alone; the parent's
        own go on working."""
        job = self.job("fork")
        sd = {"w": torch.randn(64, 64)}
        ck = rckpt.Checkpointer(job=job, compute="cpu")
        ck.save(1, sd).wait()
        ds = self._test_dataset("-fork", 8, 4)
        loader = rckpt.PCRDataset(ds).distributed(4)
        next(iter(loader))
        pending = ck.save(2, sd)  # may still run in the parent at the fork
        pid = os.fork()
        if pid == 0:  # the child: every way a handle gets closed
            try:
                ck.close()
                loader.close()
                del ck, loader
                import gc
                gc.collect()
                rckpt._lib._close_open()
            finally:
                os._exit(0)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.1)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            self.fail("the forked child hung closing its parent's handles")
        self.assertEqual(status, 0)
        pending.wait()
        ck.save(3, sd).wait()  # the parent's handle still works
        self.assertEqual([s.step for s in ck.steps()][-3:], [1, 2, 3])
        self.assertTrue(next(iter(loader)))
        loader.close()
        ck.close()

    def test_errors(self):
        with self.assertRaises(rckpt.RckptError) as e:
            rckpt.Checkpointer(job="bad/name")
        self.assertEqual(e.exception.code, -22)
        self.assertIn("rckpt_job_open", str(e.exception))
        job = self.job("err")
        sd = {"w": torch.randn(100, 100)}
        with rckpt.Checkpointer(job=job, snapshot=False) as ck:  # errors at save(), not later
            with self.assertRaises(rckpt.RckptError) as e:
                ck.restore()
            self.assertEqual(e.exception.code, -2)
            ck.save(5, sd).wait()
            with self.assertRaises(rckpt.RckptError) as e:  # steps must grow
                ck.save(5, sd)
            self.assertEqual(e.exception.code, -22)
            bad = {"w": torch.full((100, 100), float("nan"))}
            with self.assertRaises(rckpt.RckptError) as e:
                ck.save(6, bad)
            self.assertEqual(e.exception.code, -33)  # EDOM
            self.assertIn("NaN", str(e.exception))
            # other tensors than the last step's: a step of its own layout
            ck.save(7, {"w": torch.randn(10, 10)}).wait()
            self.assertEqual(tuple(ck.restore(7)["w"].shape), (10, 10))
            self.assertEqual(tuple(ck.restore(5)["w"].shape), (100, 100))
            # a signed gradient mean handed as the RMS (issue 50): refused
            with self.assertRaises(rckpt.RckptError) as e:
                ck.save(8, sd, grads={"w": torch.randn(100, 100)})
            self.assertEqual(e.exception.code, -33)  # EDOM, naming the gradient
            self.assertIn("gradient's RMS", str(e.exception))
            ck.save(9, sd, grads={"w": torch.randn(100, 100).abs()}).wait()  # an RMS is taken
            with self.assertRaises(rckpt.RckptError) as e:
                with rckpt.Checkpointer(job=job):  # a second writer
                    pass
            self.assertEqual(e.exception.code, -16)
            self.assertEqual([(s.step, s.new_layout) for s in ck.steps()], [(5, False), (7, True), (9, True)])
        with rckpt.Checkpointer(job=job, writer=False) as ro:
            with self.assertRaises(rckpt.RckptError) as e:
                ro.save(7, sd)
            self.assertEqual(e.exception.code, -1)

    def test_rewind(self):
        """A loss spike: rewind to an earlier step and save on anew; the new
        line restores, a restarted writer continues it; a rewind keeps a
        branch, a new job starts from a step; eps=0 is refused."""
        job = self.job("rewind")
        torch.manual_seed(0)
        first = {s: {"w": torch.randn(64, 64), "b": torch.randn(64)} for s in range(1, 7)}
        with rckpt.Checkpointer(job=job) as ck:
            for s in range(1, 7):
                ck.save(s, first[s])
            with self.assertRaises(rckpt.RckptError) as e:  # not committed
                ck.rewind(9)
            self.assertEqual(e.exception.code, -22)
            ck.rewind(3)
            self.assertEqual([x.step for x in ck.steps()], [1, 2, 3])
            self.assertIsNone(ck.folds_here())
            again = {s: {"w": torch.randn(64, 64), "b": torch.randn(64)} for s in range(4, 7)}
            for s in range(4, 6):
                ck.save(s, again[s]).wait()
        with rckpt.Checkpointer(job=job) as ck:  # a restarted writer continues the new line
            ck.save(6, again[6]).wait()
            self.assertEqual([x.step for x in ck.steps()], [1, 2, 3, 4, 5, 6])
            for s in range(4, 7):
                got = ck.restore(step=s)
                self.assertTrue(torch.equal(got["b"], bf16(again[s]["b"])))  # 1-D: kept as bf16
                self.assertLess(rel_err(got["w"], again[s]["w"]), 0.05)
            self.assertTrue(torch.equal(ck.restore(step=2)["b"], bf16(first[2]["b"])))
            ck.rewind(5, branch="spike")  # 6 kept as a job of its own
            ft = self.job("rewind-ft")
            ck.branch(ft, 2)  # a new job from step 2
        with rckpt.Checkpointer(job=job + ".spike", writer=False) as br:
            self.assertEqual([x.step for x in br.steps()], [5, 6])
            self.assertTrue(torch.equal(br.restore(step=6)["b"], bf16(again[6]["b"])))
        rckpt.Checkpointer.delete(job=job + ".spike")
        with rckpt.Checkpointer(job=ft) as f:
            self.assertTrue(torch.equal(f.restore(step=2)["b"], bf16(first[2]["b"])))
            f.save(3, again[4]).wait()  # fine-tuning goes on from it
            self.assertEqual([x.step for x in f.steps()], [2, 3])
        with self.assertRaises(rckpt.RckptError) as e:
            rckpt.Checkpointer(job=job, eps=0)
        self.assertEqual(e.exception.code, -22)
        self.assertIn("eps 0", str(e.exception))

    def test_nested_state_dict(self):
        """A trainer's usual nested checkpoint ({"model", "optim", scheduler,
        RNG, counters}, lists and tuples inside) is flattened by path: the
        model's float tensors are compressed (not kept whole in the
        attachment), the optimizer's state stays lossless when asked, and with
        lossless=True every leaf round-trips equal; restore_into loads it in
        place into the live tensors."""
        torch.manual_seed(5)
        model = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, batch_first=True)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        for _ in range(3):
            x = torch.randn(8, 16, 64)
            loss = (model(x) - x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()

        def tree(epoch):
            return {"model": model.state_dict(), "optim": opt.state_dict(),
                    "sched": {"epoch": epoch, "lrs": [1e-3, 5e-4], "#odd/key%": torch.ones(3)},
                    "rng": torch.get_rng_state(), "pair": (torch.arange(4.0), "tag"), "step": 7}

        def same(a, b, path=""):
            if isinstance(a, dict):  # an OrderedDict comes back a dict, in the same order
                self.assertIsInstance(b, dict, path)
            else:
                self.assertIs(type(a), type(b), path)
            if isinstance(a, torch.Tensor):
                self.assertEqual(a.dtype, b.dtype, path)
                self.assertTrue(torch.equal(a, b), path)
            elif isinstance(a, dict):
                self.assertEqual(list(a.keys()), list(b.keys()), path)
                for k in a:
                    same(a[k], b[k], "%s/%s" % (path, k))
            elif isinstance(a, (list, tuple)):
                self.assertEqual(len(a), len(b), path)
                for i, (x, y) in enumerate(zip(a, b)):
                    same(x, y, "%s/%d" % (path, i))
            else:
                self.assertEqual(a, b, path)

        job = self.job("nested")
        with rckpt.Checkpointer(job=job, lossless=True, optimizer_state="lossless") as ck:
            want = tree(3)
            r = ck.save(1, want).wait()
            model_bytes = sum(v.numel() * 4 for v in model.state_dict().values())
            self.assertGreater(r.raw_bytes, model_bytes)  # the model's tensors went to the compressor
            got = ck.restore_full(step=1)
            self.assertTrue(got.stats["exact"])
            same(want, got.state_dict)
            ck.save(2, tree(4), lossless=False).wait()  # lossy: a base after an exact step
            self.assertIsNone(ck.steps()[1].parent)
            lossy = ck.restore(step=2)
            same(lossy["optim"], opt.state_dict())  # the optimizer's state: lossless
            self.assertEqual(lossy["sched"]["epoch"], 4)
            self.assertLess(rel_err(lossy["model"]["linear1.weight"],
                                    model.state_dict()["linear1.weight"]), 0.05)
            # in place: the live tensors themselves get the saved values
            ref = {k: v.clone() for k, v in model.state_dict().items()}
            live = tree(0)
            live["model"] = {k: torch.zeros_like(v) for k, v in ref.items()}
            w = live["model"]["linear1.weight"]
            ptr = w.data_ptr()
            ck.restore_into(live, step=1)
            self.assertIs(live["model"]["linear1.weight"], w)
            self.assertEqual(w.data_ptr(), ptr)  # read in place, no second copy
            self.assertTrue(torch.equal(w, ref["linear1.weight"]))
            m2 = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, batch_first=True)
            p2 = m2.linear1.weight.data_ptr()
            ck.restore_into({"model": m2.state_dict(), "optim": opt.state_dict(),
                             "sched": {"epoch": 0, "lrs": [0, 0], "#odd/key%": torch.zeros(3)},
                             "rng": torch.get_rng_state(), "pair": (torch.zeros(4), "x"), "step": 0}, step=1)
            self.assertEqual(m2.linear1.weight.data_ptr(), p2)
            self.assertTrue(torch.equal(m2.linear1.weight, ref["linear1.weight"]))  # the module's own
            self.assertEqual(live["sched"]["epoch"], 3)
            with self.assertRaises(TypeError):
                ck.save(3, [1, 2])

    def _group(self, job, world, spec, expect_killed=None):
        """Runs `world` group_worker.py ranks with spec; their JSON results
        (None for a rank killed as spec says)."""
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            return self._group_wait(self._group_start(job, world, spec, tmp), expect_killed)

    def _group_start(self, job, world, spec, tmp):
        import json
        with open(os.path.join(tmp, "spec.json"), "w") as f:
            json.dump(spec, f)
        env = dict(os.environ, GLOO_SOCKET_IFNAME="lo")
        errs = [open(os.path.join(tmp, "%d.err" % r), "w+") for r in range(world)]
        procs = [subprocess.Popen([sys.executable, os.path.join(here, "group_worker.py"), job, str(r),
                                   str(world), os.path.join(tmp, "rdv"), os.path.join(tmp, "%d.json" % r),
                                   os.path.join(tmp, "spec.json")], env=env, stderr=errs[r])
                 for r in range(world)]
        return tmp, procs, errs

    def _group_wait(self, started, expect_killed=None):
        import json
        import signal
        tmp, procs, errs = started
        out, bad = [], []
        for r, p in enumerate(procs):
            rc = p.wait(timeout=300)
            errs[r].seek(0)
            err = errs[r].read()
            errs[r].close()
            if r == expect_killed and rc == -signal.SIGKILL:
                out.append(None)
                continue
            if rc != 0:
                why = "signal %s" % signal.Signals(-rc).name if rc < 0 else "exit %d" % rc
                bad.append("rank %d: %s\n%s" % (r, why, err[-2000:]))
                continue
            with open(os.path.join(tmp, "%d.json" % r)) as f:
                out.append(json.load(f))
        self.assertEqual(bad, [])
        return out

    def test_group_save(self):
        """Distributed training (issue 27): a transformer layer with its
        AdamW state saved for 10 steps by 4 ranks over gloo, ZeRO-3 slices;
        restored on 1, 2, 3 and 4 ranks, every slice bit-identical to one
        process's decode; a rank SIGKILLed mid-save fails the step on every
        rank and the head stays; restarted on 2 ranks, the next step is a
        delta; a second group is refused while one holds the job; a nested
        tree saved exact by the group comes back with every leaf equal; the
        same model saved DDP style for 10 steps restores too."""
        import hashlib
        sys.path.insert(0, here)
        import group_worker
        job = self.job("group")
        res = self._group(job, 4, {"mode": "zero3", "first": 1, "last": 10})
        for r in res:
            self.assertIsNone(r["error"])
            self.assertEqual([s[0] for s in r["saved"]], list(range(1, 11)))
        want = group_worker.model_at(10)
        with rckpt.Checkpointer(job=job, writer=False) as ck:
            steps = ck.steps()
            self.assertEqual([s.step for s in steps], list(range(1, 11)))
            self.assertTrue(all(s.parent == s.step - 1 for s in steps[1:]))  # deltas
            self.assertTrue(all(s.ranks == 4 for s in steps))
            got = ck.restore_full(step=10)
            self.assertEqual(got.state_dict["step"], 10)
            for name, t in want.items():  # (how well Adam's state compresses is issue 28's)
                if name.startswith("model/"):
                    self.assertLess(rel_err(got.state_dict[name], t), 0.05, name)
            flat = {k: v.reshape(-1) for k, v in got.state_dict.items() if isinstance(v, torch.Tensor)}
        for r, x in enumerate(self._group(job, 4, {"restore": 10})):
            for name, (a, b, h) in x["slices"].items():
                self.assertEqual(h, hashlib.sha256(flat[name][a:b].numpy().tobytes()).hexdigest(),
                                 (4, r, name))
        # the slices of 2, 1 and 3 ranks: the same restore_slice calls a
        # rank's reader makes (group_worker.py), made here; 4 reader
        # processes at once are above, and each more would add only an
        # interpreter's start (torch, gloo), seconds on 2 shared cores
        with rckpt.Checkpointer(job=job, writer=False) as rd:
            for world in (2, 1, 3):
                for r in range(world):
                    for name, t in want.items():
                        a, b = group_worker.slice_of(t.numel(), r, world)
                        got = rd.restore_slice(name, a, b - a, step=10)
                        self.assertEqual(got.numpy().tobytes(), flat[name][a:b].numpy().tobytes(), (world, r, name))
        # a rank killed as step 11's save begins: every other rank fails it
        res = self._group(job, 4, {"mode": "zero3", "first": 11, "last": 11, "kill_at": 11},
                          expect_killed=3)
        for r in res[:3]:
            self.assertEqual(r["error"][0], 11)
        with rckpt.Checkpointer(job=job, writer=False) as ck:
            self.assertEqual(ck.steps()[-1].step, 10)
            self.assertEqual(ck.restore(step=10)["step"], 10)
        # restarted on 2 ranks: the lock of the dead group's rank 0 was
        # released when it closed; the next step is a delta on the head
        res = self._group(job, 2, {"mode": "zero3", "first": 11, "last": 12})
        for r in res:
            self.assertIsNone(r["error"])
        with rckpt.Checkpointer(job=job, writer=False) as ck:
            steps = {s.step: s for s in ck.steps()}
            self.assertEqual(steps[11].parent, 10)
            self.assertEqual(steps[11].ranks, 2)
            self.assertEqual(steps[12].parent, 11)
            got = ck.restore(step=12)
            for name, t in group_worker.model_at(12).items():
                if name.startswith("model/"):
                    self.assertLess(rel_err(got[name], t), 0.05, name)
        # a second group while one holds the job: refused on every rank
        import tempfile
        with tempfile.TemporaryDirectory() as t1, tempfile.TemporaryDirectory() as t2:
            hold = os.path.join(t1, "hold")
            open(hold, "w").close()
            holders = self._group_start(job, 2, {"mode": "hold", "hold": hold,
                                                 "opened": os.path.join(t1, "opened")}, t1)
            deadline = time.time() + 120
            while not all(os.path.exists(os.path.join(t1, "opened.%d" % r)) for r in range(2)):
                self.assertLess(time.time(), deadline, "the first group never opened the job")
                time.sleep(0.1)
            second = self._group_wait(self._group_start(job, 2, {"mode": "zero3", "first": 13, "last": 13}, t2))
            os.unlink(hold)
            self._group_wait(holders)
            for r in second:
                self.assertEqual(r["error"][:2], ["open", -16])  # EBUSY
        # a nested tree saved exact by the group: every leaf comes back equal
        nested = self.job("group-nested")
        for r in self._group(nested, 4, {"mode": "zero3", "first": 1, "last": 2, "nested": True}):
            self.assertIsNone(r["error"])
        with rckpt.Checkpointer(job=nested, writer=False) as ck:
            got = ck.restore_full(step=2)
            self.assertTrue(got.stats["exact"])
            tree = got.state_dict
            self.assertEqual(tree["sched"], {"epoch": 3, "lrs": [1e-3, 5e-4], "ids": (1, "x")})
            self.assertEqual(tree["step"], 2)
            for name, t in group_worker.model_at(2).items():
                part, key = name.split("/", 1)
                self.assertTrue(torch.equal(tree[part][key], t), name)
        ddp = self.job("group-ddp")
        for r in self._group(ddp, 4, {"mode": "ddp", "first": 1, "last": 10}):
            self.assertIsNone(r["error"])
        with rckpt.Checkpointer(job=ddp, writer=False) as ck:
            self.assertEqual([s.step for s in ck.steps()], list(range(1, 11)))
            got = ck.restore(step=10)
            for name, t in group_worker.model_at(10).items():
                if name.startswith("model/"):
                    self.assertLess(rel_err(got[name], t), 0.05, name)

    def test_lossless(self):
        """The exact tier: a transformer trained a few steps with AdamW,
        its milestone saved lossless=True, restores to the source's SHA-256
        for every tensor (fp32, and a bf16 copy of the model in another
        job, two exact steps, the second a delta on the first); the lossy
        save after it is a base (its records hold values, not levels), the
        next a delta; pin(exact=True) is refused for a lossy step."""
        import hashlib

        def sha(t):
            return hashlib.sha256(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()

        torch.manual_seed(3)
        model = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, batch_first=True)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        job = self.job("lossless")
        sums = {}
        with rckpt.Checkpointer(job=job) as ck:
            for s in range(1, 5):
                x = torch.randn(8, 16, 64)
                loss = (model(x) - x).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
                ck.save(s, sd, lossless=(s == 2)).wait()
                sums[s] = {k: sha(v) for k, v in sd.items()}
            steps = {x.step: x for x in ck.steps()}
            self.assertTrue(steps[2].exact and steps[2].parent is None)
            self.assertFalse(steps[3].exact)
            self.assertIsNone(steps[3].parent)
            self.assertEqual(steps[4].parent, 3)
            with self.assertRaises(rckpt.RckptError) as e:
                ck.pin(3, exact=True)
            self.assertEqual(e.exception.code, -22)
            self.assertFalse(ck.pinned(3))
            ck.pin(2, exact=True)
            self.assertTrue(ck.pinned(2))
        with rckpt.Checkpointer(job=job, writer=False) as rd:
            got = rd.restore_full(step=2)
            self.assertTrue(got.stats["exact"])
            self.assertEqual({k: sha(v) for k, v in got.state_dict.items()}, sums[2])
            lossy = rd.restore_full(step=3)
            self.assertFalse(lossy.stats["exact"])
            self.assertNotEqual({k: sha(v) for k, v in lossy.state_dict.items()}, sums[3])
        bf = {k: v.detach().to(torch.bfloat16) for k, v in model.state_dict().items()}
        with rckpt.Checkpointer(job=self.job("lossless-bf16"), lossless=True) as ck:
            ck.save(1, bf).wait()
            got = ck.restore(step=1)
            self.assertEqual({k: sha(v) for k, v in got.items()}, {k: sha(v) for k, v in bf.items()})
            bf2 = {k: v + (v.abs() * 2 ** -7 if v.is_floating_point() else 0) for k, v in bf.items()}
            ck.save(2, bf2).wait()
            self.assertEqual({x.step: x.parent for x in ck.steps()}[2], 1)
            got = ck.restore(step=2)
            self.assertEqual({k: sha(v) for k, v in got.items()}, {k: sha(v) for k, v in bf2.items()})
            with self.assertRaises(ValueError):
                ck.save(2, bf, partial=0.5)

    @unittest.skipIf(not os.environ.get("RCKPT_CLI") or not os.environ.get("RCKPT_TEST_PCR_DIR"),
                     "RCKPT_CLI or RCKPT_TEST_PCR_DIR not set")
    def test_pcr_distributed_locality(self):
        """Four learners (processes, torch.distributed over gloo on
        loopback) read a dataset three epochs in each mode: every step's
        local batches together are the global batch, the same samples and
        bytes in both modes; after the first epoch the locality mode reads
        nothing from the cluster and exchanges the imbalance."""
        import json
        import tempfile
        ds = self._test_dataset("-loc", 100, 16)
        world = 4
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, GLOO_SOCKET_IFNAME="lo")
            errs = [open(os.path.join(tmp, "%d.err" % r), "w+") for r in range(world)]
            procs = [subprocess.Popen([sys.executable, os.path.join(here, "loader_worker.py"), ds, str(r),
                                       str(world), os.path.join(tmp, "rdv"), os.path.join(tmp, "%d.json" % r)],
                                      env=env, stderr=errs[r]) for r in range(world)]
            # every learner's exit status or signal, and its stderr: a
            # learner that crashes at exit fails the test too
            bad = []
            for r, p in enumerate(procs):
                rc = p.wait(timeout=300)
                errs[r].seek(0)
                err = errs[r].read()
                errs[r].close()
                if rc != 0:
                    import signal
                    why = "signal %s" % signal.Signals(-rc).name if rc < 0 else "exit %d" % rc
                    bad.append("learner %d: %s\n%s" % (r, why, err[-2000:]))
            self.assertEqual(bad, [])
            res = []
            for r in range(world):
                with open(os.path.join(tmp, "%d.json" % r)) as f:
                    res.append(json.load(f))
        G = world * 4
        for epoch in range(3):
            perm = (ctypes_u32 * 100)()
            rckpt._lib.lib.rckpt_loc_order(7, epoch, 100, perm)
            steps = len(res[0]["regular"][epoch]["steps"])
            self.assertEqual(steps, (100 + G - 1) // G)
            for s in range(steps):
                want = sorted(perm[s * G:(s + 1) * G])
                for mode in ("regular", "locality"):
                    got = [tuple(x) for r in range(world) for x in res[r][mode][epoch]["steps"][s]]
                    self.assertEqual(sorted(i for i, _ in got), want, (mode, epoch, s))
                    if mode == "regular":
                        ref = dict(got)
                    else:
                        self.assertEqual(dict(got), ref)  # the same bytes
                    for r in range(world):  # the shares
                        n = len(res[r][mode][epoch]["steps"][s])
                        g = len(want)
                        self.assertEqual(n, g // world + (r < g % world))
            reg = sum(res[r]["regular"][epoch]["storage_bytes"] for r in range(world))
            loc = sum(res[r]["locality"][epoch]["storage_bytes"] for r in range(world))
            self.assertGreater(reg, 0)
            if epoch == 0:
                self.assertEqual(loc, reg)
            else:
                self.assertEqual(loc, 0)
                self.assertGreater(sum(res[r]["locality"][epoch]["recv_samples"] for r in range(world)), 0)

    @unittest.skipIf(not os.environ.get("RCKPT_CLI") or not os.environ.get("RCKPT_TEST_PCR_DIR"),
                     "RCKPT_CLI or RCKPT_TEST_PCR_DIR not set")
    def test_pcr_data_position(self):
        """The data position saved with a step (loader.state_dict() in the
        step's tree) and restored into a new loader mid-epoch: it yields
        exactly the samples the epoch had left; a position of another seed
        is refused."""
        ds = self._test_dataset("-pos", 40, 10)

        def loader(seed=9):
            return rckpt.PCRDataset(ds, decode=False).distributed(local_batch=4, seed=seed)

        ref = loader()
        ref.set_epoch(2)
        want = []
        for _ in ref:
            want.append(list(ref.ids))
        self.assertEqual(len(want), 10)
        first = loader()
        first.set_epoch(2)
        it = iter(first)
        for _ in range(3):
            next(it)
        job = self.job("pos")
        with rckpt.Checkpointer(job=job) as ck:
            ck.save(1, {"model": {"w": torch.randn(8, 8)}, "data": first.state_dict()}).wait()
        with rckpt.Checkpointer(job=job, writer=False) as ck:
            pos = ck.restore(step=1)["data"]
        self.assertEqual((pos["epoch"], pos["consumed"]), (2, 12))
        again = loader()
        again.load_state_dict(pos)
        got = []
        for _ in again:
            got.append(list(again.ids))
        self.assertEqual(got, want[3:])
        self.assertEqual(again.state_dict()["consumed"], 40)
        with self.assertRaises(ValueError):
            loader(seed=10).load_state_dict(pos)

    def test_pcr_dataset(self):
        src = os.environ["RCKPT_TEST_PCR_DIR"]
        files = sorted(f for f in os.listdir(src) if f.endswith(".jpg"))[:120]
        ds = TAG + "-pcr"
        subprocess.run([os.environ["RCKPT_CLI"], "pcr", "rm", "--dataset", ds],
                       capture_output=True)
        self.addCleanup(subprocess.run, [os.environ["RCKPT_CLI"], "pcr", "rm", "--dataset", ds],
                        capture_output=True)
        subprocess.run([os.environ["RCKPT_CLI"], "pcr", "build", "--dataset", ds,
                        "--images-per-record", "50"] + [os.path.join(src, f) for f in files],
                       check=True, capture_output=True)
        full = rckpt.PCRDataset(ds)
        self.assertEqual(len(full), 120)
        x, y = full[7]
        self.assertEqual(x.dim(), 3)
        self.assertEqual(x.shape[2], 3)
        self.assertEqual(x.dtype, torch.uint8)
        from PIL import Image
        import numpy as np
        ref = np.asarray(Image.open(os.path.join(src, files[7])).convert("RGB"))
        self.assertEqual(tuple(x.shape), ref.shape)
        self.assertLess(np.abs(x.numpy().astype(int) - ref.astype(int)).mean(), 3.0)
        with self.assertRaises(IndexError):
            full[120]
        batch = full.get_batch([3, 60, 3])
        self.assertTrue(torch.equal(batch[0][0], batch[2][0]))
        raw = rckpt.PCRDataset(ds, decode=False, fidelity=1)
        self.assertTrue(raw[0][0].startswith(b"\xff\xd8"))
        # a fidelity that is not 1..groups is refused, naming it (issue 63)
        for bad in (0, -1, 1.5, True):
            with self.assertRaises(ValueError) as e:
                rckpt.PCRDataset(ds, fidelity=bad)
            self.assertIn("fidelity", str(e.exception))
        groups = full.info.groups
        with self.assertRaises(rckpt.RckptError) as e:
            rckpt.PCRDataset(ds, fidelity=groups + 1)
        self.assertEqual(e.exception.code, -22)
        self.assertIn("fidelity=%d" % (groups + 1), str(e.exception))
        self.assertIn("%d scan groups" % groups, str(e.exception))
        # workers kept across epochs by default (spawned ones start again
        # every epoch otherwise: docs/datasets.md)
        self.assertTrue(full.loader(batch_size=10, num_workers=1).persistent_workers)
        self.assertFalse(full.loader(batch_size=10, num_workers=1, persistent_workers=False).persistent_workers)
        self.assertFalse(full.loader(batch_size=10).persistent_workers)
        it = rckpt.PCRIterableDataset(ds, fidelity=1)
        with self.assertRaises(ValueError) as e:
            it.set_fidelity(groups + 1)
        self.assertIn("scan groups", str(e.exception))
        it.set_fidelity(groups)
        stats = {}
        for k in (1, None):
            it = rckpt.PCRIterableDataset(ds, fidelity=k)
            n = sum(1 for _ in it)
            self.assertEqual(n, 120)
            stats[k] = it.read_stats()["wire_bytes"]
            it.close()
        self.assertLess(stats[1], stats[None])
        loader = torch.utils.data.DataLoader(rckpt.PCRIterableDataset(
            ds, fidelity=2, transform=lambda im: im.float().mean(),
            target_transform=lambda y: 0 if y is None else 1), batch_size=16)
        self.assertEqual(sum(len(b[0]) for b in loader), 120)
        self._pcr_workers(ds)
        with self.assertRaises(rckpt.RckptError) as e:
            rckpt.PCRDataset(TAG + "-none")
        self.assertEqual(e.exception.code, -2)

    @unittest.skipIf(not os.environ.get("RCKPT_CLI") or not os.environ.get("RCKPT_TEST_PCR_DIR"),
                     "RCKPT_CLI or RCKPT_TEST_PCR_DIR not set")
    def test_pcr_scale(self):
        """scale= decodes at 1/2, 1/4, 1/8 (each side rounded up) on both
        datasets, the same pixels by either route; "auto" is 1/8 at group 1
        and full size at the last; bad values are refused."""
        ds = self._test_dataset("-pcr-scale", 20, 8)
        it = rckpt.PCRIterableDataset(ds)
        full = [x for x, _ in it]
        it.close()
        for s in (2, 4, 8):
            it = rckpt.PCRIterableDataset(ds, scale=s)
            got = [x for x, _ in it]
            it.close()
            m = rckpt.PCRDataset(ds, scale=s)
            for i, x in enumerate(got):
                h, w = full[i].shape[:2]
                self.assertEqual(tuple(x.shape), ((h + s - 1) // s, (w + s - 1) // s, 3), (s, i))
                self.assertTrue(torch.equal(m[i][0], x), (s, i))
            # a smaller picture of the same image: about its mean brightness
            self.assertLess(abs(got[0].float().mean() - full[0].float().mean()), 4.0)
            m.close()
        a1 = rckpt.PCRIterableDataset(ds, fidelity=1, scale="auto")
        for i, (x, _) in enumerate(a1):
            h, w = full[i].shape[:2]
            self.assertEqual(tuple(x.shape), ((h + 7) // 8, (w + 7) // 8, 3))
        a1.close()
        m = rckpt.PCRDataset(ds, scale="auto")
        self.assertTrue(torch.equal(m[5][0], full[5]))
        with self.assertRaises(ValueError):
            m.distributed(local_batch=2)
        m.close()
        for bad in (3, 0, True, "half"):
            with self.assertRaises(ValueError):
                rckpt.PCRDataset(ds, scale=bad)
        with self.assertRaises(ValueError):
            rckpt.PCRIterableDataset(ds, decode=False, scale=2)

    @unittest.skipIf(not os.environ.get("RCKPT_CLI") or not os.environ.get("RCKPT_TEST_PCR_DIR"),
                     "RCKPT_CLI or RCKPT_TEST_PCR_DIR not set")
    def test_pcr_fixed_size(self):
        """size= gives HxWx3 images the default collate stacks (map-style,
        its loader() and the iterable; workers 0 and 2); the map-style
        dataset's image i, by any route and in any order, is the
        iterable's image i, pixel for pixel."""
        ds = self._test_dataset("-pcr-size", 40, 16)
        it = rckpt.PCRIterableDataset(ds)
        want = [x for x, _ in it]  # id order
        it.close()
        self.assertEqual(len(want), 40)
        self.assertGreater(len({tuple(x.shape) for x in want}), 1)  # collate would fail unsized
        data = torch.utils.data
        hw = (40, 56)
        for fit in rckpt.pcr.FITS:
            m = rckpt.PCRDataset(ds, size=hw, fit=fit, target_transform=_label_len)
            x, _ = m[3]
            self.assertEqual((tuple(x.shape), x.dtype), (hw + (3,), torch.uint8))
            for workers in (0, 2):
                for loader in (data.DataLoader(m, batch_size=8, num_workers=workers),
                               m.loader(8, shuffle=True, num_workers=workers),
                               data.DataLoader(rckpt.PCRIterableDataset(
                                   ds, size=hw, fit=fit, target_transform=_label_len),
                                   batch_size=8, num_workers=workers)):
                    shapes = [tuple(b[0].shape) for b in loader]
                    self.assertEqual(shapes, [(8,) + hw + (3,)] * 5, (fit, workers))
            m.close()
        # a crop is a window of the image; a resize keeps its brightness
        big = next(i for i, x in enumerate(want) if x.shape[0] >= 50 and x.shape[1] >= 70)
        h, w = want[big].shape[:2]
        c = rckpt.PCRDataset(ds, size=(50, 70), fit="center_crop")[big][0]
        top, left = (h - 50) // 2, (w - 70) // 2
        self.assertTrue(torch.equal(c, want[big][top:top + 50, left:left + 70]))
        r = rckpt.PCRDataset(ds, size=(50, 70))[big][0]
        self.assertLess(abs(r.float().mean() - want[big].float().mean()), 3.0)
        small = min(range(40), key=lambda i: want[i].shape[0] * want[i].shape[1])
        hs, ws = want[small].shape[:2]
        up = rckpt.PCRDataset(ds, size=(hs + 9, ws + 20), fit="random_crop")[small][0]
        self.assertEqual(tuple(up.shape), (hs + 9, ws + 20, 3))  # scaled up to cover, then cropped
        same = rckpt.PCRDataset(ds, size=(hs, ws))[small][0]
        self.assertTrue(torch.equal(same, want[small]))
        # map-style == iterable, by every route and order
        m = rckpt.PCRDataset(ds)
        perm = torch.randperm(40, generator=torch.Generator().manual_seed(5)).tolist()
        for i in perm[:10]:
            self.assertTrue(torch.equal(m[i][0], want[i]), i)
        got = m.get_batch(perm + perm[:3])
        self.assertEqual(len(got), 43)
        for i, (x, _) in zip(perm + perm[:3], got):
            self.assertTrue(torch.equal(x, want[i]), i)
        self.assertTrue(all(torch.equal(x, want[i]) for i, (x, _) in zip(perm, m[torch.tensor(perm)])))
        for workers in (0, 2):
            got = [x for b in m.loader(6, num_workers=workers, collate_fn=list) for x, _ in b]
            self.assertEqual(len(got), 40)
            for i, x in enumerate(got):
                self.assertTrue(torch.equal(x, want[i]), (workers, i))
        for b in m.loader(6, collate_fn=list):  # leaves a read ahead behind
            break
        self.assertTrue(torch.equal(m[33][0], want[33]))
        self.assertTrue(torch.equal(m.get_batch([6, 7, 8, 9, 10, 11])[5][0], want[11]))
        m.close()
        for bad in (dict(size=(0, 5)), dict(size=(4, 5, 6)), dict(size=8, fit="stretch"),
                    dict(size=8, decode=False)):
            with self.assertRaises(ValueError):
                rckpt.PCRDataset(ds, **bad)

    def _test_dataset(self, suffix, images, per_record):
        """A PCR dataset of the first `images` test JPEGs, `per_record` to a
        record, built with the CLI afresh and removed after the test."""
        src = os.environ["RCKPT_TEST_PCR_DIR"]
        files = sorted(f for f in os.listdir(src) if f.endswith(".jpg"))[:images]
        ds = TAG + suffix
        cli = os.environ["RCKPT_CLI"]
        subprocess.run([cli, "pcr", "rm", "--dataset", ds], capture_output=True)
        self.addCleanup(subprocess.run, [cli, "pcr", "rm", "--dataset", ds], capture_output=True)
        subprocess.run([cli, "pcr", "build", "--dataset", ds, "--images-per-record", str(per_record)]
                       + [os.path.join(src, f) for f in files], check=True, capture_output=True)
        return ds

    def _pcr_workers(self, ds):
        """DataLoader workers read only their own records and together yield
        every image once; shuffle permutes records per epoch and images in a
        buffer, the same set each epoch."""
        one = rckpt.PCRIterableDataset(ds, decode=False, transform=_digest)
        order = [x for x, _ in one]
        want = sorted(order)
        full = one.read_stats()["wire_bytes"]
        one.close()
        self.assertEqual(len(set(want)), 120)
        for shuffle in (False, True):
            it = rckpt.PCRIterableDataset(ds, decode=False, transform=_digest, shuffle=shuffle,
                                          seed=3, shuffle_buffer=16)
            for epoch in (0, 1):
                it.set_epoch(epoch)
                loader = torch.utils.data.DataLoader(it, batch_size=None, num_workers=2)
                got = [x for x, _ in loader]
                self.assertEqual(sorted(got), want)  # every image exactly once
                if shuffle:
                    self.assertNotEqual(got, [x for x, _ in
                                              torch.utils.data.DataLoader(it, batch_size=None)])
            it.close()
        # in one process, posing as worker 1 of 2: it reads record 1 alone
        shard = rckpt.PCRIterableDataset(ds, decode=False, transform=_digest)
        self.assertEqual(shard.records(1, 2), [1])
        import unittest.mock
        with unittest.mock.patch("torch.utils.data.get_worker_info", return_value=_Worker(1, 2)):
            base = shard.read_stats()["wire_bytes"]
            mine = [x for x, _ in shard]
            read = shard.read_stats()["wire_bytes"] - base
        self.assertEqual(len(mine), 50)
        self.assertLess(read, full / 2)
        shuffled = rckpt.PCRIterableDataset(ds, decode=False, shuffle=True, seed=3)
        orders = set()
        for e in range(6):
            shuffled.set_epoch(e)
            orders.add(tuple(shuffled.records()))
        self.assertGreater(len(orders), 1)  # 3 records: 6 orders, more than one seen
        with self.assertRaises(ValueError):
            rckpt.PCRIterableDataset(ds, shuffle_buffer=0)
        shard.close()
        shuffled.close()


def _label_len(y):  # labels (None here) as something the default collate takes
    return 0 if y is None else len(y)


def _digest(jpeg):
    import hashlib
    return hashlib.sha1(jpeg).hexdigest()


class _Worker:
    def __init__(self, id, num_workers):
        self.id, self.num_workers = id, num_workers


if __name__ == "__main__":
    if not CONF:
        from testskip import required
        if required("cluster"):
            skip_test("cluster", "CEPH_CONF is not set (./dev.sh test starts a cluster)")
    prog = unittest.main(exit=False, verbosity=2)
    ok = prog.result.wasSuccessful()
    if ok and not CONF:
        skip_test("cluster", "the cluster tests: CEPH_CONF is not set (./dev.sh test starts a cluster)")
    if ok and prog.result.skipped:
        skip_test("data", "; ".join(f"{t.id()}: {why}" for t, why in prog.result.skipped))
    sys.exit(0 if ok else 1)
