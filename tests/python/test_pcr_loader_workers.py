#!/usr/bin/python3
"""PCR datasets in DataLoader workers that survive (issue 47 item 3),
against the local cluster:

- map-style PCRDataset, 2 workers, fork (new workers each epoch, a
  connection made on the trainer's main thread before every fork) and
  spawn (persistent workers), while two busy loops hog the CPUs: every
  image exactly once in each of 10 epochs, its bytes and label the ones
  the trainer reads; the forked workers connect with addresses of their
  own (they had one and the same, copied from the trainer's thread, and
  their connections to the OSD kept replacing each other);
- datasets pickle with their parameters alone and read after a round trip;
  PCRIterableDataset under spawn;
- a connection cut off under a dataset (its client blocklisted, so its
  reads fail with ESHUTDOWN): the read is made again on a fresh one, on
  both datasets (the iterable's pass goes on from the failed record); with
  retries=0 the error names the dataset, the image and record, the cause;
- integer labels come back as ints, others as strings; the default
  collate on images of different sizes fails with a message that says to
  pass size=.

Skips (exit 77) without python3-torch, a cluster (CEPH_CONF), RCKPT_CLI or
RCKPT_TEST_PCR_DIR, unless testskip's rules require it. Makes a cephx user
of its own (to find and blocklist its connections) and removes it.
"""
import errno
import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

os.environ["CUDA_VISIBLE_DEVICES"] = ""
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "client", "python"))

from testskip import skip_test  # noqa: E402

try:
    import torch
except ImportError:
    skip_test("data", "python3-torch is not installed")

if not os.environ.get("CEPH_CONF"):
    skip_test("cluster", "no cluster: CEPH_CONF is not set")
if not shutil.which("ceph"):
    skip_test("cluster", "no ceph command (ceph-common)")
if not os.environ.get("RCKPT_CLI") or not os.environ.get("RCKPT_TEST_PCR_DIR"):
    skip_test("data", "RCKPT_CLI or RCKPT_TEST_PCR_DIR not set")

import rckpt  # noqa: E402
from rckpt import _lib  # noqa: E402

TAG = "pyw-%d" % os.getpid()
USER = "rckpt-test-%d" % os.getpid()
N = 48            # images of the dataset, label i for image i
PER_RECORD = 6    # 8 records
EPOCHS = 10
CLI = os.environ.get("RCKPT_CLI")


# the ceph command and the busy loops run without the sanitizers' runtimes
PLAIN_ENV = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}


def ceph(*args):
    r = subprocess.run(["ceph"] + list(args), capture_output=True, text=True, timeout=120,
                       env=PLAIN_ENV)
    if r.returncode:
        raise RuntimeError("ceph %s: %s" % (" ".join(args), r.stderr.strip()))
    return r.stdout


def digest(b):
    return hashlib.sha1(b).hexdigest()


def build(name, files, labels, per_record):
    lab = os.path.join(TMP.name, name + ".csv")
    with open(lab, "w") as f:
        for p, y in zip(files, labels):
            f.write("%s,%s\n" % (os.path.basename(p), y))
    subprocess.run([CLI, "pcr", "rm", "--dataset", name], capture_output=True)
    subprocess.run([CLI, "pcr", "build", "--dataset", name, "--labels", lab,
                    "--images-per-record", str(per_record)] + files, check=True, capture_output=True)


def conf_for(user_keyring):
    """A copy of the cluster's ceph.conf whose keyring is ours (and no admin
    socket: each of the many clients would try to bind the same one)."""
    out = []
    done = False
    with open(os.environ["CEPH_CONF"]) as f:
        for line in f:
            if line.strip().startswith("keyring"):
                line = "keyring = %s\n" % user_keyring
                done = True
            elif line.strip().startswith("admin socket"):
                line = "admin socket =\n"
            out.append(line)
            if line.strip() == "[global]" and not done:
                out.append("keyring = %s\n" % user_keyring)
                done = True
    path = os.path.join(TMP.name, "ceph.conf")
    with open(path, "w") as f:
        f.writelines(out)
    return path


def setUpModule():
    global TMP, DS, MIXED, CONF, FILES
    TMP = tempfile.TemporaryDirectory(prefix="rckpt-pyw.")
    src = os.environ["RCKPT_TEST_PCR_DIR"]
    jpgs = sorted(f for f in os.listdir(src) if f.endswith(".jpg"))
    if len(jpgs) < N:
        skip_test("data", "RCKPT_TEST_PCR_DIR has %d JPEGs, fewer than %d" % (len(jpgs), N))
    FILES = [os.path.join(src, f) for f in jpgs[:N]]
    DS, MIXED = TAG, TAG + "-mixed"
    build(DS, FILES, list(range(N)), PER_RECORD)
    build(MIXED, FILES[:3], ["7", "007", "cat"], 3)
    keyring = os.path.join(TMP.name, "client.%s.keyring" % USER)
    ceph("auth", "get-or-create", "client." + USER, "mon", "allow r", "osd", "allow rwx",
         "-o", keyring)
    CONF = conf_for(keyring)


def tearDownModule():
    for ds in (DS, MIXED):
        subprocess.run([CLI, "pcr", "rm", "--dataset", ds], capture_output=True)
    subprocess.run(["ceph", "auth", "del", "client." + USER], capture_output=True, env=PLAIN_ENV)
    TMP.cleanup()


_MONS, _OSDS = [], []


def addresses():
    """The addresses ("ip:port/nonce") of the monitors' sessions of USER,
    one per session (a client has one monitor session)."""
    if not _MONS:
        _MONS.extend(m["name"] for m in json.loads(ceph("mon", "dump", "-f", "json"))["mons"])
    out = []
    for m in _MONS:
        for s in json.loads(ceph("tell", "mon." + m, "sessions", "-f", "json")):
            if s.get("entity_name") == "client." + USER:
                a = s["addrs"]["addrvec"][0]
                out.append("%s/%d" % (a["addr"], a["nonce"]))
    return out


def blocklist_all(done=()):
    """Blocklists every connection of USER (all this process's) but those
    in done, and waits until every OSD has the map that says so: from then
    on each of their reads fails with ESHUTDOWN (Ceph's EBLOCKLISTED).
    Returns the entries added, for unblock()."""
    addrs = sorted(set(addresses()) - set(done))
    assert addrs, "no new session of client.%s" % USER
    for a in addrs:
        ceph("osd", "blocklist", "add", a, "600")
    epoch = json.loads(ceph("osd", "dump", "-f", "json"))["epoch"]
    if not _OSDS:
        _OSDS.extend(json.loads(ceph("osd", "ls", "-f", "json")))
    for osd in _OSDS:
        deadline = time.time() + 60
        while json.loads(ceph("tell", "osd.%d" % osd, "status"))["newest_map"] < epoch:
            assert time.time() < deadline, "osd.%d did not get osdmap %d" % (osd, epoch)
            time.sleep(0.2)
    return addrs


def unblock(addrs):
    ps = [subprocess.Popen(["ceph", "osd", "blocklist", "rm", a], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env=PLAIN_ENV) for a in addrs]
    for p in ps:
        p.wait()


def _bytes_label(jpeg):  # a transform that pickles (spawn)
    return jpeg


class Hogs:
    """Two busy loops on the CPUs while the block runs."""

    def __enter__(self):
        self.p = [subprocess.Popen(["/bin/sh", "-c", "while :; do :; done"], env=PLAIN_ENV)
                  for _ in range(2)]
        return self

    def __exit__(self, *exc):
        for p in self.p:
            p.kill()
            p.wait()


class Workers(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        ds = rckpt.PCRDataset(DS, decode=False)
        cls.want = {}
        for i in range(N):
            x, y = ds[i]
            cls.want[i] = digest(x)
            assert y == i and type(y) is int, (i, y)
        ds.close()

    def check_epoch(self, batches, what):
        seen = []
        for jpegs, labels in batches:
            self.assertIsInstance(labels, torch.Tensor)  # ints, collated
            for x, y in zip(jpegs, labels.tolist()):
                self.assertEqual(digest(x), self.want[y], (what, y))
                seen.append(y)
        self.assertEqual(sorted(seen), list(range(N)), what)  # each image exactly once

    def test_fork_and_spawn_under_load(self):
        """10 of 10 epochs in each context, with both CPUs taken."""
        data = torch.utils.data
        t0 = time.time()
        # the trainer's own connection (a Checkpointer's, say), made on
        # its main thread before the workers are forked
        trainer = _lib.connect(CONF, USER)
        try:
            with Hogs():
                ds = rckpt.PCRDataset(DS, conf=CONF, user=USER, decode=False, timeout_s=20)
                ok = {}
                for ctx, persistent in (("fork", False), ("spawn", True)):
                    loader = data.DataLoader(ds, batch_size=4, shuffle=True, num_workers=2,
                                             multiprocessing_context=ctx,
                                             persistent_workers=persistent)
                    ok[ctx] = 0
                    for e in range(EPOCHS):
                        it = iter(loader)
                        first = [next(it), next(it)]  # one batch from each worker
                        if ctx == "fork" and e == 0:
                            addrs = addresses()  # the trainer's, and each worker's
                            self.assertGreaterEqual(len(addrs), 3, addrs)
                            self.assertEqual(len(set(addrs)), len(addrs),
                                             "workers connected with one address: %s" % addrs)
                        self.check_epoch(first + list(it), "%s epoch %d" % (ctx, e))
                        ok[ctx] += 1
                    del loader, it
                self.assertEqual(ok, {"fork": EPOCHS, "spawn": EPOCHS})
                ds.close()
        finally:
            _lib.lib.rckpt_destroy(trainer)
        print("fork and spawn, %d epochs each under load: %.1f s" % (EPOCHS, time.time() - t0),
              flush=True)

    def test_pickle(self):
        """The parameters travel, not the connection; the copy reads."""
        ds = rckpt.PCRDataset(DS, decode=False, timeout_s=7, retries=4, transform=_bytes_label)
        self.assertIsNone(ds._r.d)  # no connection until it reads
        x, _ = ds[5]
        self.assertIsNotNone(ds._r.d)
        blob = pickle.dumps(ds)
        back = pickle.loads(blob)
        self.assertIsNone(back._r.d)
        self.assertEqual((back._r.timeout_s, back._r.retries, len(back)), (7, 4, N))
        self.assertEqual(back[5], (x, 5))
        self.assertEqual(back._r.opened, 1)
        it = rckpt.PCRIterableDataset(DS, decode=False, shuffle=True, seed=2)
        self.assertEqual(len(list(it)), N)
        it2 = pickle.loads(pickle.dumps(it))
        self.assertEqual(sorted(digest(x) for x, _ in it2), sorted(self.want.values()))
        # the iterable under spawn, the map-style one under forkserver
        loader = torch.utils.data.DataLoader(it2, batch_size=None, num_workers=2,
                                             multiprocessing_context="spawn")
        self.assertEqual(sorted(y for _, y in loader), list(range(N)))
        loader = torch.utils.data.DataLoader(back, batch_size=None, num_workers=2,
                                             multiprocessing_context="forkserver")
        self.assertEqual(sorted(y for _, y in loader), list(range(N)))
        for d in (ds, back, it, it2):
            d.close()
        with self.assertRaises(ValueError):
            rckpt.PCRDataset(DS, timeout_s=0)
        with self.assertRaises(ValueError):
            rckpt.PCRDataset(DS, retries=-1)

    def test_retry_on_a_fresh_connection(self):
        """A dataset whose connection is cut off reads on a fresh one."""
        ds = rckpt.PCRDataset(DS, conf=CONF, user=USER, decode=False, timeout_s=10, retries=2)
        self.assertEqual(ds[1][1], 1)
        opened = ds._r.opened  # the constructor's (to read the index), this one
        blocked = blocklist_all()
        try:
            x, y = ds[17]  # fails on the cut connection, read again on a new one
            self.assertEqual((digest(x), y), (self.want[17], 17))
            self.assertEqual(ds._r.opened, opened + 1)
            self.assertEqual([y for _, y in ds.get_batch([40, 2, 40])], [40, 2, 40])
            self.assertEqual(ds._r.opened, opened + 1)
            # no retries left: the error names dataset, image, record, cause
            once = rckpt.PCRDataset(DS, conf=CONF, user=USER, decode=False, retries=0)
            self.assertEqual(once[0][1], 0)
            blocked += blocklist_all(blocked)
            with self.assertRaises(rckpt.RckptError) as e:
                once[13]
            self.assertEqual(e.exception.errno, errno.ESHUTDOWN)
            msg = str(e.exception)
            for part in (DS, "reading image 13 (record 2) failed", "retries 0", "fetch"):
                self.assertIn(part, msg)
            self.assertEqual(once[13][1], 13)  # the next read connects afresh
            once.close()
            # the iterable: the pass goes on from the record that failed
            it = rckpt.PCRIterableDataset(DS, conf=CONF, user=USER, decode=False, prefetch=1,
                                          retries=1)
            got = []
            opened = it._r.opened
            for x, y in it:
                got.append(y)
                if len(got) == PER_RECORD:  # record 0 given, 1 and 2 read ahead
                    blocked += blocklist_all(blocked)
            self.assertEqual(got, list(range(N)))  # each once, in order
            self.assertEqual(it._r.opened, opened + 2)  # its first, then a fresh one
            it.close()
        finally:
            unblock(blocked)
        ds.close()


class Labels(unittest.TestCase):

    def test_labels(self):
        ds = rckpt.PCRDataset(DS, decode=False)
        self.assertEqual([type(ds[i][1]) for i in (0, 9)], [int, int])
        self.assertEqual(ds[9][1], 9)
        self.assertEqual(rckpt.PCRIterableDataset(DS, decode=False, fidelity=1).__iter__().__next__()[1], 0)
        self.assertEqual(rckpt.PCRDataset(DS, decode=False, int_labels=False)[9][1], "9")
        mixed = rckpt.PCRDataset(MIXED, decode=False)  # "007" and "cat": strings, all of them
        self.assertEqual([mixed[i][1] for i in range(3)], ["7", "007", "cat"])
        with self.assertRaises(ValueError):
            rckpt.PCRDataset(MIXED, int_labels=True)
        b = next(iter(torch.utils.data.DataLoader(ds, batch_size=5)))
        self.assertTrue(torch.equal(b[1], torch.arange(5)))

    def test_collate_needs_size(self):
        """Images of different sizes: the default collate's error says to
        pass size=; with size= batches stack."""
        data = torch.utils.data
        ds = rckpt.PCRDataset(DS, scale=8)
        shapes = {tuple(ds[i][0].shape) for i in range(8)}
        self.assertGreater(len(shapes), 1)
        for workers in (0, 2):
            for loader in (data.DataLoader(ds, batch_size=8, num_workers=workers),
                           ds.loader(8, num_workers=workers),
                           data.DataLoader(rckpt.PCRIterableDataset(DS, scale=8), batch_size=8,
                                           num_workers=workers)):
                with self.assertRaises(ValueError) as e:
                    next(iter(loader))
                self.assertIn("size=(H, W)", str(e.exception))
                self.assertIn(DS, str(e.exception))
        b = next(iter(data.DataLoader(rckpt.PCRDataset(DS, scale=8, size=24), batch_size=8)))
        self.assertEqual(tuple(b[0].shape), (8, 24, 24, 3))
        lists = next(iter(data.DataLoader(ds, batch_size=8, collate_fn=list)))
        self.assertEqual(len(lists), 8)  # a collate_fn of the user's is left alone
        ds.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
