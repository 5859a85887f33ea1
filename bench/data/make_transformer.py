#!/usr/bin/python3
"""make_transformer.py — train a small GPT-style language model and write its
checkpoints, to calibrate the lossy codec against a real held-out loss.

The text is the Python standard library's own source as Debian's python3.11
ships it (package libpython3.11-stdlib, always installed; nothing is
downloaded): the top-level files /usr/lib/python3.11/*.py in sorted order,
joined by a newline and cut to --corpus-bytes. Tokens are bytes (vocabulary
256); the last 10% is held out. The model is a pre-LayerNorm decoder with
hand-written causal self-attention, GELU MLPs, learned token and position
embeddings and an untied output head, so the codec sees every layer kind a
transformer has (embeddings, attention, MLP, norms, biases, head).

Every --every steps and at the last step it writes OUT/step-NNNNNN.safetensors
(the parameters), OUT/step-NNNNNN.grads.safetensors (per parameter the root
mean square of the recent mini-batch gradients, the square root of an EMA of
grad**2; --grads mean writes the EMA of the gradients instead, as
OUT/step-NNNNNN.gmean.safetensors: a signed mean is no RMS) and, with
AdamW, OUT/step-NNNNNN.optim.safetensors (exp_avg.NAME and exp_avg_sq.NAME
of the optimizer), and prints the training and held-out loss in nats per
byte. OUT/model.json describes the model for eval_checkpoint.py.
Deterministic for a given --seed.

usage: make_transformer.py OUT [--steps N] [--every K] [--d-model D]
                           [--n-layer L] [--n-head H] [--ctx C] [--batch B]
                           [--lr LR] [--optim adamw|sgd] [--grads rms|mean]
                           [--ema E] [--corpus-bytes N] [--seed S]

Run it with Debian's own interpreter (/usr/bin/python3): python3-torch is
installed for it. The default run (470,528 parameters, 2000 steps) takes
about 100 s on two cores and ends near 1.52 nats/byte held out (ln 256 =
5.55 for a uniform guess).
"""
import argparse
import glob
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_checkpoints as mc  # noqa: E402  (write_safetensors)

STDLIB = "/usr/lib/python3.11"
MIN_CORPUS = 500_000  # bytes of source the corpus must find
N_EVAL = 128  # held-out windows evaluated (8 Ki bytes at ctx 64), spread evenly over the split
DEFAULTS = {"d_model": 128, "n_layer": 2, "n_head": 4, "ctx": 64}
DEFAULT_CORPUS_BYTES = 4_000_000

_corpus_cache = {}


def corpus(max_bytes=DEFAULT_CORPUS_BYTES):
    """(train, heldout): long tensors of byte tokens, the last 10% held out.
    Shared with eval_checkpoint.py; cached, as the calibration asks often."""
    if max_bytes in _corpus_cache:
        return _corpus_cache[max_bytes]
    import torch

    files = sorted(glob.glob(os.path.join(STDLIB, "*.py")))
    parts = []
    for path in files:
        with open(path, "rb") as f:
            parts.append(f.read())
    data = b"\n".join(parts)
    if len(data) < MIN_CORPUS:
        raise RuntimeError(f"only {len(data)} bytes of Python source in {STDLIB}/*.py "
                           f"({len(files)} files), need {MIN_CORPUS}: is libpython3.11-stdlib installed?")
    data = data[:max_bytes]
    tokens = torch.frombuffer(bytearray(data), dtype=torch.uint8).long()
    n_held = len(tokens) // 10
    split = (tokens[:len(tokens) - n_held], tokens[len(tokens) - n_held:])
    _corpus_cache[max_bytes] = split
    return split


def eval_windows(heldout, ctx, n=N_EVAL):
    """The fixed held-out batch: n windows of ctx+1 bytes, their starts spread
    evenly over the split (the same in training and in eval_checkpoint.py).
    Returns (inputs, targets), each n x ctx."""
    import torch

    last = len(heldout) - (ctx + 1)
    if last < 0:
        raise RuntimeError(f"held-out split ({len(heldout)} bytes) shorter than a window of {ctx + 1}")
    starts = [round(i * last / (n - 1)) if n > 1 else 0 for i in range(n)]
    w = torch.stack([heldout[s:s + ctx + 1] for s in starts])
    return w[:, :-1], w[:, 1:]


def build(cfg):
    """The model for cfg {d_model, n_layer, n_head, ctx}; the parameter names
    are the ones the codec classifies by (tok_emb/wpe embeddings, attn.qkv,
    attn.proj, mlp.fc, mlp.proj, ln*, head). Shared with eval_checkpoint.py.

    Debian's python3-torch does its matrix products with the reference
    (netlib) BLAS, one thread at a few GFLOP/s, while its oneDNN
    convolutions run ten to forty times faster on the same cores. So the
    products here are 1x1 convolutions: a Linear's over the tokens as
    positions, attention's as a grouped convolution with a group per
    (sequence, head). The parameters are plain nn.Linear ones (the same
    names, shapes and results to float rounding); only the route differs."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    d, n_layer, n_head, ctx = cfg["d_model"], cfg["n_layer"], cfg["n_head"], cfg["ctx"]
    if d % n_head:
        raise ValueError(f"d_model {d} is not a multiple of n_head {n_head}")

    # Both in channels-last layout (NHWC memory, what oneDNN is fastest on;
    # other layouts of the same view run up to 20 times slower).
    class Linear(nn.Linear):
        def forward(self, x):  # x: B, T, in -> B, T, out
            # x's own memory read as B, in, T, 1 channels-last: no copy.
            h = F.conv2d(x.unsqueeze(2).permute(0, 3, 1, 2), self.weight[:, :, None, None], self.bias)
            return h.permute(0, 2, 3, 1).squeeze(2)

    def bmm(a, b):
        """a[:, g] @ b[g] for every g, a: M, G, K and b: G, K, N, out: M, G, N
        (position-major, so attention's rows stay contiguous): a grouped 1x1
        convolution, a group per g, the M rows its positions."""
        M, G, K = a.shape
        N = b.shape[2]
        x = a.reshape(1, M, 1, G * K).permute(0, 3, 1, 2)  # 1, G*K, M, 1 channels-last
        h = F.conv2d(x, b.transpose(1, 2).reshape(G * N, K, 1, 1), groups=G)  # 1, G*N, M, 1 channels-last
        return h.permute(0, 2, 3, 1).reshape(M, G, N)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = Linear(d, 3 * d)
            self.proj = Linear(d, d)
            # Causal mask (query t sees keys s <= t), as t, 1, s: not a
            # parameter and not in the state dict.
            mask = torch.tril(torch.ones(ctx, ctx, dtype=torch.bool))
            self.register_buffer("mask", mask[:, None, :], persistent=False)

        def forward(self, x):
            B, T, _ = x.shape
            dh = d // n_head
            G = B * n_head  # a (sequence, head) pair
            qkv = self.qkv(x).view(B, T, 3, n_head, dh)
            q = qkv[:, :, 0].transpose(0, 1).reshape(T, G, dh) * (1.0 / math.sqrt(dh))  # T, G, dh
            k = qkv[:, :, 1].permute(0, 2, 1, 3).reshape(G, T, dh)
            v = qkv[:, :, 2].permute(0, 2, 1, 3).reshape(G, T, dh)
            att = bmm(q, k.transpose(1, 2))  # T (query), G, T (key)
            att = att.masked_fill(~self.mask[:T, :, :T], float("-inf")).softmax(-1)
            y = bmm(att, v)  # T, G, dh
            return self.proj(y.view(T, B, d).transpose(0, 1))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = Linear(d, 4 * d)
            self.proj = Linear(4 * d, d)

        def forward(self, x):
            return self.proj(F.gelu(self.fc(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(d)
            self.attn = Attention()
            self.ln2 = nn.LayerNorm(d)
            self.mlp = MLP()

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_emb = nn.Embedding(256, d)
            self.wpe = nn.Embedding(ctx, d)
            self.blocks = nn.ModuleList(Block() for _ in range(n_layer))
            self.ln_f = nn.LayerNorm(d)
            self.head = Linear(d, 256, bias=False)
            # GPT-2's initialisation: N(0, 0.02), biases zero, the projections
            # into the residual stream scaled down by sqrt(2 * n_layer).
            for name, p in self.named_parameters():
                if name.endswith(".bias"):
                    nn.init.zeros_(p)
                elif p.dim() == 2:
                    std = 0.02 / math.sqrt(2 * n_layer) if name.endswith("proj.weight") else 0.02
                    nn.init.normal_(p, 0.0, std)

        def forward(self, idx):
            T = idx.shape[1]
            x = self.tok_emb(idx) + self.wpe(torch.arange(T, device=idx.device))
            for b in self.blocks:
                x = b(x)
            return self.head(self.ln_f(x))  # B, T, 256 logits

    return GPT()


def cfg_from_state(sd, n_head=None):
    """Rebuild the cfg from a state dict's shapes (n_head is not in them)."""
    n_layer = 0
    while f"blocks.{n_layer}.attn.qkv.weight" in sd:
        n_layer += 1
    return {"d_model": sd["tok_emb.weight"].shape[1], "n_layer": n_layer,
            "n_head": n_head or DEFAULTS["n_head"], "ctx": sd["wpe.weight"].shape[0]}


def loss_on(net, x, y, batch=64):
    """Mean cross-entropy in nats per byte of net's predictions of y from x,
    `batch` windows at a time (the same mean; large batches are slow here)."""
    import torch
    import torch.nn.functional as F

    if x.shape[0] <= batch:
        return F.cross_entropy(net(x).reshape(-1, 256), y.reshape(-1))
    tot = sum(F.cross_entropy(net(x[i:i + batch]).reshape(-1, 256), y[i:i + batch].reshape(-1),
                              reduction="sum") for i in range(0, x.shape[0], batch))
    return tot / torch.tensor(float(y.numel()))


def lr_factor(step, steps, warmup):
    """Linear warm-up over `warmup` steps, then a cosine to exactly zero at
    the last step (step counts from 1)."""
    warmup = min(warmup, steps - 1)
    if step <= warmup:
        return step / warmup
    return 0.5 * (1.0 + math.cos(math.pi * (step - warmup) / (steps - warmup)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="directory to write checkpoints into")
    ap.add_argument("--steps", type=int, default=2000, help="training steps (default 2000)")
    ap.add_argument("--every", type=int, default=100, help="checkpoint interval (default 100; the last step always)")
    ap.add_argument("--d-model", type=int, default=DEFAULTS["d_model"], help="model width (default 128)")
    ap.add_argument("--n-layer", type=int, default=DEFAULTS["n_layer"], help="blocks (default 2)")
    ap.add_argument("--n-head", type=int, default=DEFAULTS["n_head"], help="attention heads (default 4)")
    ap.add_argument("--ctx", type=int, default=DEFAULTS["ctx"], help="context in bytes (default 64)")
    ap.add_argument("--batch", type=int, default=32, help="windows per batch (default 32)")
    ap.add_argument("--optim", choices=("adamw", "sgd"), default="adamw",
                    help="adamw (default; also writes .optim.safetensors) or sgd with momentum 0.9")
    ap.add_argument("--lr", type=float, default=None, help="peak learning rate (default 3e-3 adamw, 0.3 sgd)")
    ap.add_argument("--warmup", type=int, default=50, help="linear warm-up steps (default 50)")
    ap.add_argument("--grads", choices=("rms", "mean", "both"), default="rms",
                    help="rms (default): sqrt of the EMA of grad**2; mean: the EMA of the gradients, in .gmean.safetensors only; both: rms, and the mean in .gmean.safetensors")
    ap.add_argument("--ema", type=float, default=0.9, help="gradient EMA decay (default 0.9)")
    ap.add_argument("--corpus-bytes", type=int, default=DEFAULT_CORPUS_BYTES,
                    help="bytes of the corpus used (default 4000000)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.steps < 1 or a.every < 1 or a.batch < 1 or a.warmup < 0:
        ap.error("--steps, --every and --batch must be >= 1, --warmup >= 0")
    if a.d_model < 8 or a.n_layer < 1 or a.n_head < 1 or a.d_model % a.n_head or a.ctx < 2:
        ap.error("need --d-model >= 8 a multiple of --n-head >= 1, --n-layer >= 1, --ctx >= 2")
    if a.corpus_bytes < 100_000:
        ap.error("--corpus-bytes must be >= 100000")
    if not 0.0 <= a.ema < 1.0:
        ap.error("--ema must be in [0, 1)")
    if a.lr is None:
        a.lr = 3e-3 if a.optim == "adamw" else 0.3
    if a.lr <= 0:
        ap.error("--lr must be > 0")

    try:
        import torch
    except ImportError as e:
        sys.exit(f"make_transformer.py: {e}: install python3-torch and run with /usr/bin/python3")

    torch.manual_seed(a.seed)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    try:
        train, held = corpus(a.corpus_bytes)
        ex, ey = eval_windows(held, a.ctx)
    except RuntimeError as e:
        sys.exit(f"make_transformer.py: {e}")
    cfg = {"d_model": a.d_model, "n_layer": a.n_layer, "n_head": a.n_head, "ctx": a.ctx}
    net = build(cfg)
    named = dict(net.named_parameters())

    # Weight decay on the matrices only: not on norms, biases or embeddings.
    embeddings = ("tok_emb.weight", "wpe.weight")
    decay = [p for n, p in named.items() if p.dim() == 2 and n not in embeddings]
    rest = [p for n, p in named.items() if p.dim() != 2 or n in embeddings]
    if a.optim == "adamw":
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                 {"params": rest, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.95))
    else:
        # Plain SGD with momentum; a coupled L2 as strong as AdamW's 0.1 would
        # shrink the weights by lr*0.1 a step, so a far smaller one.
        opt = torch.optim.SGD([{"params": decay, "weight_decay": 1e-4},
                               {"params": rest, "weight_decay": 0.0}], lr=a.lr, momentum=0.9)

    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "model.json"), "w") as f:
        json.dump({"kind": "transformer", **cfg, "corpus_bytes": a.corpus_bytes, "seed": a.seed}, f)
        f.write("\n")

    # rms: EMA of grad**2 (written as its square root); mean: EMA of grad.
    gmean = {n: torch.zeros_like(p) for n, p in net.named_parameters()} if a.grads == "both" else {}
    ema = {n: torch.zeros_like(p) for n, p in named.items()}
    g = torch.Generator().manual_seed(a.seed + 1)
    nparams = sum(p.numel() for p in net.parameters())
    print(f"model: {nparams} parameters ({a.n_layer} blocks, d_model {a.d_model}, {a.n_head} heads, "
          f"ctx {a.ctx}); {len(train)} training and {len(held)} held-out bytes; "
          f"{N_EVAL} held-out windows; ln(256) = {math.log(256):.4f}")
    for step in range(1, a.steps + 1):
        lr = a.lr * lr_factor(step, a.steps, a.warmup)
        for group in opt.param_groups:
            group["lr"] = lr
        starts = torch.randint(0, len(train) - a.ctx - 1, (a.batch,), generator=g)
        w = torch.stack([train[s:s + a.ctx + 1] for s in starts.tolist()])
        opt.zero_grad(set_to_none=True)
        loss = loss_on(net, w[:, :-1], w[:, 1:])
        loss.backward()
        # The mini-batch gradients as they come, before clipping.
        mc.fold_grads(named.items(), ema, gmean, a.grads, a.ema)
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        if step % a.every == 0 or step == a.steps:
            net.eval()
            with torch.no_grad():
                hl = loss_on(net, ex, ey).item()
            net.train()
            base = os.path.join(a.out, f"step-{step:06d}")
            mc.write_safetensors(base + ".safetensors", named)
            if a.grads == "mean":  # signed: never a .grads (the codec refuses it there)
                mc.write_safetensors(base + ".gmean.safetensors", ema)
            else:
                mc.write_safetensors(base + ".grads.safetensors", {n: e.sqrt() for n, e in ema.items()})
            if a.grads == "both":
                mc.write_safetensors(base + ".gmean.safetensors", gmean)
            if a.optim == "adamw":
                state = {}
                for n, p in named.items():
                    s = opt.state[p]
                    state["exp_avg." + n] = s["exp_avg"].float()
                    state["exp_avg_sq." + n] = s["exp_avg_sq"].float()
                mc.write_safetensors(base + ".optim.safetensors", state)
            print(f"step {step:6d}  loss {loss.item():.4f}  held-out loss {hl:.4f}  -> {base}.safetensors",
                  flush=True)


if __name__ == "__main__":
    main()
