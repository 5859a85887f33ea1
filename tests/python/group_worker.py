"""One rank of test_group_save: trains a transformer layer with AdamW (the
same batches on every rank, so the ranks agree as synchronized data
parallelism would) and saves it as a group over torch.distributed (gloo,
file rendezvous on loopback), or restores its slices. Writes JSON.

    group_worker.py JOB RANK WORLD RENDEZVOUS-FILE OUT.json SPEC.json

SPEC: {"mode": "zero3" | "ddp" | "hold", "first": N, "last": M, "kill_at":
K or null, "restore": null or step, "nested": true: the tensors in a
nested tree, saved lossless}. hold: open the job as a group and
keep it while the file spec["hold"] exists (spec["opened"].RANK says it
is open). zero3: every tensor (the model's and
AdamW's exp_avg, exp_avg_sq) as this rank's contiguous slice of it
flattened, as ZeRO-3 lays it out; ddp: every tensor whole. kill_at: this
rank SIGKILLs itself as step K's save begins. restore: no training; this
rank's slice of every tensor of that step, as hex SHA-256 of its bytes.
"""
import hashlib
import json
import os
import signal
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "client", "python"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import rckpt  # noqa: E402


def models(first, last):
    """(step, the model and AdamW state after `step` training steps) for
    step = first..last, from one training run (the same computation as
    model_at(step) for each: a save of steps 1..10 trains 10 steps, not 55)."""
    torch.manual_seed(11)
    model = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, batch_first=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for s in range(1, last + 1):
        g = torch.Generator().manual_seed(1000 + s)
        x = torch.randn(8, 16, 64, generator=g)
        loss = (model(x) - x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if s < first:
            continue
        tensors = {"model/" + k: v.detach().clone() for k, v in model.state_dict().items()}
        names = {id(p): k for k, p in model.named_parameters()}
        for group in opt.param_groups:
            for p in group["params"]:
                st = opt.state[p]
                for key in ("exp_avg", "exp_avg_sq"):
                    tensors["optim/%s/%s" % (names[id(p)], key)] = st[key].detach().clone()
        yield s, tensors


def model_at(step):
    """The model and AdamW state after `step` training steps."""
    return next(models(step, step))[1]


def slice_of(n, rank, world):
    each = (n + world - 1) // world
    a = min(rank * each, n)
    return a, min(a + each, n)


def main():
    job, rank, world, rdv, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    with open(sys.argv[6]) as f:
        spec = json.load(f)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + rdv, rank=rank, world_size=world)
    res = {"saved": [], "error": None}
    ck = None
    if spec.get("restore") is not None:
        with rckpt.Checkpointer(job=job, writer=False) as rd:
            want = model_at(spec["restore"])
            res["slices"] = {}
            for name, t in want.items():
                a, b = slice_of(t.numel(), rank, world)
                got = rd.restore_slice(name, a, b - a, step=spec["restore"])
                res["slices"][name] = [a, b, hashlib.sha256(got.numpy().tobytes()).hexdigest()]
    elif spec.get("mode") == "hold":  # hold the job while a file exists
        with rckpt.Checkpointer(job=job, group=True, chunk_params=1 << 14, compute="cpu"):
            open(spec["opened"] + ".%d" % rank, "w").close()
            while os.path.exists(spec["hold"]):
                time.sleep(0.05)
    else:
        try:
            ck = rckpt.Checkpointer(job=job, group=True, chunk_params=1 << 14, compute="cpu")
        except rckpt.RckptError as e:
            res["error"] = ["open", e.code, str(e)]
            ck = None
    if ck is not None:
        with ck:
            for step, tensors in models(spec["first"], spec["last"]):
                sd = {}
                for name, t in tensors.items():
                    if spec["mode"] == "zero3":
                        a, b = slice_of(t.numel(), rank, world)
                        sd[name] = rckpt.Shard(t.reshape(-1)[a:b].clone(), t.shape, a)
                    else:
                        sd[name] = t
                if spec.get("kill_at") == step and rank == world - 1:
                    os.kill(os.getpid(), signal.SIGKILL)
                tree = {"step": step, **sd}
                if spec.get("nested"):  # a trainer's usual tree, kept exact
                    tree = {"model": {k[6:]: v for k, v in sd.items() if k.startswith("model/")},
                            "optim": {k[6:]: v for k, v in sd.items() if k.startswith("optim/")},
                            "sched": {"epoch": 3, "lrs": [1e-3, 5e-4], "ids": (1, "x")}, "step": step}
                try:
                    r = ck.save(step, tree, lossless=bool(spec.get("nested"))).wait()
                    res["saved"].append([step, r.raw_bytes, r.enc_bytes])
                except rckpt.RckptError as e:
                    res["error"] = [step, e.code, str(e)]
                    break
    with open(out, "w") as f:
        json.dump(res, f)
    if res["error"] is None:
        dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
