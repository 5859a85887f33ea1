#!/usr/bin/python3
"""eval_checkpoint.py — held-out accuracy and loss of checkpoints of the
models of make_checkpoints.py (digits, cnn or mlp) and make_transformer.py
(byte-level language model), e.g. an original beside its rckpt round trip:

    eval_checkpoint.py step-000600.safetensors decoded.safetensors

The model is told by the tensor names (tok_emb.weight: the transformer;
conv1.weight: the digits cnn; else the digits mlp) and rebuilt from their
shapes; model.json beside the file, when there, gives what the shapes do not
(the transformer's heads and corpus size, the digits' seed, which fixes the
held-out split). Digits print accuracy and loss, the transformer its loss in
nats per byte on make_transformer.py's fixed held-out windows; --json prints
one JSON object per file instead.

From Python, heldout_loss(path or state dict) and evaluate(...) do the same
for one checkpoint; the data and the built model are kept between calls.

Reads safetensors with its own few lines (no safetensors package needed).
Run with Debian's /usr/bin/python3 (python3-torch, python3-sklearn).
"""
import argparse
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_checkpoints as mc  # noqa: E402
import make_transformer as mt  # noqa: E402


def read_safetensors(path):
    import torch

    kinds = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    head = json.loads(blob[8:8 + n])
    data, out = blob[8 + n:], {}
    for name, e in head.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        dt = kinds[e["dtype"]]
        t = torch.frombuffer(bytearray(data[b:end]), dtype=torch.int16 if dt == torch.bfloat16 else dt)
        out[name] = (t.view(torch.bfloat16) if dt == torch.bfloat16 else t).reshape(e["shape"]).float()
    return out


def model_meta(path):
    """model.json in the checkpoint's directory, or {} if there is none."""
    try:
        with open(os.path.join(os.path.dirname(os.path.abspath(path)), "model.json")) as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


# Data and built models, kept between calls (a calibration evaluates
# thousands of checkpoints of one model: only load_state_dict each time).
_data, _nets = {}, {}


def _net(key, make):
    if key not in _nets:
        _nets[key] = make().eval()
    return _nets[key]


def evaluate(ckpt, meta=None):
    """Held-out figures of one checkpoint, a safetensors path or a state dict:
    {"kind", "loss"} and, for digits, "accuracy". meta stands in for
    model.json (by default read beside a path; {} for a state dict)."""
    import torch
    import torch.nn.functional as F

    if torch.get_num_threads() > 2:
        torch.set_num_threads(2)
    if isinstance(ckpt, (str, os.PathLike)):
        sd = read_safetensors(ckpt)
        meta = model_meta(ckpt) if meta is None else meta
    else:
        sd = ckpt
    meta = meta or {}

    if "tok_emb.weight" in sd:
        cfg = mt.cfg_from_state(sd, meta.get("n_head"))
        nbytes = meta.get("corpus_bytes", mt.DEFAULT_CORPUS_BYTES)
        key = ("transformer", nbytes, cfg["ctx"])
        if key not in _data:
            _data[key] = mt.eval_windows(mt.corpus(nbytes)[1], cfg["ctx"])
        x, y = _data[key]
        net = _net(("transformer",) + tuple(sorted(cfg.items())), lambda: mt.build(cfg))
        net.load_state_dict(sd)
        with torch.no_grad():
            return {"kind": "transformer", "loss": mt.loss_on(net, x, y).item()}

    if "fc1.weight" in sd:
        arch = "cnn" if "conv1.weight" in sd else "mlp"
        width = sd["fc1.weight"].shape[0]
        seed = meta.get("seed", 0)
        if ("digits", seed) not in _data:
            _data["digits", seed] = mc.digits(seed)[2:]
        x, y = _data["digits", seed]
        net = _net(("digits", arch, width), lambda: mc.build(width, arch))
        net.load_state_dict(sd)
        with torch.no_grad():
            logits = net(x)
        return {"kind": "digits", "loss": F.cross_entropy(logits, y).item(),
                "accuracy": (logits.argmax(1) == y).float().mean().item()}

    raise ValueError("not a checkpoint of make_checkpoints.py or make_transformer.py "
                     "(no tok_emb.weight or fc1.weight)")


def heldout_loss(ckpt, meta=None):
    """Held-out loss of a checkpoint (path or state dict): cross-entropy in
    nats, per byte for the transformer, per digit for the digits models."""
    return evaluate(ckpt, meta)["loss"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 epilog="\n".join(__doc__.split("\n")[1:]),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+", metavar="CKPT.safetensors")
    ap.add_argument("--json", action="store_true", help="one JSON object per file: path, kind, loss, accuracy")
    a = ap.parse_args()
    try:
        import torch  # noqa: F401
    except ImportError as e:
        sys.exit(f"eval_checkpoint.py: {e}: install python3-torch and run with /usr/bin/python3")

    rc = 0
    for path in a.paths:
        try:
            r = evaluate(path)
        except (OSError, ValueError, KeyError, RuntimeError) as e:
            print(f"{path}: {e}", file=sys.stderr)
            rc = 1
            continue
        if a.json:
            print(json.dumps({"path": path, **r}))
        elif r["kind"] == "digits":
            print(f"{path}: held-out accuracy {r['accuracy']:.4f}, loss {r['loss']:.4f}")
        else:
            print(f"{path}: held-out loss {r['loss']:.4f}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
