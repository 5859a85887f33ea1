#!/usr/bin/python3
"""A trainer's loop around rckpt against the local cluster (issue 47):

* crash and restart: examples/crash_loop.sh runs examples/train_lm.py,
  which kills itself with SIGKILL in the middle of a save; the loop starts
  it again at once and it resumes (takeover of its own dead writer's lock)
  within 5 s of starting, from a step it had saved;
* takeover against a live, paused writer: its requests, delayed by
  SIGSTOP, land after the new writer has saved, and change nothing;
  without takeover the new writer waits (one line naming the holder) and
  gives up;
* no error lost: a save that fails raises at the next save or at close();
* tensors the codec cannot quantize (a -inf mask) and chosen ones
  (lossless=) come back bit-exact;
* resume in one call: load_latest() puts model, optimizer, scheduler and
  state back; it creates nothing for a new job.

Skips (77) without python3-torch or a cluster (CEPH_CONF), unless required
(testskip.py). Env: RCKPT_LIBRARY, RCKPT_CLI.
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.join(here, "..", "..")
sys.path.insert(0, os.path.join(root, "client", "python"))
os.environ["CUDA_VISIBLE_DEVICES"] = ""

from testskip import skip_test  # noqa: E402

try:
    import torch
except ImportError:
    skip_test("data", "python3-torch is not installed")

import rckpt  # noqa: E402
from rckpt._lib import RckptError  # noqa: E402

CONF = os.environ.get("CEPH_CONF")
TAG = "rs%d" % os.getpid()
PY = "/usr/bin/python3"


def job(name):
    return "%s-%s" % (TAG, name)


def objects(j):
    """The objects of job j's namespace (rados ls)."""
    out = subprocess.run(["rados", "-p", "rckpt", "-N", j, "ls"], capture_output=True, text=True)
    return out.stdout.split()


def digest(sd):
    return {k: v.clone() for k, v in sd.items()}


def same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


class Loop(unittest.TestCase):
    def tearDown(self):
        for j in getattr(self, "jobs", ()):
            rckpt.Checkpointer.delete("rckpt", j, CONF)

    def test_crash_loop(self):
        """The example's crash-and-restart loop, end to end."""
        j = job("loop")
        self.jobs = [j]
        out = subprocess.run(["bash", os.path.join(root, "examples", "crash_loop.sh"), "--job", j,
                              "--steps", "60", "--every", "10"],
                             capture_output=True, text=True, timeout=600,
                             env=dict(os.environ, CRASH_AT="40"))
        log = out.stdout + out.stderr
        self.assertEqual(out.returncode, 0, log)
        self.assertEqual(log.count("restarting at once"), 1, log)
        m = re.search(r"resumed from step (\d+) after ([0-9.]+) s", log)
        self.assertIsNotNone(m, log)
        # the save of 40 was in flight when it died: 30 or 40 was the last
        self.assertIn(int(m.group(1)), (30, 40), log)
        self.assertLess(float(m.group(2)), 5.0, log)
        self.assertIn("done: step 60", log)
        with rckpt.Checkpointer("rckpt", j, CONF, writer=False) as ck:
            self.assertEqual(ck.steps()[-1].step, 60)

    def test_takeover_paused_writer(self):
        """W1 saves in a loop; SIGSTOP holds it with requests pending; W2
        takes over and saves; SIGCONT lands W1's requests: W1 fails, and
        every committed step restores as it did."""
        j = job("paused")
        self.jobs = [j]
        env = dict(os.environ, PYTHONPATH=os.path.join(root, "client", "python"))
        w1 = subprocess.Popen([PY, "-c", W1_SCRIPT, j], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, env=env)
        try:
            seen = []
            for line in w1.stdout:
                seen.append(line)
                if line.startswith("saved 3"):
                    break
            self.assertTrue(seen and seen[-1].startswith("saved 3"), "".join(seen))
            time.sleep(0.05)  # into the next save
            os.kill(w1.pid, signal.SIGSTOP)
            # without takeover: waits a second, names the holder, gives up
            t0 = time.time()
            with self.assertRaises(RckptError) as e:
                rckpt.Checkpointer("rckpt", j, CONF, takeover=False, wait_s=1)
            self.assertGreaterEqual(time.time() - t0, 0.9)
            self.assertIn("still running", str(e.exception))
            ck = rckpt.Checkpointer("rckpt", j, CONF, takeover=True)
            before = {}
            for s in ck.steps():
                before[s.step] = digest(ck.restore(s.step))
            for s in (1000, 1001):
                ck.save(s, {"w": torch.full((300000,), float(s)), "b": torch.arange(64.0) * s}).wait()
                before[s] = digest(ck.restore(s))
            os.kill(w1.pid, signal.SIGCONT)
            rest, _ = w1.communicate(timeout=120)
            self.assertNotEqual(w1.returncode, 0, rest)
            self.assertRegex(rest, r"taken over|ESTALE|Stale file handle|EBUSY|another writer", rest)
            listed = [s.step for s in ck.steps()]
            self.assertEqual(sorted(before), listed)
            for s, sd in before.items():
                self.assertTrue(same(ck.restore(s), sd), "step %d changed" % s)
            ck.save(1002, {"w": torch.full((300000,), 2.0), "b": torch.arange(64.0)}).wait()
            ck.close()
        finally:
            if w1.poll() is None:
                os.kill(w1.pid, signal.SIGCONT)
                w1.kill()
                w1.wait()


# W1: saves steps 1, 2, ... of a 4 MB model until it fails (its error printed).
W1_SCRIPT = r"""
import sys, torch, rckpt
ck = rckpt.Checkpointer("rckpt", sys.argv[1], takeover=False)
try:
    for s in range(1, 10000):
        ck.save(s, {"w": torch.randn(1000000, generator=torch.Generator().manual_seed(s)),
                    "b": torch.arange(64.0)}).wait()
        print("saved", s, flush=True)
except Exception as e:
    print("W1 failed:", e, flush=True)
    sys.exit(3)
"""


def ceph(*args):
    r = subprocess.run(["ceph"] + list(args), capture_output=True, text=True, timeout=120,
                       env={k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
    if r.returncode:
        raise RuntimeError("ceph %s: %s" % (" ".join(args), r.stderr.strip()))
    return r.stdout


class Fork(unittest.TestCase):
    def test_forked_connections_distinct(self):
        """Processes forked from one that has connected (a DataLoader's
        workers, trainers started by fork) connect with addresses of their
        own: librados draws a client's nonce from a generator of the
        calling thread, which fork copies (rckpt_connect connects on a
        thread of its own)."""
        user = "rsfork%d" % os.getpid()
        tmp = tempfile.mkdtemp()
        keyring = os.path.join(tmp, "keyring")
        ceph("auth", "get-or-create", "client." + user, "mon", "allow r", "osd", "allow rwx",
             "-o", keyring)
        try:
            conf = os.path.join(tmp, "ceph.conf")
            with open(CONF) as f, open(conf, "w") as o:
                for line in f:
                    if line.strip().startswith(("keyring", "admin socket")):
                        continue
                    o.write(line)
                    if line.strip() == "[global]":
                        o.write("keyring = %s\nadmin socket =\n" % keyring)
            ck = rckpt.Checkpointer("rckpt", job("fork"), conf, user, writer=False)
            kids = []
            for _ in range(2):
                pid = os.fork()
                if pid == 0:
                    try:
                        c = rckpt.Checkpointer("rckpt", job("fork"), conf, user, writer=False)
                        time.sleep(4)
                        c.close()
                    finally:
                        os._exit(0)
                kids.append(pid)
            time.sleep(2)
            addrs = []
            for m in json.loads(ceph("mon", "dump", "-f", "json"))["mons"]:
                for s in json.loads(ceph("tell", "mon." + m["name"], "sessions", "-f", "json")):
                    if s.get("entity_name") == "client." + user:
                        a = s["addrs"]["addrvec"][0]
                        addrs.append("%s/%d" % (a["addr"], a["nonce"]))
            for pid in kids:
                os.waitpid(pid, 0)
            ck.close()
            self.assertGreaterEqual(len(addrs), 3, addrs)
            self.assertEqual(len(set(addrs)), len(addrs), "one address for several clients: %s" % addrs)
        finally:
            ceph("auth", "del", "client." + user)


class Errors(unittest.TestCase):
    def tearDown(self):
        for j in getattr(self, "jobs", ()):
            rckpt.Checkpointer.delete("rckpt", j, CONF)

    def sd(self, v=1.0):
        # w is quantized (2-D); a 1-D tensor (b) is stored exact anyway
        return {"w": (torch.full((4096,), v) + torch.arange(4096.0) / 4096).view(64, 64),
                "b": torch.ones(16) * v}

    def test_nan_raises_at_close(self):
        j = job("nan")
        self.jobs = [j]
        ck = rckpt.Checkpointer("rckpt", j, CONF, snapshot=True)
        ck.save(1, self.sd())
        bad = self.sd(2.0)
        bad["w"][0, 7] = float("nan")
        ck.save(2, bad)  # fails in the background
        with self.assertRaises(RckptError) as e:
            ck.close()
        self.assertIn("save of step 2 failed", str(e.exception))
        self.assertIn("'w'", str(e.exception))
        with rckpt.Checkpointer("rckpt", j, CONF, writer=False) as r:
            self.assertEqual([s.step for s in r.steps()], [1])

    def test_nan_raises_at_next_save(self):
        j = job("nan2")
        self.jobs = [j]
        for snapshot in (True, False):
            rckpt.Checkpointer.delete("rckpt", j, CONF)
            ck = rckpt.Checkpointer("rckpt", j, CONF, snapshot=snapshot)
            ck.save(1, self.sd())
            bad = self.sd(2.0)
            bad["w"][1, 2] = float("nan")
            try:
                ck.save(2, bad)  # snapshot: fails later; else here
                with self.assertRaises(RckptError) as e:
                    ck.save(3, self.sd(3.0))
            except RckptError as got:
                self.assertFalse(snapshot)
                e = type("E", (), {"exception": got})
            self.assertIn("save of step 2 failed", str(e.exception))
            ck.save(3, self.sd(3.0)).wait()
            ck.close()  # reported once: close is clean
            with rckpt.Checkpointer("rckpt", j, CONF, writer=False) as r:
                self.assertEqual([s.step for s in r.steps()], [1, 3])

    def test_progress_callback(self):
        """progress(step, result, error) once per save, as it ends: the
        committed ones with their SaveResult, a failed one with its error."""
        j = job("progress")
        self.jobs = [j]
        seen = []
        ck = rckpt.Checkpointer("rckpt", j, CONF, progress=lambda s, r, e: seen.append((s, r, e)))
        ck.save(1, self.sd()).wait()
        bad = self.sd(2.0)
        bad["w"][0, 0] = float("nan")
        ck.save(2, bad)
        with self.assertRaises(RckptError):
            ck.save(3, self.sd(3.0))
        ck.save(3, self.sd(3.0))
        ck.close()
        self.assertEqual([s for s, _, _ in seen], [1, 2, 3])
        self.assertTrue(seen[0][1].enc_bytes > 0 and seen[0][2] is None)
        self.assertIsNone(seen[1][1])
        self.assertIn("save of step 2", str(seen[1][2]))
        self.assertEqual(seen[2][1].step, 3)

    def test_context_exit_raises(self):
        j = job("ctx")
        self.jobs = [j]
        with self.assertRaises(RckptError):
            with rckpt.Checkpointer("rckpt", j, CONF, snapshot=True) as ck:
                bad = self.sd()
                bad["w"][0, 0] = float("nan")
                ck.save(1, bad)
        # a handle waited on reports it there, and not again
        ck = rckpt.Checkpointer("rckpt", j, CONF, snapshot=True)
        bad = self.sd()
        bad["w"][0, 0] = float("nan")
        with self.assertRaises(RckptError):
            ck.save(1, bad).wait()
        ck.close()


class Exact(unittest.TestCase):
    def tearDown(self):
        for j in getattr(self, "jobs", ()):
            rckpt.Checkpointer.delete("rckpt", j, CONF)

    def test_inf_mask_and_chosen_tensors(self):
        j = job("mask")
        self.jobs = [j]
        g = torch.Generator().manual_seed(5)
        mask = torch.triu(torch.full((64, 64), float("-inf")), 1)
        sd = {"w": torch.randn(256, 256, generator=g), "emb": torch.randn(512, 32, generator=g),
              "mask": mask, "ids": torch.arange(10), "on": torch.ones(3, dtype=torch.bool),
              "half": torch.randn(128, 64, generator=g).half()}
        for lossless in (["emb"], lambda name, t: name == "emb"):
            rckpt.Checkpointer.delete("rckpt", j, CONF)
            with rckpt.Checkpointer("rckpt", j, CONF, lossless=lossless) as ck:
                ck.save(1, sd).wait()
                sd2 = dict(sd, w=sd["w"] * 1.01)
                ck.save(2, sd2).wait()
                got = ck.restore(2)
            for k in ("mask", "emb", "ids", "on"):
                self.assertTrue(torch.equal(got[k], sd2[k]), k)
                self.assertEqual(got[k].dtype, sd2[k].dtype)
            self.assertFalse(torch.equal(got["w"], sd2["w"]))  # compressed, lossy
            self.assertLess(((got["w"] - sd2["w"]).norm() / sd2["w"].norm()).item(), 0.05)
            self.assertEqual(got["half"].dtype, torch.float16)


class Resume(unittest.TestCase):
    def tearDown(self):
        for j in getattr(self, "jobs", ()):
            rckpt.Checkpointer.delete("rckpt", j, CONF)

    def make(self):
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.LayerNorm(64), torch.nn.Linear(64, 8))
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
        sched = torch.optim.lr_scheduler.StepLR(opt, 3, 0.5)
        return m, opt, sched

    def test_load_latest(self):
        j = job("resume")
        self.jobs = [j]
        m, opt, sched = self.make()
        with rckpt.Checkpointer("rckpt", j, CONF) as ck:
            self.assertIsNone(ck.load_latest(model=m, optimizer=opt, scheduler=sched, state={}))
        self.assertEqual(objects(j), [], "an open only to restore made objects")
        x = torch.randn(16, 32)
        with rckpt.Checkpointer("rckpt", j, CONF) as ck:
            for step in range(7):
                opt.zero_grad()
                m(x).square().mean().backward()
                opt.step()
                sched.step()
            state = {"epoch": 3, "rng": torch.get_rng_state(), "note": "x"}
            ck.save(6, model=m, optimizer=opt, scheduler=sched, state=state, extra={"k": 1}).wait()
            self.assertEqual(ck.restore_full(6).extra, {"k": 1})
        m2, opt2, sched2 = self.make()
        state2 = {"epoch": 0}
        with rckpt.Checkpointer("rckpt", j, CONF) as ck:
            self.assertEqual(ck.load_latest(model=m2, optimizer=opt2, scheduler=sched2, state=state2), 6)
        self.assertEqual(sched2.state_dict(), sched.state_dict())
        self.assertEqual(state2["epoch"], 3)
        self.assertEqual(state2["note"], "x")
        self.assertTrue(torch.equal(state2["rng"], state["rng"]))
        st, st2 = opt.state_dict(), opt2.state_dict()
        self.assertEqual(st["param_groups"], st2["param_groups"])
        for pid in st["state"]:
            self.assertEqual(float(st["state"][pid]["step"]), float(st2["state"][pid]["step"]))
        for (k, a), (_, b) in zip(m.state_dict().items(), m2.state_dict().items()):
            self.assertLess(((a - b).norm() / a.norm().clamp_min(1e-12)).item(), 0.05, k)

    def test_load_latest_optimizer_as_torch_loads(self):
        """load_latest puts the optimizer's state in without torch's deep
        copy of it: the same state as torch's own load_state_dict of the
        restored state (every tensor, dtype, step and group), so the next
        step moves the model the same; into an optimizer that has state it
        reads in place (the same tensors, no new memory)."""
        j = job("resume-opt")
        self.jobs = [j]
        m, opt, sched = self.make()
        x = torch.randn(16, 32)

        def train(mm, oo):
            oo.zero_grad()
            mm(x).square().mean().backward()
            oo.step()
        with rckpt.Checkpointer("rckpt", j, CONF) as ck:
            for _ in range(5):
                train(m, opt)
            ck.save(5, model=m, optimizer=opt).wait()
        with rckpt.Checkpointer("rckpt", j, CONF) as ck:
            ref_m, ref_opt, _ = self.make()
            r = ck.restore_full(5)
            ref_m.load_state_dict(r.state_dict)
            ref_opt.load_state_dict(r.optimizer)  # torch's own way
            fresh_m, fresh_opt, _ = self.make()  # a new process: no state yet
            self.assertEqual(ck.load_latest(model=fresh_m, optimizer=fresh_opt), 5)
            live_m, live_opt, _ = self.make()  # a trainer that has state: in place
            train(live_m, live_opt)
            before = {id(v): v.data_ptr() for st in live_opt.state.values() for v in st.values()
                      if torch.is_tensor(v) and v.numel() > 1}
            self.assertEqual(ck.load_latest(model=live_m, optimizer=live_opt), 5)
            after = {id(v): v.data_ptr() for st in live_opt.state.values() for v in st.values()
                     if torch.is_tensor(v) and v.numel() > 1}
            self.assertEqual(before, after)
        want = ref_opt.state_dict()
        for got_opt in (fresh_opt, live_opt):
            got = got_opt.state_dict()
            self.assertEqual(got["param_groups"], want["param_groups"])
            self.assertEqual(sorted(got["state"]), sorted(want["state"]))
            for pid, st in want["state"].items():
                self.assertEqual(sorted(got["state"][pid]), sorted(st))
                for k, v in st.items():
                    g = got["state"][pid][k]
                    self.assertEqual((g.dtype, g.device, g.shape), (v.dtype, v.device, v.shape), k)
                    self.assertTrue(torch.equal(g, v), k)
            ptrs = [v.data_ptr() for st in got_opt.state.values() for v in st.values() if torch.is_tensor(v)]
            self.assertEqual(len(ptrs), len(set(ptrs)))  # no tensor shared by two states
        for mm, oo in ((ref_m, ref_opt), (fresh_m, fresh_opt), (live_m, live_opt)):
            train(mm, oo)
        for got_m in (fresh_m, live_m):
            for (k, a), (_, b) in zip(ref_m.state_dict().items(), got_m.state_dict().items()):
                self.assertTrue(torch.equal(a, b), k)

    def test_load_latest_in_place_skips_self_copies(self):
        """load_latest reads a module's tensors in place; torch's
        load_state_dict would then copy each onto itself, so it is left
        out, unless a module loads its own way (an override of
        _load_from_state_dict, a load hook): then it runs as before."""
        j = job("resume-inplace")
        self.jobs = [j]
        m, opt, _ = self.make()
        calls = []
        orig = torch.nn.Module._load_from_state_dict

        def counting(mod, *a, **k):
            calls.append(type(mod).__name__)
            return orig(mod, *a, **k)

        class Own(torch.nn.Linear):
            def _load_from_state_dict(self, *a, **k):
                calls.append("Own")
                return super()._load_from_state_dict(*a, **k)

        with rckpt.Checkpointer("rckpt", j, CONF) as ck:
            ck.save(1, model=m, optimizer=opt).wait()
            torch.nn.Module._load_from_state_dict = counting
            try:
                plain, popt, _ = self.make()
                with torch.no_grad():
                    for p in plain.parameters():
                        p.zero_()
                self.assertEqual(ck.load_latest(model=plain, optimizer=popt), 1)
                self.assertEqual(calls, [])  # no load_state_dict: nothing to copy
                for (k, a), (_, b) in zip(m.state_dict().items(), plain.state_dict().items()):
                    self.assertTrue(torch.allclose(a, b, atol=0.05, rtol=0.05), k)
                own, oopt, _ = self.make()
                own[2] = Own(64, 8)
                oopt = torch.optim.AdamW(own.parameters(), lr=1e-2)
                self.assertEqual(ck.load_latest(model=own, optimizer=oopt), 1)
                self.assertIn("Own", calls)  # its own way: torch's load ran
            finally:
                torch.nn.Module._load_from_state_dict = orig

    def test_head_records(self):
        """Head records (formats/store.md): each delta save writes one
        (head_bytes; a base none) unless head_records=False, and a job
        with them restores every step to the same values as a job
        without, the newest from its head record, the older by folding."""
        jobs = [job("heads-on"), job("heads-off")]
        self.jobs = jobs
        m, opt, _ = self.make()
        x = torch.randn(16, 32)
        cks = [rckpt.Checkpointer("rckpt", jobs[0], CONF, compact_every=0),
               rckpt.Checkpointer("rckpt", jobs[1], CONF, compact_every=0, head_records=False)]
        try:
            for step in range(1, 6):
                opt.zero_grad()
                m(x).square().mean().backward()
                opt.step()
                on, off = (ck.save(step, model=m, optimizer=opt).wait() for ck in cks)
                self.assertEqual(on.is_base, step == 1)
                self.assertEqual(on.head_bytes > 0, step > 1)
                self.assertEqual(off.head_bytes, 0)
                # the same records; a delta's manifest names each chunk's head
                # record (version 3: 40 bytes a chunk), a base's its record in both
                self.assertEqual(on.enc_bytes, off.enc_bytes + (40 * on.nchunks if step > 1 else 0))
            for step in range(1, 6):
                a, b = (ck.restore_full(step) for ck in cks)
                for k in a.state_dict:
                    self.assertTrue(torch.equal(a.state_dict[k], b.state_dict[k]), (step, k))
                for pid in a.optimizer["state"]:
                    for k, v in a.optimizer["state"][pid].items():
                        self.assertTrue(torch.equal(v, b.optimizer["state"][pid][k]), (step, pid, k))
        finally:
            for ck in cks:
                ck.close()


if __name__ == "__main__":
    if not CONF:
        skip_test("cluster", "no cluster (CEPH_CONF unset)")
    unittest.main(verbosity=2)
