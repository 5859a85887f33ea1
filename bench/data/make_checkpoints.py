#!/usr/bin/python3
"""make_checkpoints.py — train a small real model and write its checkpoints.

The data is scikit-learn's bundled handwritten digits (shipped in the Debian
package python3-sklearn; nothing is downloaded). The model has every layer
kind the codec treats differently: an embedding (each pixel's intensity 0..16
is a token), two convolutions, two linear layers, a LayerNorm and biases
(--arch cnn, the default); --arch mlp puts three linear layers in place of
the convolutions.

Every --every steps it writes OUT/step-NNNNNN.safetensors (the parameters)
and OUT/step-NNNNNN.grads.safetensors (the root mean square of the recent
mini-batch gradients, sqrt of an EMA of grad**2: the diagonal Fisher estimate
the codec weighs errors and ranks values by; --grads mean writes the EMA of
the gradients themselves instead, to OUT/step-NNNNNN.gmean.safetensors (a
signed mean is no RMS: the codec refuses it as .grads), and --grads both
writes both), and prints
the held-out accuracy. With --optim adam or adamw given it also writes
OUT/step-NNNNNN.optim.safetensors (exp_avg.NAME and exp_avg_sq.NAME of the
optimizer). OUT/model.json describes the model for eval_checkpoint.py.
Deterministic for a given --seed.

usage: make_checkpoints.py OUT [--steps N] [--every K] [--width W] [--seed S]
                           [--arch cnn|mlp] [--optim adam|adamw|sgd]
                           [--grads rms|mean|both] [--ema E]

Run it with Debian's own interpreter (/usr/bin/python3): python3-torch and
python3-sklearn are installed for it.
"""
import argparse
import json
import math
import os
import struct
import sys


def write_safetensors(path, tensors):
    """Write {name: tensor} in the safetensors layout: an 8-byte little-endian
    header length, a JSON header of dtype/shape/offsets, then the raw bytes."""
    import torch

    dtypes = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        if t.dtype == torch.bfloat16:
            raw = t.view(torch.int16).numpy().tobytes()
        else:
            raw = t.numpy().tobytes()
        header[name] = {
            "dtype": dtypes[t.dtype],
            "shape": list(t.shape),
            "data_offsets": [offset, offset + len(raw)],
        }
        blobs.append(raw)
        offset += len(raw)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)  # align the data to 8 bytes
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def fold_grads(named, ema, gmean, mode, beta):
    """Folds this step's gradients into the moving averages: of grad**2
    (mode rms or both; its root is written) or of grad (mean), and of grad
    into gmean too (both). Shared with make_transformer.py."""
    import torch

    with torch.no_grad():
        for n, p in named:
            if mode == "mean":
                ema[n].mul_(beta).add_(p.grad, alpha=1 - beta)
            else:
                ema[n].mul_(beta).addcmul_(p.grad, p.grad, value=1 - beta)
            if mode == "both":
                gmean[n].mul_(beta).add_(p.grad, alpha=1 - beta)


def build(width, arch="cnn"):
    """The model (arch cnn or mlp), shared with eval_checkpoint.py."""
    import torch
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self, w):
            super().__init__()
            self.embed = nn.Embedding(17, 8)
            self.conv1 = nn.Conv2d(8, 16, 3, padding=1)
            self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
            self.fc1 = nn.Linear(32 * 4 * 4, w)
            self.norm = nn.LayerNorm(w)
            self.fc2 = nn.Linear(w, 10)

        def forward(self, img):
            h = self.embed(img).permute(0, 3, 1, 2)  # B, 8, 8, 8
            h = torch.relu(self.conv1(h))
            h = torch.max_pool2d(torch.relu(self.conv2(h)), 2)
            h = torch.relu(self.norm(self.fc1(h.flatten(1))))
            return self.fc2(h)

    class MLP(nn.Module):
        """The same embedding, then linear layers only (no convolution)."""

        def __init__(self, w):
            super().__init__()
            self.embed = nn.Embedding(17, 8)
            self.fc1 = nn.Linear(8 * 8 * 8, w)
            self.norm = nn.LayerNorm(w)
            self.fc2 = nn.Linear(w, w)
            self.fc3 = nn.Linear(w, 10)

        def forward(self, img):
            h = self.embed(img).flatten(1)  # B, 8 * 8 * 8
            h = torch.relu(self.norm(self.fc1(h)))
            h = torch.relu(self.fc2(h))
            return self.fc3(h)

    if arch == "cnn":
        return Net(width)
    if arch == "mlp":
        return MLP(width)
    raise ValueError(f"unknown arch {arch!r} (cnn or mlp)")


def digits(seed, n_test=300):
    import torch
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.tensor(d.images, dtype=torch.long)  # 8x8 intensities 0..16
    y = torch.tensor(d.target, dtype=torch.long)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    x, y = x[perm], y[perm]
    return x[n_test:], y[n_test:], x[:n_test], y[:n_test]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="directory to write checkpoints into")
    ap.add_argument("--steps", type=int, default=600, help="training steps (default 600)")
    ap.add_argument("--every", type=int, default=25, help="checkpoint interval (default 25)")
    ap.add_argument("--width", type=int, default=512, help="hidden width (default 512)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ema", type=float, default=0.9, help="gradient EMA decay (default 0.9)")
    ap.add_argument("--arch", choices=("cnn", "mlp"), default="cnn",
                    help="cnn (default): embedding, two convolutions, two linear layers; mlp: three linear layers")
    ap.add_argument("--optim", choices=("adam", "adamw", "sgd"), default=None,
                    help="adam (default; lr 1e-3), adamw (lr 1e-3, weight decay 0.01, cosine to zero) or "
                         "sgd (momentum 0.9, lr 0.05); given, adam and adamw also write .optim.safetensors")
    ap.add_argument("--grads", choices=("rms", "mean", "both"), default="rms",
                    help="rms (default): sqrt of the EMA of grad**2; mean: the EMA of the gradients; "
                         "both: rms, and the mean in .gmean.safetensors")
    a = ap.parse_args()
    if a.steps < 1 or a.every < 1 or a.width < 8:
        ap.error("--steps and --every must be >= 1, --width >= 8")
    if not 0.0 <= a.ema < 1.0:
        ap.error("--ema must be in [0, 1)")
    # Without --optim the output is what it always was: Adam, no optimizer
    # state files (tools that list step-*.safetensors skip only .grads.).
    save_optim = a.optim in ("adam", "adamw")
    optim = a.optim or "adam"

    try:
        import torch
        import torch.nn as nn
        import sklearn  # noqa: F401 (the data)
    except ImportError as e:
        sys.exit(f"make_checkpoints.py: {e}: install python3-torch and python3-sklearn "
                 "and run with /usr/bin/python3")

    torch.manual_seed(a.seed)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    xtr, ytr, xt, yt = digits(a.seed)
    n_test = len(yt)
    net = build(a.width, a.arch)
    if optim == "adam":
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    elif optim == "adamw":
        opt = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=0.01)
    else:
        opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    lossf = nn.CrossEntropyLoss()
    # mean: EMA of the gradients; rms: EMA of their squares (written as its root).
    gmean = {n: torch.zeros_like(p) for n, p in net.named_parameters()} if a.grads == "both" else {}
    ema = {n: torch.zeros_like(p) for n, p in net.named_parameters()}
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "model.json"), "w") as f:
        json.dump({"kind": "digits", "arch": a.arch, "width": a.width, "seed": a.seed}, f)
        f.write("\n")
    g = torch.Generator().manual_seed(a.seed + 1)
    nparams = sum(p.numel() for p in net.parameters())
    print(f"model: {nparams} parameters; {len(ytr)} training and {n_test} held-out digits")
    for step in range(1, a.steps + 1):
        if optim == "adamw":  # cosine from 1e-3 to exactly zero at the last step
            for group in opt.param_groups:
                group["lr"] = 1e-3 * 0.5 * (1.0 + math.cos(math.pi * step / a.steps))
        idx = torch.randint(0, len(ytr), (64,), generator=g)
        opt.zero_grad()
        loss = lossf(net(xtr[idx]), ytr[idx])
        loss.backward()
        fold_grads(net.named_parameters(), ema, gmean, a.grads, a.ema)
        opt.step()
        if step % a.every == 0:
            with torch.no_grad():
                acc = (net(xt).argmax(1) == yt).float().mean().item()
            base = os.path.join(a.out, f"step-{step:06d}")
            write_safetensors(base + ".safetensors", dict(net.named_parameters()))
            if a.grads == "mean":  # signed: never a .grads (the codec refuses it there)
                write_safetensors(base + ".gmean.safetensors", ema)
            else:
                write_safetensors(base + ".grads.safetensors", {n: e.sqrt() for n, e in ema.items()})
            if a.grads == "both":
                write_safetensors(base + ".gmean.safetensors", gmean)
            if save_optim:
                state = {}
                for n, p in net.named_parameters():
                    state["exp_avg." + n] = opt.state[p]["exp_avg"].float()
                    state["exp_avg_sq." + n] = opt.state[p]["exp_avg_sq"].float()
                write_safetensors(base + ".optim.safetensors", state)
            print(f"step {step:6d}  loss {loss.item():.4f}  held-out accuracy {acc:.3f}  -> {base}.safetensors")


if __name__ == "__main__":
    main()
