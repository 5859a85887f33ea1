#!/usr/bin/python3
"""test_reference.py — the reference decoder (rckpt_ref.py, written from
formats/checkpoint.md alone) against the hand-derived golden vectors and
against the C decoder on chains the C encoder makes from real checkpoints.

Needs RCKPT_CLI (the rckpt command) and RCKPT_TEST_CKPT_DIR (the
make_test_checkpoints fixture) for the second part; ctest sets both.
"""
import glob
import hashlib
import os
import struct
import subprocess
import sys
import tempfile
import unittest

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "python"))
import rckpt_ref as R  # noqa: E402
from testskip import skip_test  # noqa: E402

GOLDEN = os.path.join(here, "..", "golden")


def golden(name):
    out = bytearray()
    with open(os.path.join(GOLDEN, name)) as f:
        for line in f:
            out += bytes.fromhex("".join(line.split("#")[0].split()))
    return bytes(out)


class Golden(unittest.TestCase):
    def test_base(self):
        r = R.record(golden("ckpt-record-v1.hex"))
        s = r["seg"][0]
        self.assertEqual((r["step"], r["kind"], s["B"], s["n"]), (42, 1, 2, 8))
        self.assertEqual(list(s["levels"]), [0, 1, 2, 2, 2, 2, 3, 0])
        self.assertEqual(list(s["prot"]), [0x4120])
        self.assertEqual(list(R.values(s)), [-0.5, 0.0, 0.25, 0.25, 0.25, 0.25, 10.0, -0.5])

    def test_delta(self):
        base = R.record(golden("ckpt-record-v1.hex"))
        r = R.record(golden("ckpt-delta-v1.hex"), base)
        s = r["seg"][0]
        self.assertEqual((r["step"], r["kind"], r["parent"]), (43, 2, 42))
        self.assertEqual(list(s["levels"]), [0, 1, 2, 2, 2, 3, 2, 1])
        self.assertEqual(list(s["prot"]), [0x4000])
        self.assertEqual(list(R.values(s)), [-0.5, 0.0, 0.5, 0.5, 0.5, 2.0, 0.5, 0.0])

    def test_ctx_v3(self):
        """Version 3: an index stream in the CTX form (per parent level a
        frequency table, one rANS stream); as version 2 it is refused."""
        base = R.record(golden("ckpt-record-v1.hex"))
        r = R.record(golden("ckpt-ctx-v3.hex"), base)
        s = r["seg"][0]
        self.assertEqual((r["step"], r["kind"], r["parent"]), (44, 2, 42))
        self.assertEqual(list(s["levels"]), [0, 2, 2, 2, 2, 3, 3, 0])
        self.assertEqual(list(s["prot"]), [0x4000, 0x4040])
        b = bytearray(golden("ckpt-ctx-v3.hex"))
        b[4] = b[5] = 2
        b[-4:] = struct.pack("<I", R.crc32c(bytes(b[:-4])))
        with self.assertRaises(R.Bad):
            R.record(bytes(b), base)
        # Groups of one symbol read nothing and leave the states as they
        # are: both must still end at 2^23, every byte read.
        prev = np.array([0, 1, 1, 0], dtype=np.uint8)
        tables = bytes([0, 0, 0, 1])  # level 0: symbol 0; level 1: symbol 1

        def stream(x0, extra=b""):
            body = tables + struct.pack("<II", x0, 1 << 23) + extra
            return bytes([0x0B]) + struct.pack("<I", len(body)) + body

        cur = R.index_stream(R.Reader(stream(1 << 23), "s"), 4, 3, prev, 3)
        self.assertEqual(list(cur), [0, 2, 2, 0])
        with self.assertRaises(R.Bad):
            R.index_stream(R.Reader(stream(0x8000, b"\0"), "s"), 4, 3, prev, 3)

    def test_pred_v4(self):
        """Version 4: protected and lossless values predicted from the
        parent's ("Predicted blobs"); as version 3, or in a base, refused."""
        base = R.record(golden("ckpt-pbase-v1.hex"))
        r = R.record(golden("ckpt-pred-v4.hex"), base)
        s, t = r["seg"]
        self.assertEqual((r["step"], r["kind"], r["parent"]), (43, 2, 42))
        self.assertEqual(list(s["levels"]), [0, 1, 2, 3, 2, 2, 3, 0])
        self.assertEqual(list(s["prot"]), [0x3E90, 0x4128])
        self.assertEqual(t["raw"], struct.pack("<ff", 1.5, -2.0))
        b = bytearray(golden("ckpt-pred-v4.hex"))
        b[4] = b[5] = 3
        b[-4:] = struct.pack("<I", R.crc32c(bytes(b[:-4])))
        with self.assertRaises(R.Bad):
            R.record(bytes(b), base)
        b = bytearray(golden("ckpt-pbase-v1.hex"))
        self.assertEqual(b[146], 0)
        b[4] = b[5] = 4
        b[146] = 0x80
        b[-4:] = struct.pack("<I", R.crc32c(bytes(b[:-4])))
        with self.assertRaises(R.Bad):
            R.record(bytes(b))

    def test_planes_v5(self):
        """Version 5: a lossless segment's values as byte planes ("Planes"),
        a base's (Huffman, constant and raw planes) and a delta's predicted
        by its parent's; as version 4, or predicted in a base, refused."""
        base = R.record(golden("ckpt-planes-v5.hex"))
        self.assertEqual((base["step"], base["kind"]), (7, 1))
        self.assertEqual(base["seg"][0]["raw"], struct.pack("<4f", 1.0, 2.0, -1.0, 0.5))
        r = R.record(golden("ckpt-planes-delta-v5.hex"), base)
        self.assertEqual((r["step"], r["kind"], r["parent"]), (8, 2, 7))
        self.assertEqual(r["seg"][0]["raw"], struct.pack("<4f", 1.5, 2.0, -1.0, 0.25))
        for name, parent, at, val in (("ckpt-planes-v5.hex", None, 4, 4),
                                      ("ckpt-planes-delta-v5.hex", base, 4, 4),
                                      ("ckpt-planes-v5.hex", None, 64, 0x84)):
            b = bytearray(golden(name))
            b[at] = val
            if at == 4:
                b[5] = val
            b[-4:] = struct.pack("<I", R.crc32c(bytes(b[:-4])))
            with self.assertRaises(R.Bad):
                R.record(bytes(b), parent)

    def test_split_v6(self):
        """Version 6: the levels of ckpt-record-v1.hex's record in a split
        Huffman block ("Split Huffman block"); as version 5, or a stream's
        length past the block, refused."""
        r = R.record(golden("ckpt-split-v6.hex"))
        self.assertEqual((r["step"], r["kind"]), (42, 1))
        self.assertEqual(list(r["seg"][0]["levels"]), [0, 1, 2, 2, 2, 2, 3, 0])
        self.assertEqual(list(r["seg"][0]["prot"]), [0x4120])
        for at, val in ((4, 5), (102, 3)):
            b = bytearray(golden("ckpt-split-v6.hex"))
            b[at] = val
            if at == 4:
                b[5] = val
            b[-4:] = struct.pack("<I", R.crc32c(bytes(b[:-4])))
            with self.assertRaises(R.Bad):
                R.record(bytes(b))

    def test_sparse(self):
        base = R.record(golden("ckpt-record-v1.hex"))
        s = R.record(golden("ckpt-sparse-v1.hex"), base)["seg"][0]
        self.assertEqual(list(s["levels"]), [0, 1, 2, 2, 2, 2, 2, 3])
        self.assertEqual(list(s["prot"]), [0xC080])

    def test_zstd(self):
        r = R.record(golden("ckpt-zstd-v1.hex"))
        a, b = r["seg"]
        self.assertEqual((r["step"], a["encoding"], b["encoding"]), (7, 2, 1))
        self.assertEqual(a["raw"], bytes.fromhex("0000803f000000c0"))
        self.assertEqual(list(b["levels"]), [1, 0, 1, 1])
        self.assertEqual(list(R.values(b)), [0.5, 0.0, 0.5, 0.5])

    def test_optimizer_state_v2(self):
        """Version 2: a first moment as NORM beside its second as LOG2, and
        the manifest that names the pair; the values the spec gives."""
        rec = R.record(golden("ckpt-xform-v2.hex"))
        m = R.manifest(golden("ckpt-manifest-v2.hex"))
        self.assertEqual([s["transform"] for s in rec["seg"]], [2, 1])
        self.assertEqual(R.digest(rec), m["chunks"][0]["sha256"])
        self.assertEqual(m["update_error"], 2.0**-7)
        t = {x["name"]: x for x in m["tensors"]}
        for x in m["tensors"]:
            x["norm_t"] = m["tensors"][x["norm"]] if x["norm"] is not None else None
        v = R.tensor_f32(t["exp_avg_sq.w"], [rec])
        self.assertEqual(v.tolist(), [0.75, 1, 1.25, 1.25, 1.25, 1.25, 1024, 0.75])
        y = np.array([-0.5, 0, 0.25, 0.25, 0.25, 0.25, 10, -0.5], dtype=np.float32)
        want = y * (np.sqrt(v) + np.float32(1e-8))
        self.assertEqual(R.tensor_f32(t["exp_avg.w"], [rec]).tolist(), want.tolist())
        b = bytearray(golden("ckpt-xform-v2.hex"))
        b[4] = b[5] = 1  # a transform in a version 1 record
        b[-4:] = struct.pack("<I", R.crc32c(bytes(b[:-4])))
        with self.assertRaises(R.Bad):
            R.record(bytes(b))

    def test_manifest_v3(self):
        """Version 3: version 2's step, its chunk naming its stored base
        (the base record itself) by length and SHA-256."""
        m2, m = R.manifest(golden("ckpt-manifest-v2.hex")), R.manifest(golden("ckpt-manifest-v3.hex"))
        rec = golden("ckpt-xform-v2.hex")
        self.assertEqual(m["chunks"][0]["base_bytes"], len(rec))
        self.assertEqual(m["chunks"][0]["base_sha256"], hashlib.sha256(rec).digest())
        self.assertEqual(m2["chunks"][0]["base_bytes"], 0)
        for k in ("step", "parent", "tensors", "update_error"):
            self.assertEqual(m[k], m2[k])
        self.assertEqual(m["chunks"][0]["sha256"], m2["chunks"][0]["sha256"])
        b = bytearray(golden("ckpt-manifest-v3.hex"))
        n = len(b)
        for at, v in ((5, b"\x02"), (n - 44, bytes(8)), (n - 44, bytes(40))):
            c = bytearray(b)  # compat 2; a digest of no base; no base named
            c[at:at + len(v)] = v
            c[-4:] = struct.pack("<I", R.crc32c(bytes(c[:-4])))
            with self.assertRaises(R.Bad):
                R.manifest(bytes(c))

    def test_manifest(self):
        m = R.manifest(golden("ckpt-manifest-v1.hex"))
        self.assertEqual((m["step"], m["parent"], m["chunk_params"]), (43, 42, 1000))
        self.assertEqual([t["name"] for t in m["tensors"]], ["fc.bias", "fc.weight"])
        self.assertEqual(m["tensors"][1]["shape"], [2, 4])
        self.assertEqual(m["tensors"][0]["segs"], [(0, 1, 4)])
        self.assertEqual(m["chunks"][0]["sha256"], bytes(range(32)))
        self.assertEqual(m["quality"], 2 ** -10)

    def test_pcr_record(self):
        r = R.pcr_record(golden("pcr-record-v1.hex"))
        self.assertEqual([im["name"] for im in r["images"]], ["a.jpg", "b.jpg"])
        self.assertEqual(r["images"][0]["label"], b"cat")
        self.assertEqual(R.pcr_jpegs(r, 1), {"a.jpg": bytes.fromhex("ffd8ffc2111213ffd9"),
                                             "b.jpg": bytes.fromhex("ffd8ffc031ffd9")})
        self.assertEqual(R.pcr_jpegs(r, None)["a.jpg"], bytes.fromhex("ffd8ffc21112132122ffd9"))
        b = bytearray(golden("pcr-record-v1.hex"))
        b[-1] ^= 1  # group 2's bytes: its CRC refuses them
        with self.assertRaises(R.Bad):
            R.pcr_record(bytes(b))

    def test_pcr_index(self):
        x = R.pcr_index(golden("pcr-index-v1.hex"))
        self.assertEqual((x["records"], x["images"], x["groups"], x["head_bytes"]), (1, 2, 2, 109))
        self.assertEqual(x["per_group"], [(4, 0.5, 2), (2, 1.0, 1)])
        self.assertEqual(x["record"][0]["ends"], [113, 115])
        self.assertEqual(x["labels"], [b"cat", b""])

    def test_store_messages(self):
        self.assertEqual(R.message(golden("store-commit-v1.hex"), "commit"),
                         {"expect": 42, "step": 43, "summary": b"abc", "writer": 7})
        self.assertEqual(R.message(golden("store-materialize-v1.hex"), "materialize"),
                         {"step": 43, "budget": 0, "start": b""})
        self.assertEqual(R.message(golden("store-compact-v3.hex"), "compact"),
                         {"token": 7, "upto": 50, "keep": [10, 20, 50]})
        with self.assertRaises(R.Bad):  # the version-1 layout: no token, refused
            R.message(golden("store-compact-v1.hex"), "compact")
        self.assertEqual(R.message(golden("store-steps-v1.hex"), "steps"),
                         {"steps": [(42, b"s42"), (43, b"")], "more": 1})
        with self.assertRaises(R.Bad):  # a frame of another type
            R.message(golden("store-commit-v1.hex"), "steps")
        # version 2: the messages that carry a writer's token (fencing)
        self.assertEqual(R.message(golden("store-append-v2.hex"), "append"), {"writer": 7, "record": b"abc"})
        self.assertEqual(R.message(golden("store-append-v4.hex"), "append"),
                         {"writer": 7, "record": b"abc", "head": b"defg"})
        self.assertEqual(R.message(golden("store-trim-v2.hex"), "trim"), {"writer": 7, "after": 42})
        # version 3: CLAIM with flags, and the other actors' tokens
        self.assertEqual(R.message(golden("store-claim-v3.hex"), "claim"), {"prev": 6, "token": 7, "flags": 1})
        with self.assertRaises(R.Bad):
            R.message(golden("store-claim-v2.hex"), "claim")
        self.assertEqual(R.message(golden("store-drop-v3.hex"), "drop"), {"token": 7, "steps": [3, 5]})
        self.assertEqual(R.message(golden("store-pin-v3.hex"), "pin"), {"token": 7, "step": 43, "on": 1})
        self.assertEqual(R.message(golden("store-retire-v3.hex"), "retire"), {"token": 7, "step": 43, "kind": 0})
        self.assertEqual(R.message(golden("store-put-v3.hex"), "put"), {"token": 7, "step": 43, "bytes": b"abc"})
        self.assertEqual(R.message(golden("store-head-v1.hex"), "head"), {"head": 100, "count": 7, "summary": b""})
        self.assertEqual(R.message(golden("store-head-v2.hex"), "head"),
                         {"head": 100, "count": 7, "summary": b"abc"})
        self.assertEqual(R.message(golden("store-list-v1.hex"), "list"), {"after": R.NONE, "max": 100})
        self.assertEqual(R.message(golden("store-materialized-v1.hex"), "materialized"),
                         {"reached": 42, "done": 1, "record": b"abc"})
        self.assertEqual(R.message(golden("store-index-v1.hex"), "index"),
                         {"entries": [{"step": 40, "offset": 0, "length": 100, "kind": 1, "parent": R.NONE},
                                      {"step": 41, "offset": 100, "length": 20, "kind": 2, "parent": 40}]})
        old = bytearray(golden("store-trim-v2.hex"))
        old[2] = old[3] = 1  # the same bytes as a version-1 frame: unfenced, refused
        with self.assertRaises(R.Bad):
            R.message(bytes(old), "trim")

    def test_pcr_messages(self):
        self.assertEqual(R.pcr_message(golden("pcr-read-v1.hex"), "read"), {"k": 3})
        self.assertEqual(R.pcr_message(golden("pcr-prefix-v1.hex"), "prefix"), {"k": 2, "bytes": b"abc"})
        self.assertEqual(R.pcr_message(golden("pcr-images-v1.hex"), "images"), {"k": 0xFFFF, "idx": [5, 1]})
        self.assertEqual(R.pcr_message(golden("pcr-jpegs-v1.hex"), "jpegs"),
                         {"images": [{"id": 9, "name": b"a.jpg", "label": b"cat", "jpeg": b"\xff\xd8\xff\xd9"}]})
        self.assertEqual(R.pcr_message(golden("pcr-stat-v1.hex"), "stat"),
                         {"record": 3, "images": 512, "head_len": 900, "size": 5000, "ends": [1000, 5000]})
        bad = bytearray(golden("pcr-jpegs-v1.hex"))
        bad[12 + 4 + 4 + 1] = ord("/")  # a name with a slash
        with self.assertRaises(R.Bad):
            R.pcr_message(bytes(bad), "jpegs")

    def test_attachment(self):
        self.assertEqual(R.attachment(golden("store-attach-v1.hex"), 43), b"hello")
        with self.assertRaises(R.Bad):
            R.attachment(golden("store-attach-v1.hex"), 44)

    def test_damage_refused(self):
        base = R.record(golden("ckpt-record-v1.hex"))
        for name in ("ckpt-delta-v1.hex", "ckpt-sparse-v1.hex"):
            b = bytearray(golden(name))
            b[len(b) - 6] ^= 1
            with self.assertRaises(R.Bad):
                R.record(bytes(b), base)
        with self.assertRaises(R.Bad):  # a delta on another parent
            R.record(golden("ckpt-delta-v1.hex"), dict(base, step=41))


class AgainstC(unittest.TestCase):
    """Chains the C encoder makes from the fixture's real checkpoints: the
    reference decodes every step, every chunk's SHA-256 is its manifest's,
    and its tensors are byte for byte the C decoder's."""

    def test_chains(self):
        cli, d = os.environ.get("RCKPT_CLI"), os.environ.get("RCKPT_TEST_CKPT_DIR")
        if not cli or not d:
            skip_test("data", "RCKPT_CLI or RCKPT_TEST_CKPT_DIR is not set (ctest sets them)")
        ckpts = sorted(p for p in glob.glob(os.path.join(d, "step-*.safetensors"))
                       if os.path.basename(p).count(".") == 1)[:8]  # not the .grads. siblings
        self.assertGreaterEqual(len(ckpts), 8)
        versions = set()
        with tempfile.TemporaryDirectory() as t:
            for eps in ("0.0012", "0.01"):
                enc = os.path.join(t, "enc" + eps)
                subprocess.run([cli, "codec", "encode", "--eps", eps, "-o", enc] + ckpts, check=True,
                               stdout=subprocess.DEVNULL)
                steps = sorted(glob.glob(os.path.join(enc, "*.rckpt")))
                for p in steps:
                    with open(p, "rb") as f:
                        versions |= {rec[4] for rec in R.step_file(f.read())[1]}
                for k in (1, 4, len(steps)):
                    out = os.path.join(t, "c.safetensors")
                    subprocess.run([cli, "codec", "decode", "-o", out] + steps[:k], check=True,
                                   stdout=subprocess.DEVNULL)
                    got, ref = R.read_safetensors(out), R.decode_chain(steps[:k])
                    self.assertEqual(sorted(got), sorted(ref))
                    for name in ref:
                        self.assertEqual(got[name], ref[name], (eps, k, name))
            # the exact tier: every value's bits, in planes (version 5)
            enc = os.path.join(t, "exact")
            subprocess.run([cli, "codec", "encode", "--exact", "-o", enc] + ckpts[:4], check=True,
                           stdout=subprocess.DEVNULL)
            steps = sorted(glob.glob(os.path.join(enc, "*.rckpt")))
            for p in steps:
                with open(p, "rb") as f:
                    versions |= {rec[4] for rec in R.step_file(f.read())[1]}
            out = os.path.join(t, "x.safetensors")
            subprocess.run([cli, "codec", "decode", "-o", out] + steps, check=True,
                           stdout=subprocess.DEVNULL)
            got, ref, src = R.read_safetensors(out), R.decode_chain(steps), R.read_safetensors(ckpts[3])
            self.assertEqual(sorted(ref), sorted(src))
            for name in src:
                self.assertEqual(ref[name], src[name], name)
                self.assertEqual(got[name], src[name], name)
        self.assertIn(3, versions)  # CTX streams
        self.assertIn(4, versions)  # predicted blobs
        self.assertIn(5, versions)  # byte planes


if __name__ == "__main__":
    unittest.main(verbosity=2)
