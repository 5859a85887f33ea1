#!/usr/bin/python3
"""A trainer's resume beside what it would use instead (issue 65, "Resume
at the speed of a read"): per model size (--sizes, M parameters: an MLP of
two blocks d-4d-d with AdamW), dtype (--dtypes fp32,bf16) and chain length
(--chains: deltas since the base; one job per model, compact_every=0, step 1
the base, --train-steps AdamW steps on a small random batch between saves),
--rounds rounds, each order A B C, the next C B A:

  A  Checkpointer.load_latest(model, optimizer) on the open job
  B  a raw RADOS read of the state's fp32 bytes (numel * 4 over the
     parameters and AdamW's exp_avg, exp_avg_sq; bf16 models too; written
     once per size, after the first training step) from the same pool:
     4 MiB objects in namespace resume-raw-<pid>, every read in
     flight at once (librados aio) into one buffer. For bf16 also B16, the
     bf16 bytes (numel * 2). librados' default in-flight throttle applies,
     as it does to librckpt.
  C  torch.load of the same state (a file in /tmp, warm in the page cache)
     + model.load_state_dict + optimizer.load_state_dict

One line a probe: the medians, A/B and A/C per round as median [min, max],
the job's stored bytes; a second line: a fresh Checkpointer open +
load_latest (once: a crashed trainer opens anew), the library's own numbers
for the same restore (restore_into's RestoreStats), the restored
parameters' relative L2 error (over 5e-2 fails the run). Then A against
chain length per model; --csv, --json write the rows (JSON: every sample).

    export CEPH_CONF=$PWD/build/cluster/ceph.conf
    /usr/bin/python3 bench/store/resume_bench.py                    # 1M, 50M; chains 1, 16
    /usr/bin/python3 bench/store/resume_bench.py --sizes 1 --chains 1,4 --rounds 2
"""
import argparse
import ctypes
import json
import math
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "client", "python"))

import torch  # noqa: E402
import rckpt  # noqa: E402

OBJ = 4 << 20  # bytes per raw object
TOL = 5e-2     # the restored parameters' relative L2 error at most
vp = ctypes.c_void_p


class Rados:
    """The librados calls the raw read takes, through ctypes (no python3-rados)."""

    def __init__(self, pool, ns):
        L = self.L = ctypes.CDLL("/usr/lib/x86_64-linux-gnu/librados.so.2")
        for name, args in (("rados_create2", [ctypes.POINTER(vp), ctypes.c_char_p, ctypes.c_char_p,
                                              ctypes.c_uint64]),
                           ("rados_conf_read_file", [vp, ctypes.c_char_p]), ("rados_connect", [vp]),
                           ("rados_ioctx_create", [vp, ctypes.c_char_p, ctypes.POINTER(vp)]),
                           ("rados_write_full", [vp, ctypes.c_char_p, vp, ctypes.c_size_t]),
                           ("rados_aio_create_completion", [vp, vp, vp, ctypes.POINTER(vp)]),
                           ("rados_aio_read", [vp, ctypes.c_char_p, vp, vp, ctypes.c_size_t, ctypes.c_uint64]),
                           ("rados_aio_wait_for_complete", [vp]), ("rados_aio_get_return_value", [vp]),
                           ("rados_remove", [vp, ctypes.c_char_p])):
            getattr(L, name).argtypes, getattr(L, name).restype = args, ctypes.c_int
        for name in ("rados_ioctx_set_namespace", "rados_aio_release", "rados_ioctx_destroy", "rados_shutdown"):
            getattr(L, name).restype = None
        L.rados_ioctx_set_namespace.argtypes = [vp, ctypes.c_char_p]
        L.rados_aio_release.argtypes = L.rados_ioctx_destroy.argtypes = L.rados_shutdown.argtypes = [vp]
        self.c, self.io, self.oids = vp(), vp(), []
        self.ok(L.rados_create2(ctypes.byref(self.c), b"ceph", b"client.admin", 0), "create2")
        conf = os.environ.get("CEPH_CONF")
        self.ok(L.rados_conf_read_file(self.c, conf.encode() if conf else None), "conf_read_file")
        self.ok(L.rados_connect(self.c), "connect")
        self.ok(L.rados_ioctx_create(self.c, pool.encode(), ctypes.byref(self.io)), "ioctx_create")
        L.rados_ioctx_set_namespace(self.io, ns.encode())

    @staticmethod
    def ok(rc, what):
        if rc < 0:
            raise OSError(-rc, "rados_%s: %s" % (what, os.strerror(-rc)))
        return rc

    def spans(self, nbytes):
        return [(b"raw.%06d" % i, i * OBJ, min(OBJ, nbytes - i * OBJ)) for i in range(math.ceil(nbytes / OBJ))]

    def write(self, buf):
        """buf (a uint8 tensor) as 4 MiB objects raw.000000, ..."""
        for oid, off, n in self.spans(buf.numel()):
            self.oids.append(oid)
            self.ok(self.L.rados_write_full(self.io, oid, buf.data_ptr() + off, n), "write_full")

    def read(self, buf, nbytes):
        """The first nbytes of the objects into buf, every read in flight at once."""
        done, short = [], []
        try:
            for oid, off, n in self.spans(nbytes):
                c = vp()
                self.ok(self.L.rados_aio_create_completion(None, None, None, ctypes.byref(c)), "aio_completion")
                rc = self.L.rados_aio_read(self.io, oid, c, buf.data_ptr() + off, n, 0)
                if rc < 0:
                    self.L.rados_aio_release(c)  # never in flight
                self.ok(rc, "aio_read")
                done.append((c, n))
        finally:
            for c, n in done:  # each waited for before release, also after an error
                self.L.rados_aio_wait_for_complete(c)
                got = self.L.rados_aio_get_return_value(c)
                self.L.rados_aio_release(c)
                if got != n:
                    short.append("%d bytes of %d" % (got, n))
        if short:
            raise OSError(5, "raw read: " + ", ".join(short[:3]))

    def close(self):
        for oid in self.oids:
            self.L.rados_remove(self.io, oid)
        self.oids = []
        self.L.rados_ioctx_destroy(self.io)
        self.L.rados_shutdown(self.c)


def ms(fn):
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def med(xs):
    return "%.2fx [%.2f, %.2f]" % (statistics.median(xs), min(xs), max(xs))


def mib(n):
    return "%.1f MiB" % (n / 2**20)


def width(size_m):
    return max(8, round(math.sqrt(size_m * 1e6 / 16) / 8) * 8)  # 2 blocks of 8 d^2 weights


def make_model(size_m, dtype):
    torch.manual_seed(0)
    d = width(size_m)
    L = torch.nn.Linear
    m = torch.nn.Sequential(L(d, 4 * d), torch.nn.ReLU(), L(4 * d, d), L(d, 4 * d), torch.nn.ReLU(), L(4 * d, d))
    m = m.to(dtype)
    return m, torch.optim.AdamW(m.parameters(), lr=1e-3), d


def train(m, opt, d, steps):
    for _ in range(steps):
        x = torch.randn(8, d, dtype=next(m.parameters()).dtype)
        loss = m(x).float().pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


def fp32_state(m, opt):
    """The model's and Adam's float tensors, flattened, as fp32."""
    ts = [p.detach() for p in m.parameters()]
    ts += [opt.state[p][k] for p in m.parameters() for k in ("exp_avg", "exp_avg_sq")]
    return torch.cat([t.float().flatten() for t in ts])


def rel_err(m, ref):
    num = sum(float((p.detach().float() - r).pow(2).sum()) for p, r in zip(m.parameters(), ref))
    den = sum(float(r.pow(2).sum()) for r in ref)
    return math.sqrt(num / den)


def job_bytes(ck):
    """(all steps' stored bytes, the head's chain: its bytes and its deltas)."""
    steps = ck.steps()
    by = {s.step: s for s in steps}
    s, chain, deltas = steps[-1], 0, 0
    while s is not None:
        chain += s.enc_bytes
        deltas += s.parent is not None
        s = by.get(s.parent)
    return sum(s.enc_bytes for s in steps), chain, deltas


def probe(a, ck, m, opt, buf, rados, nel, chain, step, path, ref, got, fresh):
    """One row: the rounds of A, B (B16), C on the state saved as `step`
    (ref: its parameters; got, fresh: the fresh open's step and ms)."""
    errs = [rel_err(m, ref)]

    def A():
        if ck.load_latest(m, opt) != step:
            raise SystemExit("load_latest did not restore step %d" % step)

    def C():
        sd = torch.load(path)
        m.load_state_dict(sd["model"])
        opt.load_state_dict(sd["optimizer"])

    ways = {"A": A, "B": lambda: rados.read(buf, nel * 4), "C": C}
    if a.dtype != torch.float32:
        ways["B16"] = lambda: rados.read(buf, nel * 2)
    order = ["A", "B", "B16", "C"]
    t = {w: [] for w in ways}
    for r in range(a.rounds):
        for w in (order if r % 2 == 0 else order[::-1]):
            if w in ways:
                t[w].append(ms(ways[w]))
                if w == "A":
                    errs.append(rel_err(m, ref))
    if got != step or max(errs) > TOL:
        raise SystemExit("FAIL: restore of step %d (got %s): parameters' relative L2 error %.3g > %g"
                         % (step, got, max(errs), TOL))
    rs = ck.restore_into(m, opt).stats  # the same restore, for the library's own numbers
    stored, chain_bytes, deltas = job_bytes(ck)
    row = {"size_m": a.size_m, "params": sum(p.numel() for p in m.parameters()), "dtype": a.dname,
           "chain": chain, "deltas_seen": deltas, "step": step, "ms": t, "fresh_ms": fresh,
           "A/B": [x / y for x, y in zip(t["A"], t["B"])], "A/C": [x / y for x, y in zip(t["A"], t["C"])],
           "fp32_bytes": nel * 4, "stored_bytes": stored, "chain_bytes": chain_bytes,
           "wire_bytes": rs["wire_bytes"], "lib_calls": rs["calls"], "lib_ms": rs["seconds"] * 1e3,
           "stages_ms": {k: rs.get(k, 0.0) * 1e3 for k in ("t_locate", "t_fetch", "t_decode", "decode_cpu",
                                                          "t_read")},
           "rel_err": errs, "folds_here": ck.folds_here()}
    print("%5gM %s chain %2d: A %7.1f ms  B %7.1f ms  C %7.1f ms  A/B %s  A/C %s  stored %s"
          % (a.size_m, a.dname, chain, statistics.median(t["A"]), statistics.median(t["B"]),
             statistics.median(t["C"]), med(row["A/B"]), med(row["A/C"]), mib(stored)), flush=True)
    print("        fresh open+load_latest %.1f ms; library restore call %.1f ms (%d calls, %s on the wire, "
          "chain %s of %d deltas); rel err <= %.1e%s%s"
          % (fresh, row["lib_ms"], rs["calls"], mib(rs["wire_bytes"]), mib(chain_bytes), deltas, max(errs),
             "; B16 %.1f ms" % statistics.median(t["B16"]) if "B16" in t else "",
             "; folds in this process: " + row["folds_here"] if row["folds_here"] else ""), flush=True)
    return row


def run_model(a, rows, saves, rados, buf, job, path):
    m, opt, d = make_model(a.size_m, a.dtype)
    nel = 3 * sum(p.numel() for p in m.parameters())
    ck = rckpt.Checkpointer(pool=a.pool, job=job, compact_every=0)
    try:
        sv = saves.setdefault("%gM %s" % (a.size_m, a.dname), [])
        for step in range(1, max(a.chains) + 2):
            train(m, opt, d, a.train_steps)
            if not rados.oids:  # the raw objects, once per size
                buf[:nel * 4].view(torch.float32).copy_(fp32_state(m, opt))
                rados.write(buf[:nel * 4])
            sv.append(ms(lambda: ck.save(step, model=m, optimizer=opt).wait()) / 1e3)
            if step - 1 in a.chains:
                ref = [p.detach().float().clone() for p in m.parameters()]
                torch.save({"model": m.state_dict(), "optimizer": opt.state_dict()}, path)
                ck.close()  # a crashed trainer's resume: a new Checkpointer, load_latest once
                t0 = time.perf_counter()
                ck = rckpt.Checkpointer(pool=a.pool, job=job, compact_every=0)
                got = ck.load_latest(m, opt)
                fresh = (time.perf_counter() - t0) * 1e3
                rows.append(probe(a, ck, m, opt, buf, rados, nel, step - 1, step, path, ref, got, fresh))
        print("        saves of %gM %s: base %.1f s, deltas median %.1f s [%.1f, %.1f]"
              % (a.size_m, a.dname, sv[0], statistics.median(sv[1:] or sv), min(sv[1:] or sv), max(sv[1:] or sv)),
              flush=True)
    finally:
        try:
            ck.close()
        finally:
            rckpt.Checkpointer.delete(a.pool, job)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1,50", help="model sizes, M parameters (default 1,50)")
    ap.add_argument("--dtypes", default="fp32", help="fp32 and/or bf16 (default fp32)")
    ap.add_argument("--chains", default="1,16", help="chain lengths to probe at (deltas since the base)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of A B C per probe (default 3)")
    ap.add_argument("--train-steps", type=int, default=1, help="AdamW steps between saves")
    ap.add_argument("--pool", default="rckpt", help="the pool (default rckpt; $CEPH_CONF's cluster)")
    ap.add_argument("--json", help="write every row and sample here")
    ap.add_argument("--csv", help="write the rows' medians here")
    a = ap.parse_args()
    sizes = [float(x) for x in a.sizes.split(",")]
    a.chains = sorted({int(x) for x in a.chains.split(",")})
    dtypes = a.dtypes.split(",")
    if (a.rounds < 1 or a.train_steps < 1 or min(a.chains) < 0 or min(sizes) <= 0
            or not set(dtypes) <= {"fp32", "bf16"}):
        ap.error("rounds, train-steps >= 1; chains >= 0; sizes > 0; dtypes fp32, bf16")
    rows, saves = [], {}
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        for a.size_m in sizes:
            rados = Rados(a.pool, "resume-raw-%d" % os.getpid())
            try:
                d = width(a.size_m)  # one preallocated read buffer per size: 3 fp32 values a parameter
                buf = torch.empty(3 * 2 * (8 * d * d + 5 * d) * 4, dtype=torch.uint8)
                for a.dname in dtypes:
                    a.dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[a.dname]
                    job = "resume-bench-%gm-%s-%d" % (a.size_m, a.dname, os.getpid())
                    run_model(a, rows, saves, rados, buf, job, os.path.join(tmp, "state.pt"))
            finally:
                rados.close()  # the raw objects removed
    print("\nload_latest (A) median ms by chain length; in brackets A/B, the raw fp32 read's multiple")
    models = list(dict.fromkeys((r["size_m"], r["dtype"]) for r in rows))
    print("%-14s" % "model" + "".join("%20s" % ("chain %d" % c) for c in a.chains))
    for sm, dn in models:
        by = {r["chain"]: r for r in rows if (r["size_m"], r["dtype"]) == (sm, dn)}
        print("%-14s" % ("%gM %s" % (sm, dn)) + "".join(
            "%20s" % ("%.1f (%.1fx)" % (statistics.median(by[c]["ms"]["A"]), statistics.median(by[c]["A/B"])))
            for c in a.chains))
    print("\nwhere a restore's time went (ms, one restore_into per row): locate (head, summary);\n"
          "fetch (materialize calls: the OSDs' fold or head-record read, the transfer; chunks decode\n"
          "meanwhile); decode (after the last reply); decode CPU (entropy decode + SHA-256, all threads);\n"
          "read (dequantize into the tensors, all threads); the rest of A (load_state_dict, Python)")
    print("%-14s %6s %8s %8s %8s %10s %8s %8s" % ("model", "chain", "locate", "fetch", "decode", "decode-cpu",
                                                  "read", "rest"))
    for r in rows:
        st = r["stages_ms"]
        rest = statistics.median(r["ms"]["A"]) - (st["t_locate"] + st["t_fetch"] + st["t_decode"] + st["t_read"])
        print("%-14s %6d %8.1f %8.1f %8.1f %10.1f %8.1f %8.1f" % (
            "%gM %s" % (r["size_m"], r["dtype"]), r["chain"], st["t_locate"], st["t_fetch"], st["t_decode"],
            st["decode_cpu"], st["t_read"], max(rest, 0.0)))
    if a.csv:
        cols = ["size_m", "params", "dtype", "chain", "deltas_seen", "A_ms", "B_ms", "B16_ms", "C_ms", "fresh_ms",
                "A/B", "A/C", "lib_ms", "wire_bytes", "stored_bytes", "chain_bytes", "fp32_bytes"]
        with open(a.csv, "w") as f:
            f.write(",".join(c.replace("/", "_over_") for c in cols) + "\n")
            for r in rows:
                v = dict(r, **{w + "_ms": statistics.median(x) for w, x in r["ms"].items()})
                v.update({k: statistics.median(r[k]) for k in ("A/B", "A/C")})
                cells = ("%g" % v[c] if isinstance(v.get(c), float) else str(v.get(c, "")) for c in cols)
                f.write(",".join(cells) + "\n")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows, "save_seconds": saves, "args": sys.argv[1:]}, f, indent=1)


if __name__ == "__main__":
    main()
