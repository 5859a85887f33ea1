"""The names rckpt gives a state dict's tensors, and the constants and
helpers that the Checkpointer's save side (checkpoint.py) and restore side
(_restore.py) share: which values compress, how a nested state is walked
and filled back, the roles of an optimizer's tensors."""
import collections
import errno

import torch

from . import _lib, _plain

_NODEV = -errno.ENODEV  # rckpt_restored_read_device in a library without CUDA
_NOMEM = -errno.ENOMEM

EPS_DEFAULT = 0.0012  # RCKPT_EPS_DEFAULT (rckpt.h)

_DTYPES = {torch.float32: _lib.RCKPT_F32, torch.float16: _lib.RCKPT_F16,
           torch.bfloat16: _lib.RCKPT_BF16}
_TORCH = {v: k for k, v in _DTYPES.items()}
_OPT_PREFIX = "@optimizer/"
_FORMAT = "rckpt-python/1"       # a flat state_dict: its keys name the tensors
_FORMAT_TREE = "rckpt-python/2"  # a nested one: its tensors named by path
_TRAIN = "rckpt-train/1"          # extra of save(model=...): scheduler, state, extra
_TINY = 16                        # tensors of at most this many elements are kept exact

SaveResult = collections.namedtuple(
    "SaveResult", "step raw_bytes enc_bytes ratio nchunks is_base quality t_encode t_write t_blocked "
    "is_partial blocks blocks_saved opt_quality opt_raw_bytes opt_enc_bytes head_bytes")
StepInfo = collections.namedtuple("StepInfo", "step parent raw_bytes enc_bytes nchunks exact ranks "
                                  "opt_raw_bytes opt_enc_bytes new_layout")
Restored = collections.namedtuple("Restored", "step state_dict optimizer extra stats")


class Shard:
    """A rank's slice of a tensor in a group save (Checkpointer(group=...)):
    `tensor` holds elements [offset, offset + tensor.numel()) of a tensor
    of `global_shape`, flattened in row-major order (a ZeRO-3 or FSDP flat
    parameter's slice, a DTensor's local shard laid out so). Tensors that
    are not Shards are taken as whole on every rank (DDP)."""
    __slots__ = ("tensor", "global_shape", "offset")

    def __init__(self, tensor, global_shape, offset):
        self.tensor = tensor
        self.global_shape = tuple(int(d) for d in global_shape)
        self.offset = int(offset)

    def detach(self):
        return Shard(self.tensor.detach(), self.global_shape, self.offset)


def _compressible(v):
    if isinstance(v, Shard):
        v = v.tensor
    return (isinstance(v, torch.Tensor) and v.dtype in _DTYPES and v.numel() > 0
            and not v.is_sparse and not v.is_quantized)


def _tensor_of(v):
    return v.tensor if isinstance(v, Shard) else v


def _is_flat(sd):
    """A module's state_dict: string keys, no containers among the values."""
    return all(isinstance(k, str) for k in sd) and \
        not any(isinstance(v, (dict, list, tuple)) for v in sd.values())


def _is_optimizer_state(v):
    return isinstance(v, dict) and set(v.keys()) == {"state", "param_groups"}


def _segment(k):
    """A dict key or list index as one component of a tensor's path,
    injectively: '/' and '%' escaped, an int key (or an index) as '#N', a
    string that starts with '#' escaped, the empty string '%E'. None: a key
    of another type (the subtree then stays in the attachment)."""
    if isinstance(k, str):
        if k == "":
            return "%E"
        e = k.replace("%", "%25").replace("/", "%2F")
        return "%23" + e[1:] if e.startswith("#") else e
    if isinstance(k, int) and not isinstance(k, bool):
        return "#%d" % k
    return None


def _paths(tree, path=""):
    """(name, tensor) for every tensor of a state dict, named as a save
    names it: a flat dict's keys, a nested one's paths."""
    if not isinstance(tree, (dict, list, tuple)):
        return
    if isinstance(tree, dict) and not path and _is_flat(tree):
        for k, v in tree.items():
            if isinstance(v, torch.Tensor):
                yield k, v
        return
    items = tree.items() if isinstance(tree, dict) else enumerate(tree)
    for k, v in items:
        g = _segment(k) if isinstance(tree, dict) else "#%d" % k
        if g is None:
            continue
        p = (path + "/" if path else "") + g
        if isinstance(v, torch.Tensor):
            yield p, v
        else:
            yield from _paths(v, p)


def _role(name, key, param, pid, osd):
    """(name, role, param, eps) for an optimizer's tensor `key` of parameter
    `pid` in state_dict osd: Adam's exp_avg and SGD's momentum_buffer are
    first moments, exp_avg_sq a second (with its group's eps times
    sqrt(1 - beta2^step), Adam's bias correction), the rest other state.
    param names the pair (the prefix their paths share)."""
    if key in ("exp_avg", "momentum_buffer"):
        return (name, _lib.RCKPT_ROLE["moment1"], param, 0.0)
    if key != "exp_avg_sq":
        return (name, _lib.RCKPT_ROLE["optim"], None, 0.0)
    eps, beta2, t = 1e-8, 0.999, 0.0
    for g in osd.get("param_groups", ()):
        if pid in g.get("params", ()):
            eps = float(g.get("eps", eps))
            beta2 = float(g.get("betas", (0.9, beta2))[1])
    n = osd.get("state", {}).get(pid, {}).get("step", 0)
    t = float(n.item() if isinstance(n, torch.Tensor) else n)
    corr = (1.0 - beta2 ** t) ** 0.5 if t > 0 else 1.0
    return (name, _lib.RCKPT_ROLE["moment2"], param, eps * corr)


def _user_extra(extra):
    """The caller's extra of a step saved with save(model=...)."""
    if isinstance(extra, dict) and extra.get("format") == _TRAIN:
        return extra.get("extra")
    return extra


def _fill_tree(v, tensors):
    """The skeleton of a nested state dict with its references resolved
    (None for a tensor a partial restore left out)."""
    if isinstance(v, _plain.Ref):
        return tensors.get(v.name)
    if isinstance(v, dict):
        return type(v)((k, _fill_tree(x, tensors)) for k, x in v.items())
    if isinstance(v, list):
        return [_fill_tree(x, tensors) for x in v]
    if isinstance(v, tuple):
        return tuple(_fill_tree(x, tensors) for x in v)
    return v


def _load_tree(live, got, strict, path=""):
    """Copies restored tree `got` into `live` in place: tensors into the
    tensors that are there, containers recursively, other leaves set."""
    if isinstance(live, dict):
        items = got.items() if isinstance(got, dict) else ()
        missing = [k for k in live if not isinstance(got, dict) or k not in got]
    else:
        items = enumerate(got) if isinstance(got, (list, tuple)) else ()
        missing = [] if isinstance(got, (list, tuple)) and len(got) == len(live) else ["(length)"]
    if strict and missing:
        raise KeyError("the step lacks %s" % ", ".join("%s/%s" % (path, k) for k in missing[:5]))
    for k, v in items:
        here = "%s/%s" % (path, k)
        cur = live[k] if (isinstance(live, dict) and k in live) or \
            (not isinstance(live, dict) and k < len(live)) else None
        if isinstance(cur, torch.Tensor) and isinstance(v, torch.Tensor):
            if cur is not v:  # else read into it in place already
                with torch.no_grad():
                    cur.copy_(v)
        elif isinstance(cur, (dict, list, tuple)) and isinstance(v, type(cur)) and not \
                isinstance(cur, tuple):
            _load_tree(cur, v, strict, here)
        elif isinstance(live, dict) or isinstance(live, list):
            if v is None and cur is not None:
                continue  # left out by a partial restore
            live[k] = v
