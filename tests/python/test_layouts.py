#!/usr/bin/python3
"""Any state at any step, against the local cluster (issue 63).

A small character model trains on a text Debian ships and saves a
checkpoint every 10 steps, its state changing as real runs' do: step 0
before the first optimizer step (AdamW has no moments yet), then the
optimizer's state appears, an adapter is added (a new param group), the
adapter is removed, the vocabulary grows (embedding and head resized),
and a layer switches to bf16. Every save commits; `steps()` marks the
saves whose tensors changed; every step restores its own tensors (names,
shapes, dtypes; nothing of a later step), the exact ones bit for bit (a
-inf mask, the optimizer's step counts) and the rest within the step's
threshold; the ratio two saves after each change is within 10% of the
ratio before it.

Skips (77) without python3-torch or a cluster (CEPH_CONF), unless
required (testskip.py). Env: RCKPT_LIBRARY.
"""
import os
import sys
import unittest

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "client", "python"))
os.environ["CUDA_VISIBLE_DEVICES"] = ""

from testskip import skip_test  # noqa: E402

try:
    import torch
except ImportError:
    skip_test("data", "python3-torch is not installed")

import rckpt  # noqa: E402

CONF = os.environ.get("CEPH_CONF")
if not CONF:
    skip_test("cluster", "no cluster (CEPH_CONF is not set)")
TEXT = "/usr/share/common-licenses/GPL-3"
if not os.path.exists(TEXT):
    skip_test("data", "%s is not there (base-files)" % TEXT)

EPS = 0.003
CTX = 16


class Net(torch.nn.Module):
    def __init__(self, vocab, d=64):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, d)
        self.fc1 = torch.nn.Linear(CTX * d, 256)
        self.fc2 = torch.nn.Linear(256, 256)
        self.head = torch.nn.Linear(256, vocab)
        self.adapter = None
        # a tensor the codec cannot quantize: kept exact in every step
        self.register_buffer("mask", torch.triu(torch.full((8, 8), float("-inf")), 1))

    def forward(self, x):
        h = torch.relu(self.fc1(self.embed(x).flatten(1)))
        if self.adapter is not None:
            h = h + self.adapter(h)
        h = torch.relu(self.fc2(h.to(self.fc2.weight.dtype))).float()
        return self.head(h)


def batches(data, vocab, gen):
    while True:
        i = torch.randint(0, len(data) - CTX - 1, (64,), generator=gen)
        x = torch.stack([data[j:j + CTX] for j in i.tolist()])
        y = data[i + CTX]
        yield x.clamp(max=vocab - 1), y.clamp(max=vocab - 1)


def flat_optimizer(opt):
    """The optimizer's tensors as a save sees them, by parameter index."""
    out = {}
    for k, st in opt.state_dict()["state"].items():
        for n, v in st.items():
            if isinstance(v, torch.Tensor):
                out["%s.%s" % (k, n)] = v.detach().clone()
    return out


def rel_err(a, b):
    a, b = a.double(), b.double()
    d = (a * a).sum().item()
    return ((a - b) ** 2).sum().item() / d if d else 0.0


class Layouts(unittest.TestCase):
    def test_any_state_any_step(self):
        job = "lay%d" % os.getpid()
        self.addCleanup(rckpt.Checkpointer.delete, "rckpt", job, CONF)
        torch.manual_seed(0)
        gen = torch.Generator().manual_seed(0)
        with open(TEXT, "rb") as f:
            raw = f.read()
        data = torch.tensor(list(raw), dtype=torch.long)
        # the vocabulary: the 72 most frequent bytes first, 80 after it grows
        order = torch.bincount(data, minlength=256).argsort(descending=True)
        rank = torch.empty(256, dtype=torch.long)
        rank[order] = torch.arange(256)
        data = rank[data]
        vocab = 72
        model = Net(vocab)
        opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
        it = batches(data, vocab, gen)
        saved = {}    # step -> (model tensors, optimizer tensors), as saved
        results = {}  # step -> SaveResult
        changes = []  # the steps whose save changed the tensors

        def save(step):
            sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
            saved[step] = (sd, flat_optimizer(opt))
            results[step] = ck.save(step, model=model, optimizer=opt).wait()

        with rckpt.Checkpointer(job=job, conf=CONF, eps=EPS) as ck:
            save(0)  # before the first optimizer step: no moments yet
            changes.append(10)
            for step in range(1, 151):
                if step == 35:  # an adapter, in a param group of its own
                    model.adapter = torch.nn.Linear(256, 256)
                    torch.nn.init.zeros_(model.adapter.weight)
                    opt.add_param_group({"params": list(model.adapter.parameters())})
                    changes.append(40)
                if step == 65:  # and gone again
                    for p in model.adapter.parameters():
                        opt.state.pop(p, None)
                    opt.param_groups.pop()
                    model.adapter = None
                    changes.append(70)
                if step == 95:  # the vocabulary grows: embedding and head resized
                    old_e, old_h = model.embed, model.head
                    vocab = 80
                    model.embed = torch.nn.Embedding(vocab, old_e.embedding_dim)
                    model.head = torch.nn.Linear(256, vocab)
                    with torch.no_grad():
                        model.embed.weight[:72] = old_e.weight
                        model.head.weight[:72] = old_h.weight
                        model.head.bias[:72] = old_h.bias
                    for old, new in ((old_e.weight, model.embed.weight), (old_h.weight, model.head.weight),
                                     (old_h.bias, model.head.bias)):
                        opt.state.pop(old, None)
                        for g in opt.param_groups:
                            g["params"] = [new if p is old else p for p in g["params"]]
                    it = batches(data, vocab, gen)
                    changes.append(100)
                if step == 125:  # a layer switches to bf16; its moments start anew
                    model.fc2.to(torch.bfloat16)
                    for p in model.fc2.parameters():
                        opt.state.pop(p, None)
                    changes.append(130)
                x, y = next(it)
                loss = torch.nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                if step % 10 == 0:
                    save(step)
            infos = {s.step: s for s in ck.steps()}
            print(" ".join("%d:%.1fx" % (s, results[s].ratio) for s in sorted(results)))

            self.assertEqual(sorted(infos), sorted(saved))
            marked = sorted(s for s, i in infos.items() if i.new_layout)
            self.assertEqual(marked, changes)
            for step in sorted(saved):
                sd, osd = saved[step]
                r = ck.restore_full(step)
                got = r.state_dict
                # its own tensors, nothing of a later step
                self.assertEqual(sorted(got), sorted(sd), "step %d" % step)
                num = den = 0.0
                for k, v in sd.items():
                    g = got[k]
                    self.assertEqual((g.dtype, tuple(g.shape)), (v.dtype, tuple(v.shape)), "%d %s" % (step, k))
                    if k == "mask":
                        self.assertTrue(torch.equal(g, v), "the mask, step %d" % step)
                    elif v.dim() == 1:  # norms and biases: bf16 of their values
                        self.assertLessEqual(rel_err(v, g), 2.0 ** -16, "%d %s" % (step, k))
                    else:
                        e = rel_err(v, g)
                        self.assertLessEqual(e, 20 * EPS, "%d %s" % (step, k))  # no tensor wrecked
                        num += e * (v.double() ** 2).sum().item()
                        den += (v.double() ** 2).sum().item()
                self.assertLessEqual(results[step].quality, EPS)
                # the model's relative error as a whole: within eps (the
                # save's own measure weighs it by the gradients' RMS)
                self.assertLessEqual(num / den, 2 * EPS, "step %d" % step)
                # the optimizer's state: the step's own tensors, its step
                # counts exact
                flat = flat_optimizer_of(r.optimizer)
                self.assertEqual(sorted(flat), sorted(osd), "optimizer, step %d" % step)
                for k, v in osd.items():
                    self.assertEqual((flat[k].dtype, tuple(flat[k].shape)), (v.dtype, tuple(v.shape)), k)
                    if k.endswith(".step"):
                        self.assertTrue(torch.equal(flat[k], v), k)
            # the ratio two saves after each change, against the one before it
            for c in changes[1:]:
                before, after = results[c - 10].ratio, results[c + 20].ratio
                print("change at %d: %.1fx before, %.1fx at the change, %.1fx two saves after"
                      % (c, before, results[c].ratio, after))
                self.assertGreaterEqual(after, 0.9 * before, "two saves after the change at %d" % c)


def flat_optimizer_of(osd):
    out = {}
    for k, st in (osd or {"state": {}})["state"].items():
        for n, v in st.items():
            if isinstance(v, torch.Tensor):
                out["%s.%s" % (k, n)] = v
    return out


if __name__ == "__main__":
    unittest.main()
