#!/usr/bin/python3
"""eval_checkpoint.py — held-out accuracy and loss of checkpoints of the
model of make_checkpoints.py, e.g. an original beside its rckpt round trip:

    eval_checkpoint.py step-000600.safetensors decoded.safetensors

Reads safetensors with its own few lines (no safetensors package needed).
Run with Debian's /usr/bin/python3 (python3-torch, python3-sklearn).
"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_checkpoints as mc  # noqa: E402


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


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(sys.argv) >= 2 else 2
    import torch

    _, _, xt, yt = mc.digits(0)
    for path in sys.argv[1:]:
        sd = read_safetensors(path)
        net = mc.build(sd["fc1.weight"].shape[0])
        net.load_state_dict(sd)
        with torch.no_grad():
            logits = net(xt)
            acc = (logits.argmax(1) == yt).float().mean().item()
            loss = torch.nn.functional.cross_entropy(logits, yt).item()
        print(f"{path}: held-out accuracy {acc:.4f}, loss {loss:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
