"""A safe, self-describing encoding of plain data with tensors: what the
Python binding keeps in a step's attachment (optimizer state, buffers that
are not fp32/fp16/bf16, the trainer's extras). Unlike pickle, decoding runs
no code: a JSON document of dicts (any plain keys, in order), lists,
tuples, numbers, strings, booleans, None, tensors and NumPy arrays and
scalars of numeric or boolean dtypes (a data loader's or NumPy's random
state), followed by their raw bytes.

    u32 magic "RCKP" | u32 JSON length | JSON (UTF-8) | tensor bytes...
"""
import json
import struct

import torch

try:
    import numpy as np
except ImportError:  # torch works without it; then there is no array to keep
    np = None

_NP_KINDS = "biufc"  # bool, signed, unsigned, float, complex: no objects, no strings

MAGIC = b"RCKP"
_DT = {str(d).replace("torch.", ""): d for d in (
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
    torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128)}


class Ref:
    """A tensor kept outside the attachment (compressed as a tensor of the
    step), named by its path: what a nested state dict's skeleton holds."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "Ref(%r)" % (self.name,)


def dumps(obj):
    blobs = []
    pos = [0]

    def enc(v):
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, Ref):
            return {"__ref__": v.name}
        if isinstance(v, torch.Tensor):
            t = v.detach().cpu().contiguous()
            dt = str(t.dtype).replace("torch.", "")
            if dt not in _DT:
                raise TypeError("cannot keep a tensor of %s" % dt)
            b = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
            blobs.append(b)
            ref = {"__tensor__": [dt, list(t.shape), pos[0], len(b)]}
            pos[0] += len(b)
            return ref
        if np is not None and isinstance(v, (np.ndarray, np.generic)):
            a = np.array(v, order="C")  # a copy; keeps a scalar 0-d
            if a.dtype.kind not in _NP_KINDS:
                raise TypeError("cannot keep a NumPy array of %s" % a.dtype)
            b = a.tobytes()
            blobs.append(b)
            key = "__ndarray__" if isinstance(v, np.ndarray) else "__npscalar__"
            ref = {key: [a.dtype.str, list(a.shape), pos[0], len(b)]}
            pos[0] += len(b)
            return ref
        if isinstance(v, dict):
            return {"__dict__": [[enc(k), enc(x)] for k, x in v.items()]}
        if isinstance(v, tuple):
            return {"__tuple__": [enc(x) for x in v]}
        if isinstance(v, list):
            return [enc(x) for x in v]
        raise TypeError("cannot keep a %s in a checkpoint's attachment: use plain data "
                        "(dicts, lists, tuples, numbers, strings, tensors)" % type(v).__name__)

    doc = json.dumps(enc(obj), allow_nan=True, separators=(",", ":")).encode()
    return b"".join([MAGIC, struct.pack("<I", len(doc)), doc] + blobs)


def loads(raw):
    if len(raw) < 8 or raw[:4] != MAGIC:
        raise ValueError("not an rckpt attachment")
    (n,) = struct.unpack("<I", raw[4:8])
    if 8 + n > len(raw):
        raise ValueError("truncated attachment")
    base = 8 + n
    mem = memoryview(raw)

    def dec(v):
        if isinstance(v, list):
            return [dec(x) for x in v]
        if isinstance(v, dict):
            if "__dict__" in v:
                return {_key(dec(k)): dec(x) for k, x in v["__dict__"]}
            if "__tuple__" in v:
                return tuple(dec(x) for x in v["__tuple__"])
            if "__ref__" in v:
                if not isinstance(v["__ref__"], str):
                    raise ValueError("bad reference in attachment")
                return Ref(v["__ref__"])
            if "__tensor__" in v:
                dt, shape, off, ln = v["__tensor__"]
                if dt not in _DT or off < 0 or ln < 0 or base + off + ln > len(raw):
                    raise ValueError("bad tensor in attachment")
                d = _DT[dt]
                t = torch.empty(shape, dtype=d)
                if t.numel() * t.element_size() != ln:
                    raise ValueError("bad tensor size in attachment")
                if ln:
                    src = torch.frombuffer(bytearray(mem[base + off:base + off + ln]),
                                           dtype=torch.uint8)
                    t.view(-1).view(torch.uint8).copy_(src)
                return t
            for key in ("__ndarray__", "__npscalar__"):
                if key in v:
                    return _array(v[key], key == "__npscalar__", raw, base, mem)
            raise ValueError("bad object in attachment")
        return v

    return dec(json.loads(bytes(mem[8:base]).decode()))


def _key(k):
    return tuple(k) if isinstance(k, list) else k


def _array(spec, scalar, raw, base, mem):
    """A NumPy array (or scalar) of the attachment, checked before use."""
    if np is None:
        raise ValueError("the attachment holds a NumPy array, and NumPy is not installed")
    try:
        dts, shape, off, ln = spec
        dt = np.dtype(str(dts))
        shape = tuple(int(x) for x in shape)
    except (TypeError, ValueError):
        raise ValueError("bad array in attachment")
    if dt.kind not in _NP_KINDS or any(x < 0 for x in shape) or off < 0 or ln < 0 or \
            base + off + ln > len(raw):
        raise ValueError("bad array in attachment")
    count = 1
    for x in shape:
        count *= x
    if count * dt.itemsize != ln or (scalar and shape):
        raise ValueError("bad array size in attachment")
    a = np.frombuffer(bytes(mem[base + off:base + off + ln]), dtype=dt).reshape(shape).copy()
    return a[()] if scalar else a
