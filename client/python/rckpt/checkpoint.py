"""Checkpoints of PyTorch models in rckpt (librckpt through ctypes).

A Checkpointer is one training job's checkpoints in a Ceph pool: save()
compresses a state_dict into it (the Inshrinkerator pipeline of librckpt),
restore() brings one back; load_latest() resumes a trainer in one call.
See docs/python.md.
"""
import collections
import ctypes
import errno
import sys
import threading
import time

import torch

from . import _lib, _plain
from ._lib import RckptError, check, lib

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
    "is_partial blocks blocks_saved opt_quality opt_raw_bytes opt_enc_bytes")
StepInfo = collections.namedtuple("StepInfo", "step parent raw_bytes enc_bytes nchunks exact ranks "
                                  "opt_raw_bytes opt_enc_bytes")
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


class GradientEMA:
    """The gradient statistics the compressor weighs values by: per
    parameter, the root mean square of its recent mini-batch gradients,
    sqrt(EMA of grad**2), a diagonal Fisher estimate. The compressor's
    quality measure weighs each value's error by its square (a second-order
    estimate of the loss the error costs) and ranks values by |w| * rms for
    pruning and protection.

    Hooks on every parameter fold each backward's gradient in while
    `enabled` is true: s <- beta*s + (1-beta)*grad**2. Enable it for the
    last few batches before a checkpoint (window) so it costs nothing the
    rest of the time; track(step, every, window) does that from a step
    counter. Pass the object itself as save(..., grads=ema).

    A trainer using Adam or AdamW needs none: save(..., optimizer=opt)
    takes the same statistics from the optimizer's exp_avg_sq."""

    def __init__(self, module, beta=0.9):
        if not 0 <= beta < 1:
            raise ValueError("beta must be in [0, 1)")
        self.beta = beta
        self.enabled = False
        self._ema = {}
        self._handles = []
        for name, p in module.named_parameters():
            if p.requires_grad and p.dtype in _DTYPES:
                self._handles.append(p.register_hook(self._fold(name)))

    def _fold(self, name):
        def hook(grad):
            if self.enabled:
                g = grad.detach().float()
                e = self._ema.get(name)
                if e is None or e.shape != g.shape or e.device != g.device:
                    self._ema[name] = g * g
                else:
                    e.mul_(self.beta).addcmul_(g, g, value=1 - self.beta)
            return None
        return hook

    def track(self, step, every, window=8):
        """Enables the EMA for the `window` steps before each multiple of
        `every` (the steps whose gradients a save at that multiple uses)."""
        self.enabled = (step % every) >= every - window or (step % every) == 0
        return self.enabled

    def state(self):
        """name -> fp32 gradient RMS tensor, for the parameters that have one."""
        return {k: v.sqrt() for k, v in self._ema.items()}

    def remove(self):
        for h in self._handles:
            h.remove()
        self._handles = []


class SaveHandle:
    """A save in flight. wait() returns its SaveResult once the step is
    committed, or raises the RckptError that stopped it."""

    def __init__(self, step, on_done=None):
        self.step = step
        self._done = threading.Event()
        self._result = None
        self._error = None
        self._reported = False  # its error reached the trainer
        self._on_done = on_done

    def _finish(self, result=None, error=None):
        if error is not None and not str(error).startswith("save of step"):
            error = _step_error(self.step, error)
        self._result, self._error = result, error
        if self._on_done is not None:  # before done: close() waits for it
            try:
                self._on_done(self.step, result, error)
            except Exception as e:  # the trainer's callback must not lose the save's outcome
                print("rckpt: the progress callback raised: %r" % (e,), file=sys.stderr)
        self._done.set()

    def done(self):
        return self._done.is_set()

    def wait(self, timeout=None):
        if not self._done.wait(timeout):
            raise TimeoutError("save of step %d still in flight" % self.step)
        if self._error is not None:
            self._reported = True
            raise self._error
        return self._result


def _step_error(step, e):
    """e, as the error of step's save: the same type, its message naming
    the step (the original kept as the cause)."""
    msg = "save of step %d failed: %s" % (step, e)
    if isinstance(e, RckptError):
        out = RckptError(e.code, msg)
    else:
        try:
            out = type(e)(msg)
        except Exception:
            out = RuntimeError(msg)
    out.__cause__ = e
    return out


class Checkpointer:
    """One job's checkpoints in a pool.

    pool, job: where (job: 1..63 of [A-Za-z0-9._-], one RADOS namespace).
    conf, user: the ceph.conf and cephx user (None: $CEPH_CONF, "admin").
    eps: the compressor's quality threshold: the Fisher-weighted relative
      error of the compressed tensors (None: the library's default, 0.0012,
      calibrated so that no model of its suite lost more than 1% held-out
      loss; see docs/compression.md, "What eps means").
    quality: optional fn(state_dict) -> loss, the trainer's judgement of the
      configuration a save chose: the dequantized model's float tensors (views
      valid during the call only); while loss > quality_eps the compressor
      steps less aggressive (the Inshrinkerator method).
    optimizer_state: "quantize" (default: its float tensors are compressed
      as the optimizer's state, apart from the model: Adam's exp_avg as the
      update exp_avg / (sqrt(exp_avg_sq) + eps) itself, exp_avg_sq in the
      log domain, judged by the error of the update the restored optimizer
      takes, at most opt_eps) or "lossless" (kept exactly, zstd, in the
      step's attachment). Integer state (a step count) is kept exactly
      either way. Group saves compress it as model tensors for now.
    opt_eps: the update error's threshold (None: the library's default,
      RCKPT_OPT_EPS_DEFAULT; see docs/compression.md, "Adam's state").
    snapshot: True (default): save() copies the tensors (the copy is all
      the trainer waits for: less than torch.save to a local file) and
      everything else runs in a background thread. The copies are kept
      between saves, reused: one more copy of the compressed tensors (the
      model's, and Adam's moments when the optimizer is saved: 3x the
      parameters for Adam), in host memory (pinned for CUDA tensors).
      "device": CUDA tensors are copied on their device instead, and
      encoded there when the library has CUDA (that much device memory).
      False: save() reads the tensors in place and returns once they are
      encoded (the trainer may then change them), no copy; the writes and
      the commit finish in the background.
    writer: False opens read-only (restore, steps).
    compute: "auto", "cpu" or "gpu" (librckpt's RCKPT_COMPUTE).
    threads: threads a save runs on (the search's evaluations, then the
      chunks' quantization and encoding; 0, the default: the machine's
      cores, at most 8; 1: one). The bytes saved are the same whatever the
      count.
    partial_block: elements per block of partial saves (save(partial=...));
      0 (default) takes none. The writer then keeps every compressed value
      as last saved, 4 bytes per parameter, to rank blocks.
    segment_bytes: a chunk's log goes on in a new object before one passes
      this (0: 64 MiB, or half the OSDs' osd_max_object_size when less).
    lossless: True stores every save bit-exact (the exact tier: the lossy
      records plus the bits quantization changed, in zstd-coded byte
      planes; restores match the source's SHA-256); save(lossless=...)
      decides per save. eps=0 does not mean exact: it is refused. A list
      of tensor names, or a function (name, tensor) -> bool, keeps those
      tensors exact in every save (in the step's attachment, zstd) and
      compresses the rest. Whatever the setting, tensors the compressor
      cannot quantize are kept exact the same way: integer and boolean
      ones, those of at most 16 elements, and those holding +-Inf at
      their first save (a causal mask of -inf). A tensor holding NaN fails
      the save (a diverged model), unless lossless names it.
    takeover: what opening does when another writer holds the job's lock.
      "auto" (default): take over at once when that writer was a process
      of this machine that has exited (a restart after a crash); True: at
      once whoever holds it (a restart on another node); False: never.
      Otherwise wait up to wait_s seconds for it (one line on stderr says
      whom it waits for), then raise RckptError (EBUSY). Taking over is
      safe: the old writer's requests are fenced (formats/store.md,
      "Takeover").
    progress: optional fn(step, result, error), called once per save as it
      ends, on the thread that finished it: result a SaveResult when the
      step is committed (error None), else None and the error (which still
      raises as below), before the save counts as done (close() waits for
      it; it must not wait on a save itself). For a log of a long run.
    Errors: a save that fails raises (naming its step) at the next save(),
      wait(), close() or context exit, whichever comes first, unless its
      handle's wait() raised it already; close() never returns normally
      over a failed save.
    group: a torch.distributed process group (True: the default group):
      every rank of it opens the job and calls save() together; each hands
      its tensors (whole, as under DDP) or its Shards (ZeRO-3, FSDP), and
      each chunk of the model is encoded and written by one rank, in
      parallel; rank 0 commits once every rank's part is written, and a
      failure on any rank fails the step on all. Restores work on any
      number of processes (restore_slice: a rank's own slice). Group
      saves are synchronous; rank 0's non-tensor leaves are the step's
      attachment; lossless=True works as alone (every rank's chunks
      exact); no partial saves or gradient weighting yet.
    """

    def __init__(self, pool="rckpt", job=None, conf=None, user=None, eps=None, *,
                 quality=None, quality_eps=0.01, optimizer_state="quantize", opt_eps=None,
                 snapshot=True, writer=True, chunk_params=0, base_every=0,
                 compute="auto", timeout_s=0, partial_block=0, segment_bytes=0,
                 lossless=False, group=None, threads=0, takeover="auto", wait_s=0,
                 progress=None):
        if not job:
            raise ValueError("job is required")
        if takeover not in ("auto", True, False):
            raise ValueError("takeover must be 'auto', True or False")
        if snapshot not in (True, False, "device"):
            raise ValueError("snapshot must be True, False or 'device'")
        if not wait_s >= 0:
            raise ValueError("wait_s must be >= 0")
        if optimizer_state not in ("lossless", "quantize"):
            raise ValueError("optimizer_state must be 'lossless' or 'quantize'")
        if compute not in _lib.RCKPT_COMPUTE:
            raise ValueError("compute must be auto, cpu or gpu")
        self.job = job
        self._writer = bool(writer)
        self._progress = progress
        self.optimizer_state = optimizer_state
        self.snapshot = snapshot
        self._keep = None  # tensors kept exact: a name set or a predicate
        if callable(lossless):
            self._keep, lossless = lossless, False
        elif isinstance(lossless, (list, tuple, set, frozenset)):
            names = frozenset(lossless)
            self._keep, lossless = (lambda name, t: name in names), False
        self.lossless = bool(lossless)
        self._exact_names = {}            # name -> kept exact (decided at its first save)
        self._failed = []                 # SaveHandles whose error no one has seen
        self._lock = threading.Lock()     # one C call on the handle at a time
        self._pending = None              # the SaveHandle in flight
        self._quality_fn = quality
        self._quality_error = None
        self._snap = {}                   # snapshot buffers, reused
        gi = _lib.gpu_info()
        self._gpu = bool(gi.built_with_cuda and gi.device_count > 0)
        self._h = _lib.connect(conf, user, pool, timeout_s)
        self._j = _lib.c_voidp()
        o = _lib.JobOpts()
        o.version = 1  # RCKPT_JOB_OPTS_VERSION
        o.takeover = _lib.RCKPT_TAKEOVER[takeover]
        o.threads = threads
        o.opt_eps = 0.0 if opt_eps is None else opt_eps
        o.exact = 1 if lossless else 0
        o.partial_block = partial_block
        o.segment_bytes = segment_bytes
        o.writer = 1 if writer else 0
        o.eps = EPS_DEFAULT if eps is None else eps
        o.chunk_params = chunk_params
        o.base_every = base_every
        o.compute = _lib.RCKPT_COMPUTE[compute]
        o.quality_eps = quality_eps
        if quality is not None:
            self._cb = _lib.QUALITY_CB(self._quality)  # kept alive with self
            o.quality = self._cb
        self._g = None
        rc = 0
        if group is not None:
            from .pcr import _TorchTransport
            if partial_block:
                raise ValueError("group saves are not partial yet")
            self._tr = _TorchTransport(None if group is True else group)
            self._g = _lib.c_voidp()
            rc = lib.rckpt_group_open(self._h, ctypes.byref(self._g), job.encode(), ctypes.byref(o),
                                      ctypes.byref(self._tr.c))
            if rc < 0 and self._tr.error is not None:
                lib.rckpt_destroy(self._h)
                self._h = None
                raise self._tr.error
            if rc >= 0:  # restores and steps go through a reader of its own
                o.writer = 0
        if rc >= 0:
            rc = lib.rckpt_job_open(self._h, ctypes.byref(self._j), job.encode(), ctypes.byref(o))
            if rc == -errno.EBUSY and wait_s > 0:
                # one line saying whom it waits for, then the library polls
                first = lib.rckpt_errmsg(self._h).decode(errors="replace")
                print("rckpt: waiting up to %g s for the writer lock: %s" % (wait_s, first),
                      file=sys.stderr, flush=True)
                o.wait_s = int(wait_s + 0.999)
                rc = lib.rckpt_job_open(self._h, ctypes.byref(self._j), job.encode(),
                                        ctypes.byref(o))
        if rc < 0:
            if self._g:
                lib.rckpt_group_close(self._g)
                self._g = None
            msg = lib.rckpt_errmsg(self._h).decode(errors="replace")
            lib.rckpt_destroy(self._h)
            self._h = None
            raise RckptError(rc, msg)
        _lib.track(self)

    # ---- context and lifetime ----

    def __enter__(self):
        return self

    def __exit__(self, etype, e, tb):
        try:
            self.close()
        except Exception as failed:
            if e is None:
                raise
            # the body's exception goes on; the failed save rides with it
            if hasattr(e, "add_note"):
                e.add_note("and: %s" % failed)
            else:  # before Python 3.11: said, not lost
                print("rckpt: also, %s" % failed, file=sys.stderr)

    def _track(self, handle):
        """Keeps a failed save's handle until its error is seen."""
        if handle._error is not None and not handle._reported:
            self._failed.append(handle)

    def _raise_failed(self):
        """Raises the first failed save whose error no one has seen."""
        failed = [h for h in self._failed if not h._reported]
        self._failed = []
        if not failed:
            return
        for h in failed:
            h._reported = True
        e = failed[0]._error
        if len(failed) > 1:
            e.args = e.args[:-1] + ("%s (and %d more failed saves: steps %s)" % (
                e.args[-1], len(failed) - 1, ", ".join(str(h.step) for h in failed[1:])),)
        raise e

    def wait(self):
        """Waits for the save in flight; raises the error of any failed save
        not yet seen (naming its step)."""
        if self._pending is not None:
            self._pending._done.wait()
            self._track(self._pending)
            self._pending = None
        self._raise_failed()

    def close(self):
        """Waits for a save in flight, releases the job, and then raises
        the error of any failed save not yet seen: close() never returns
        normally over a lost step."""
        if self._h is None:
            return
        if not _lib.owner(self):  # a forked child: the parent's, not to touch
            self._h = self._g = self._pending = None
            return
        if self._pending is not None:
            self._pending._done.wait()
            self._track(self._pending)
            self._pending = None
        with self._lock:
            if self._g:
                lib.rckpt_group_close(self._g)
                self._g = None
            lib.rckpt_job_close(self._j)
            lib.rckpt_destroy(self._h)
            self._h = None
        self._raise_failed()

    def release(self):
        """Drops the writer lock at once, also while a save runs (for a
        process about to exit on a signal: its successor need not take
        over). Only close() after."""
        if self._h is not None and _lib.owner(self):
            lib.rckpt_job_release(self._j)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    @staticmethod
    def delete(pool="rckpt", job=None, conf=None, user=None):
        """Deletes a job and every object in it (-ENOENT is not an error)."""
        h = _lib.connect(conf, user, pool)
        try:
            rc = lib.rckpt_job_delete(h, job.encode())
            if rc < 0 and rc != -2:
                check(rc, h)
        finally:
            lib.rckpt_destroy(h)

    # ---- save ----

    def _quality(self, arg, tp, n, loss):
        try:
            sd = collections.OrderedDict()
            for i in range(n):
                t = tp[i]
                name = t.name.decode()
                if name.startswith(_OPT_PREFIX):
                    continue
                shape = tuple(t.shape[d] for d in range(t.ndim))
                count = 1
                for d in shape:
                    count *= d
                buf = (ctypes.c_float * count).from_address(t.data)
                sd[name] = torch.frombuffer(buf, dtype=torch.float32).view(shape)
            value = float(self._quality_fn(sd))
            if value != value:
                raise ValueError("the quality function returned NaN")
            loss[0] = value
            return 0
        except BaseException as e:  # an exception must not cross into C
            self._quality_error = e
            return -125  # -ECANCELED

    def _describe(self, tensors, keep, host=False):
        """rckpt_tensor_t[] over tensors (name -> tensor); keep holds what
        must live as long as the C call (names, contiguous copies). host:
        device tensors are copied to the host."""
        arr = (_lib.Tensor * max(len(tensors), 1))()
        for i, (name, t) in enumerate(tensors.items()):
            if t.is_cuda and (host or not self._gpu):
                t = t.detach().cpu()  # this library cannot read device memory
            if not t.is_contiguous():
                t = t.contiguous()
            b = name.encode()
            keep.append(t)
            keep.append(b)
            arr[i].name = b
            arr[i].dtype = _DTYPES[t.dtype]
            arr[i].ndim = t.dim()
            for d, s in enumerate(t.shape):
                arr[i].shape[d] = s
            arr[i].data = t.data_ptr()
        return arr

    def _split(self, state_dict, optimizer, extra):
        """The tensors the compressor takes, and the attachment's bytes."""
        if not isinstance(state_dict, dict):
            raise TypeError("state_dict must be a dict (a module's state_dict, or nested "
                            "dicts, lists and tuples)")
        if not _is_flat(state_dict):
            return self._split_tree(state_dict, optimizer, extra)
        comp = collections.OrderedDict()
        other = collections.OrderedDict()
        for k, v in state_dict.items():
            if isinstance(v, Shard) and v.tensor.numel() == 0:
                continue  # this rank holds none of it
            if _compressible(v) and _tensor_of(v).dim() <= _lib.RCKPT_MAX_DIMS and \
                    not self._exact(k, v):
                comp[k] = v.detach()
            else:
                other[k] = v
        osd, qopt, roles = None, [], []
        if optimizer is not None:
            osd = optimizer.state_dict() if hasattr(optimizer, "state_dict") else optimizer
            if self.optimizer_state == "quantize":
                state = {}
                for pid, st in osd["state"].items():
                    state[pid] = {}
                    for key, v in st.items():
                        if _compressible(v) and v.numel() > 1 and v.dim() <= _lib.RCKPT_MAX_DIMS:
                            name = "%s%s/%s" % (_OPT_PREFIX, pid, key)
                            comp[name] = v.detach()
                            qopt.append((pid, key, name, str(v.dtype).replace("torch.", "")))
                            roles.append(_role(name, key, "%s%s" % (_OPT_PREFIX, pid), pid, osd))
                            state[pid][key] = None
                        else:
                            state[pid][key] = v
                osd = {"state": state, "param_groups": osd["param_groups"]}
        meta = {"format": _FORMAT, "keys": list(state_dict.keys()), "other": other,
                "optimizer": osd, "quantized_optimizer": qopt, "extra": extra}
        return comp, _plain.dumps(meta), roles

    def _split_tree(self, tree, optimizer, extra):
        """A nested state dict ({"model": ..., "optim": ..., "epoch": 3}):
        every float tensor goes to the compressor under its path
        ("model/fc1.weight", "optim/state/#0/exp_avg"); the skeleton, with
        references in their place, and every other leaf go to the
        attachment. An optimizer's state_dict found in the tree follows
        optimizer_state: kept whole (lossless) or its tensors compressed."""
        comp = collections.OrderedDict()
        roles = []

        def walk(v, path, in_opt, osd=None):
            if isinstance(v, Shard) and v.tensor.numel() == 0:
                return None  # this rank holds none of it
            if _compressible(v) and _tensor_of(v).dim() <= _lib.RCKPT_MAX_DIMS and path and \
                    (not in_opt or _tensor_of(v).numel() > 1) and (in_opt or not self._exact(path, v)):
                if path in comp:
                    raise ValueError("two tensors would be saved as %r" % path)
                comp[path] = v.detach()
                if in_opt and osd is not None:  # .../state/#PID/KEY
                    parent, _, key = path.rpartition("/")
                    pid = parent.rpartition("/")[2]
                    pid = int(pid[1:]) if pid.startswith("#") and pid[1:].isdigit() else pid
                    roles.append(_role(path, key, parent, pid, osd))
                return _plain.Ref(path)
            if _is_optimizer_state(v) and self.optimizer_state == "lossless":
                return v
            if isinstance(v, dict):
                segs = [_segment(k) for k in v]
                if any(g is None for g in segs):
                    return v  # keys the paths cannot name: kept as they are
                opt = in_opt or _is_optimizer_state(v)
                if _is_optimizer_state(v):
                    osd = v
                return type(v)((k, walk(x, (path + "/" if path else "") + g, opt, osd))
                               for (k, x), g in zip(v.items(), segs))
            if isinstance(v, (list, tuple)):
                out = [walk(x, (path + "/" if path else "") + "#%d" % i, in_opt, osd)
                       for i, x in enumerate(v)]
                return out if isinstance(v, list) else tuple(out)
            return v

        skeleton = walk(tree, "", False)
        osd = None
        if optimizer is not None:
            osd = optimizer.state_dict() if hasattr(optimizer, "state_dict") else optimizer
            if self.optimizer_state == "quantize":
                osd = walk(osd, _OPT_PREFIX.rstrip("/"), True, osd)
        meta = {"format": _FORMAT_TREE, "tree": skeleton, "optimizer": osd, "extra": extra}
        return comp, _plain.dumps(meta), roles

    def _exact(self, name, v):
        """Whether float tensor v, saved as `name`, is kept exact in the
        attachment: the trainer said so (lossless=), or it held +-Inf at
        its first save (decided once, so the compressed set stays the same
        from save to save; a NaN, or an Inf that appears later, fails the
        save in the library, naming the tensor)."""
        if isinstance(v, Shard):
            return False  # a group's slices go through the compressor
        if self._keep is not None and self._keep(name, v):
            return True
        got = self._exact_names.get(name)
        if got is None:
            got = bool(torch.isinf(v).any())
            self._exact_names[name] = got
        return got

    @staticmethod
    def _adam_rms(optimizer, comp):
        """name -> gradient RMS from an Adam-style optimizer's exp_avg_sq
        (bias-corrected), for the tensors of comp that are its parameters
        (matched by storage: a module's state_dict shares its parameters')."""
        out = collections.OrderedDict()
        if not hasattr(optimizer, "param_groups") or not hasattr(optimizer, "state"):
            return out
        by_ptr = {(t.data_ptr(), tuple(t.shape)): k for k, t in comp.items()}
        for group in optimizer.param_groups:
            beta2 = group.get("betas", (0.9, 0.999))[1]
            for p in group["params"]:
                st = optimizer.state.get(p, {})
                v, k = st.get("exp_avg_sq"), by_ptr.get((p.data_ptr(), tuple(p.shape)))
                if k is None or not isinstance(v, torch.Tensor) or v.shape != p.shape:
                    continue
                n = st.get("step", 0)
                n = float(n.item() if isinstance(n, torch.Tensor) else n)
                corr = 1.0 - beta2 ** n if n > 0 else 1.0
                out[k] = (v.detach().float() / corr).sqrt()
        return out

    def _grads(self, grads, comp, optimizer=None):
        if grads is None:
            return self._adam_rms(optimizer, comp) if optimizer is not None else {}
        if isinstance(grads, GradientEMA):
            grads = grads.state()
        out = collections.OrderedDict()
        for k, g in grads.items():
            if k in comp and isinstance(g, torch.Tensor) and g.shape == comp[k].shape:
                out[k] = g.detach().float()
        return out

    def _snapshot(self, tensors, kind):
        """Copies of tensors in buffers kept across saves (kind: which set)."""
        out = collections.OrderedDict()
        for k, t in tensors.items():
            # "device": CUDA tensors copied on their device (a GPU encode,
            # the device's memory); else into pinned host memory
            dev = t.device if (t.is_cuda and self._gpu and self.snapshot == "device") \
                else torch.device("cpu")
            b = self._snap.get((kind, k))
            if b is None or b.shape != t.shape or b.dtype != t.dtype or b.device != dev:
                b = torch.empty(t.shape, dtype=t.dtype, device=dev,
                                pin_memory=(t.is_cuda and dev.type == "cpu"))
                self._snap[(kind, k)] = b
            b.copy_(t, non_blocking=True)
            out[k] = b
        if any(t.is_cuda for t in tensors.values()):
            torch.cuda.synchronize()
        return out

    def save(self, step, state_dict=None, grads=None, optimizer=None, extra=None, partial=None,
             select="priority", seed=0, lossless=None, *, model=None, scheduler=None, state=None):
        """Saves state_dict as `step` (steps grow) and returns a SaveHandle.

        model, scheduler, state: a trainer's whole state in one call, what
        load_latest() puts back: model (a module, or its state_dict) in
        place of state_dict, the LR scheduler's state_dict, and `state`, a
        dict of plain values and tensors (epoch, RNG state, ...).

        partial: a fraction in (0, 1]: a prioritized partial save (SCAR)
        that stores only that fraction of the compressed tensors' blocks,
        picked by `select` ("priority": those that moved most since they
        were last saved; "round_robin"; "random", seeded by (seed, step));
        every other value stays as last saved, and the step restores that
        running checkpoint. Needs partial_block; a writer's first save is
        full instead (the result's is_partial says which).

        Float tensors (fp32, fp16, bf16; CPU or CUDA) are compressed; the
        rest of the state_dict, the optimizer's state (see optimizer_state)
        and `extra` (plain data: dicts, lists, numbers, strings, tensors)
        are kept exactly in the step's attachment. grads: a GradientEMA or
        name -> gradient RMS tensor (sqrt of a moving average of grad**2);
        None with an Adam-style optimizer: its exp_avg_sq stands in. One
        save is in flight at a time: a second waits for the first.

        lossless: True stores this step bit-exact (a milestone; see the
        class's lossless), False lossy, None as the checkpointer says. The
        lossy saves after an exact one are deltas on it."""
        if self._h is None:
            raise ValueError("the checkpointer is closed")
        if not self._writer:  # at once, whatever the mode
            raise RckptError(-errno.EPERM, "save: job %s was opened read-only (writer=False)" % self.job)
        if model is not None:
            if state_dict is not None:
                raise ValueError("pass a state_dict or model=, not both")
            state_dict = model.state_dict() if isinstance(model, torch.nn.Module) else model
        if state_dict is None:
            raise TypeError("save() needs a state_dict (or model=)")
        if model is not None or scheduler is not None or state is not None:
            if state is not None and not isinstance(state, dict):
                raise TypeError("state must be a dict")
            extra = {"format": _TRAIN, "extra": extra, "state": state,
                     "scheduler": scheduler.state_dict() if scheduler is not None else None}
        if self._pending is not None:  # its error, if any, comes out here
            self._pending._done.wait()
            self._track(self._pending)
            self._pending = None
        self._raise_failed()
        exact = self.lossless if lossless is None else bool(lossless)
        if exact and partial is not None:
            raise ValueError("a lossless save stores the whole step: not a partial one")
        if self._g:
            if partial is not None:
                raise ValueError("group saves are not partial yet")
            try:
                return self._group_save(step, state_dict, optimizer, extra, exact)
            except (RckptError, RuntimeError) as e:
                err = _step_error(step, e)
                if self._progress is not None:
                    self._progress(step, None, err)
                raise err from e
        part = None
        if partial is not None:
            if select not in _lib.RCKPT_SELECT:
                raise ValueError("select must be priority, round_robin or random")
            part = _lib.Partial(float(partial), _lib.RCKPT_SELECT[select], seed)
        t0 = time.perf_counter()
        if self._pending is not None:
            self._pending._done.wait()  # back-pressure; its result stays in its handle
        comp, blob, roles = self._split(state_dict, optimizer, extra)
        g = self._grads(grads, comp, optimizer)
        handle = SaveHandle(step, self._progress)
        if self.snapshot:
            comp = self._snapshot(comp, "w")
            g = self._snapshot(g, "g")
            th = threading.Thread(target=self._run_save,
                                  args=(handle, step, comp, g, blob, t0, part, exact, roles),
                                  daemon=True)
            self._pending = handle
            handle.t_blocked = time.perf_counter() - t0  # before the thread reads it
            th.start()
            return handle
        try:
            s = self._encode(step, comp, g, blob, part, exact, roles)  # the tensors are free after
        except (RckptError, RuntimeError) as e:
            err = _step_error(step, e)
            if self._progress is not None:
                self._progress(step, None, err)
            raise err from e
        blocked = time.perf_counter() - t0
        self._pending = handle
        threading.Thread(target=self._finish_save, args=(handle, s, blocked), daemon=True).start()
        handle.t_blocked = blocked
        return handle

    def _group_save(self, step, state_dict, optimizer, extra, exact=False):
        """A group save: every rank's tensors and Shards, collectively."""
        t0 = time.perf_counter()
        comp, blob, _ = self._split(state_dict, optimizer, extra)  # no roles in groups yet
        keep = []
        arr = (_lib.Shard * max(len(comp), 1))()
        for i, (name, v) in enumerate(comp.items()):
            sh = v if isinstance(v, Shard) else Shard(v, v.shape, 0)
            t = sh.tensor.detach()
            if t.is_cuda:
                t = t.cpu()
            t = t.contiguous()
            b = name.encode()
            keep += [t, b]
            arr[i].name = b
            arr[i].dtype = _DTYPES[t.dtype]
            arr[i].ndim = len(sh.global_shape)
            for d, n in enumerate(sh.global_shape):
                arr[i].shape[d] = n
            arr[i].offset = sh.offset
            arr[i].count = t.numel()
            arr[i].data = t.data_ptr()
        st = _lib.SaveStats()
        with self._lock:
            rc = lib.rckpt_group_set_exact(self._g, 1 if exact else 0)
            if rc >= 0:
                rc = lib.rckpt_group_attach(self._g, blob, len(blob))
            if rc >= 0:
                rc = lib.rckpt_group_save(self._g, step, arr, len(comp), ctypes.byref(st))
            msg = lib.rckpt_errmsg(self._h).decode(errors="replace") if rc < 0 else ""
        if rc < 0:
            if self._tr.error is not None:
                raise RckptError(rc, "%s (the process group: %s)" % (msg, self._tr.error))
            raise RckptError(rc, msg)
        blocked = time.perf_counter() - t0
        ratio = st.raw_bytes / st.enc_bytes if st.enc_bytes else float("inf")
        h = SaveHandle(step, self._progress)
        h._finish(SaveResult(step, st.raw_bytes, st.enc_bytes, ratio, st.nchunks, False, 0.0,
                             st.t_encode, 0.0, blocked, False, 0, 0, 0.0, 0, 0))
        h.t_blocked = blocked
        return h

    def restore_slice(self, name, offset, count, step=None):
        """Elements [offset, offset + count) of tensor `name` of a committed
        step (None: the latest), flattened, as a 1-D tensor of its dtype:
        a rank's own slice on any number of ranks. Reads only the chunks
        that hold it."""
        b = name.encode()
        arr = (_lib.Range * 1)(_lib.Range(b, offset, count))
        r = _lib.c_voidp()
        st = _lib.RCKPT_LATEST if step is None else step
        with self._lock:
            check(lib.rckpt_job_restore_ranges(self._j, st, arr, 1, ctypes.byref(r), None), self._h)
        try:
            i = check(lib.rckpt_restored_find(r, b), None, "the step lacks %s" % name)
            d = _lib.Tensor()
            check(lib.rckpt_restored_tensor(r, i, ctypes.byref(d)), None)
            out = torch.empty(count, dtype=_TORCH[d.dtype])
            check(lib.rckpt_restored_read_range(r, i, offset, count, ctypes.c_void_p(out.data_ptr())),
                  None, "cannot read %s" % name)
        finally:
            lib.rckpt_restored_free(r)
        return out

    def _encode(self, step, comp, g, blob, part=None, exact=False, roles=()):
        keep = []
        ra = (_lib.TensorRole * max(len(roles), 1))()
        for i, (name, role, param, eps) in enumerate(roles):
            b, pb = name.encode(), param.encode() if param is not None else None
            keep += [b, pb]
            ra[i].name, ra[i].role, ra[i].param, ra[i].eps = b, role, pb, eps
        host = exact  # exact saves read host memory; partial ones read the device too
        t = self._describe(comp, keep, host=host)
        gt = self._describe(g, keep, host=host) if g else None
        if not host and self._gpu:
            # the library reads device memory on a stream of its own: what
            # PyTorch has queued to write these tensors must be done first
            for dev in {v.device for v in list(comp.values()) + list((g or {}).values()) if v.is_cuda}:
                torch.cuda.current_stream(dev).synchronize()
        s = _lib.c_voidp()
        self._quality_error = None
        with self._lock:
            rc = lib.rckpt_job_set_exact(self._j, 1 if exact else 0)
            if rc >= 0:
                rc = lib.rckpt_job_set_roles(self._j, ra, len(roles))
            if rc >= 0:
                rc = lib.rckpt_job_attach(self._j, blob, len(blob))
            if rc >= 0 and part is not None:
                rc = lib.rckpt_job_save_partial_async(self._j, step, t, len(comp), gt, len(g),
                                                      ctypes.byref(part), ctypes.byref(s))
            elif rc >= 0:
                rc = lib.rckpt_job_save_async(self._j, step, t, len(comp), gt, len(g),
                                              ctypes.byref(s))
            msg = lib.rckpt_errmsg(self._h).decode(errors="replace") if rc < 0 else ""
        if rc == -errno.EDOM:
            msg += "; Checkpointer(lossless=[name]) keeps a tensor exact as it is"
        if rc < 0:
            if self._quality_error is not None:
                raise RuntimeError("the quality function raised: %r" % (self._quality_error,)) \
                    from self._quality_error
            raise RckptError(rc, msg)
        return s

    def _finish_save(self, handle, s, blocked):
        try:
            self._finish_save1(handle, s, blocked)
        finally:
            if not handle.done():  # never leave a waiter hanging
                handle._finish(error=RuntimeError("save of step %d ended without a result" % handle.step))

    def _finish_save1(self, handle, s, blocked):
        st = _lib.SaveStats()
        with self._lock:
            rc = lib.rckpt_save_wait(s, ctypes.byref(st))
            msg = lib.rckpt_errmsg(self._h).decode(errors="replace") if rc < 0 else ""
        if rc < 0:
            handle._finish(error=RckptError(rc, msg))
            return
        ratio = st.raw_bytes / st.enc_bytes if st.enc_bytes else float("inf")
        handle._finish(SaveResult(handle.step, st.raw_bytes, st.enc_bytes, ratio, st.nchunks,
                                  bool(st.is_base), st.quality, st.t_encode, st.t_write, blocked,
                                  bool(st.is_partial), st.blocks, st.blocks_saved, st.opt_quality,
                                  st.opt_raw_bytes, st.opt_enc_bytes))

    def _run_save(self, handle, step, comp, g, blob, t0, part=None, exact=False, roles=()):
        try:
            s = self._encode(step, comp, g, blob, part, exact, roles)
        except BaseException as e:
            handle._finish(error=e)
            return
        self._finish_save(handle, s, handle.t_blocked)

    # ---- restore ----

    def _restore(self, step, names, device, into=None):
        r = _lib.c_voidp()
        rs = _lib.RestoreStats()
        st = _lib.RCKPT_LATEST if step is None else step
        if names:
            arr = (ctypes.c_char_p * len(names))(*[n.encode() for n in names])
        else:
            arr = None
        with self._lock:
            rc = lib.rckpt_job_restore_tensors(self._j, st, arr, len(names or ()),
                                               ctypes.byref(r), ctypes.byref(rs))
            check(rc, self._h)
        try:
            tensors = {}
            device_reads = [True]
            for i in range(lib.rckpt_restored_count(r)):
                d = _lib.Tensor()
                check(lib.rckpt_restored_tensor(r, i, ctypes.byref(d)), None)
                name = d.name.decode()
                shape = tuple(d.shape[k] for k in range(d.ndim))
                live = into.get(name) if into else None
                fits = (isinstance(live, torch.Tensor) and live.is_contiguous()
                        and live.dtype == _TORCH[d.dtype] and tuple(live.shape) == shape)
                rc = _NODEV
                if fits and live.is_cuda and device_reads[0]:
                    # dequantized on the device, straight into the live
                    # tensor: no fp32 copy of it in host memory
                    torch.cuda.current_stream(live.device).synchronize()
                    out = live
                    rc = lib.rckpt_restored_read_device(r, i, ctypes.c_void_p(out.data_ptr()),
                                                        out.numel() * out.element_size())
                    if rc == _NODEV:  # this library has no CUDA: read on the host
                        device_reads[0] = False
                    elif rc == _NOMEM:  # no room on the device for the levels: on the host
                        rc = _NODEV
                if rc == _NODEV:
                    if fits and not live.is_cuda:
                        out = live  # read in place: no second copy of the model
                    else:
                        out = torch.empty(shape, dtype=_TORCH[d.dtype])
                    rc = lib.rckpt_restored_read(r, i, ctypes.c_void_p(out.data_ptr()),
                                                 out.numel() * out.element_size())
                if rc == -2:  # left out by a partial restore
                    continue
                check(rc, None, "cannot read tensor %s" % name)
                tensors[name] = out.to(device) if device is not None else out
            p = _lib.c_voidp()
            n = _lib.c_size()
            meta = None
            if lib.rckpt_restored_attachment(r, ctypes.byref(p), ctypes.byref(n)) == 0:
                raw = ctypes.string_at(p, n.value)
                meta = _plain.loads(raw)
            step_got = lib.rckpt_restored_step(r)
            exact = bool(lib.rckpt_restored_exact(r))
        finally:
            lib.rckpt_restored_free(r)
        return step_got, tensors, meta, {"wire_bytes": rs.wire_bytes, "calls": rs.calls,
                                         "seconds": rs.seconds, "exact": exact}

    def restore_full(self, step=None, names=None, device=None, into=None):
        """A committed step (None: the latest) as Restored(step, state_dict,
        optimizer state_dict or None, extra, stats). names: restore only
        these tensors (partial recovery). into: name -> a tensor of the same
        dtype and shape to read that tensor into, in place: in host memory,
        or on a CUDA device, where the library (built with CUDA) dequantizes
        it with no fp32 copy in host memory."""
        r = self._restore_full(step, names, device, into)
        return r._replace(extra=_user_extra(r.extra))

    def _restore_full(self, step=None, names=None, device=None, into=None):
        """restore_full, its extra as saved (save(model=...)'s wrapper kept)."""
        step, tensors, meta, stats = self._restore(step, names, device, into)
        sd = collections.OrderedDict()
        osd, extra = None, None
        if meta is not None and meta.get("format") == _FORMAT_TREE:
            return Restored(step, _fill_tree(meta["tree"], tensors),
                            _fill_tree(meta["optimizer"], tensors), meta["extra"], stats)
        if meta is None or meta.get("format") != _FORMAT:
            sd.update((k, v) for k, v in tensors.items() if not k.startswith(_OPT_PREFIX))
        else:
            for k in meta["keys"]:
                if k in tensors:
                    sd[k] = tensors[k]
                elif k in meta["other"]:
                    sd[k] = meta["other"][k]
            osd, extra = meta["optimizer"], meta["extra"]
            for pid, key, name, dt in meta["quantized_optimizer"]:
                osd["state"][pid][key] = tensors[name].to(getattr(torch, dt))
        return Restored(step, sd, osd, extra, stats)

    def restore(self, step=None, names=None, device=None):
        """The state_dict of a committed step (None: the latest)."""
        return self.restore_full(step, names, device).state_dict

    def restore_into(self, model, optimizer=None, step=None, strict=True):
        """Loads a committed step (None: the latest) into a module or a
        state_dict (in place, on its tensors' devices) and, when given, into
        an optimizer. Returns the Restored record (step, extra, ...)."""
        r = self._load_into(model, optimizer, step, strict)
        return r._replace(extra=_user_extra(r.extra))

    def _load_into(self, model, optimizer, step, strict):
        # the live tensors, by the names a save gives them: read in place
        live = model.state_dict() if isinstance(model, torch.nn.Module) else model
        into = dict(_paths(live))
        r = self._restore_full(step, into=into)
        if isinstance(model, torch.nn.Module):
            model.load_state_dict(r.state_dict, strict=strict)
        elif not _is_flat(model) or not _is_flat(r.state_dict):
            _load_tree(model, r.state_dict, strict)
        else:
            missing = [k for k in model if k not in r.state_dict]
            if strict and missing:
                raise KeyError("step %d lacks %s" % (r.step, ", ".join(missing[:5])))
            with torch.no_grad():
                for k, v in r.state_dict.items():
                    if k in model and isinstance(model[k], torch.Tensor):
                        if model[k] is not v:  # else read into it in place already
                            model[k].copy_(v)
                    else:
                        model[k] = v
        if optimizer is not None:
            if r.optimizer is None:
                raise KeyError("step %d was saved without optimizer state" % r.step)
            optimizer.load_state_dict(r.optimizer)
        return r

    def load_latest(self, model=None, optimizer=None, scheduler=None, state=None, strict=True):
        """Resumes a trainer in one call: restores the newest committed step
        in place into model (a module or state_dict), optimizer and
        scheduler, and updates dict `state` with the state saved beside
        them (save(..., state=...)). Returns that step's number, or None
        when the job has no committed step (a new run: nothing changed)."""
        head = _lib.c_u64()
        with self._lock:
            check(lib.rckpt_job_head(self._j, ctypes.byref(head)), self._h)
        if head.value == _lib.RCKPT_LATEST:
            return None
        if model is not None:
            r = self._load_into(model, optimizer, head.value, strict)
        else:
            r = self._restore_full(head.value)
            if optimizer is not None:
                if r.optimizer is None:
                    raise KeyError("step %d was saved without optimizer state" % r.step)
                optimizer.load_state_dict(r.optimizer)
        train = r.extra if isinstance(r.extra, dict) and r.extra.get("format") == _TRAIN else {}
        if scheduler is not None:
            if train.get("scheduler") is None:
                raise KeyError("step %d was saved without a scheduler (save(..., scheduler=))" % r.step)
            scheduler.load_state_dict(train["scheduler"])
        if state is not None and train.get("state") is not None:
            state.update(train["state"])
        return r.step

    def recover_into(self, model, ranges, step=None):
        """Partial recovery (SCAR): restores only what `ranges` names from a
        committed step (None: the latest) into a module or state_dict in
        place, leaving every other value as it is. ranges: name -> None
        (the whole tensor) or a list of (first, count) element ranges of the
        flattened tensor. Only the chunks holding them are read. Returns the
        step restored."""
        live = model.state_dict() if isinstance(model, torch.nn.Module) else model
        rs, keep = [], []
        for name, spans in ranges.items():
            if name not in live or not isinstance(live[name], torch.Tensor):
                raise KeyError("no tensor %s to recover into" % name)
            for first, count in (spans if spans is not None else [(0, live[name].numel())]):
                if first < 0 or count < 0 or first + count > live[name].numel():
                    raise ValueError("range (%d, %d) is past %s" % (first, count, name))
                b = name.encode()
                keep.append(b)
                rs.append((b, first, count, name))
        arr = (_lib.Range * max(len(rs), 1))(*[_lib.Range(b, f, c) for b, f, c, _ in rs])
        r = _lib.c_voidp()
        st = _lib.RCKPT_LATEST if step is None else step
        with self._lock:
            rc = lib.rckpt_job_restore_ranges(self._j, st, arr, len(rs), ctypes.byref(r), None)
            check(rc, self._h)
        try:
            for b, first, count, name in rs:
                i = lib.rckpt_restored_find(r, b)
                check(i, None, "step lacks %s" % name)
                d = _lib.Tensor()
                check(lib.rckpt_restored_tensor(r, i, ctypes.byref(d)), None)
                t = live[name]
                tmp = torch.empty(count, dtype=_TORCH[d.dtype])
                check(lib.rckpt_restored_read_range(r, i, first, count,
                                                    ctypes.c_void_p(tmp.data_ptr())),
                      None, "cannot read %s" % name)
                with torch.no_grad():
                    t.view(-1)[first:first + count].copy_(tmp)
            got = lib.rckpt_restored_step(r)
        finally:
            lib.rckpt_restored_free(r)
        return got

    def rewind(self, step, branch=None):
        """Moves the head back to committed step `step` (a loss spike: go
        back, skip some batches, save step + 1 anew). The later steps are
        forgotten at once, fenced by this writer's claim; the next save goes
        on from `step`. With branch=None the job's gc removes what they
        stored; with a name, they are first copied (with `step`) into a new
        job "<job>.<branch>". Waits for a save in flight first. Raises
        RckptError: a step after the head (not committed), a dropped one, a
        pinned step after it, a branch job that exists, or a job another
        writer has taken."""
        if self._pending is not None:
            self._pending._done.wait()
            self._track(self._pending)
            self._pending = None
        with self._lock:
            check(lib.rckpt_job_rewind(self._j, step, branch.encode() if branch else None), self._h)

    def branch(self, job, step, upto=None):
        """Starts job `job` as a branch of this job's step (through `upto`,
        default `step` alone), its records copied once: fine-tuning from a
        checkpoint. Open it with Checkpointer(job=...) and save on."""
        with self._lock:
            check(lib.rckpt_job_branch(self._j, step, step if upto is None else upto, job.encode()),
                  self._h)

    def pin(self, step, exact=False):
        """Keeps committed step `step` whatever the retention policy.
        exact=True: a milestone that must stay bit-exact; refused
        (RckptError) for a step that was not saved lossless."""
        with self._lock:
            check(lib.rckpt_job_pin(self._j, step, 2 if exact else 1), self._h)

    def unpin(self, step):
        """Lets retention decide about step `step` again."""
        with self._lock:
            check(lib.rckpt_job_pin(self._j, step, 0), self._h)

    def pinned(self, step):
        """Whether step `step` is pinned."""
        with self._lock:
            return bool(check(lib.rckpt_job_pinned(self._j, step), self._h))

    def folds_here(self):
        """Where restores fold chains: None in the OSDs, else why they fold
        in this process (the OSDs lack or refuse the rckpt class, or
        RCKPT_FOLD=client): slower, the same bytes."""
        why = ctypes.create_string_buffer(160)
        with self._lock:
            rc = check(lib.rckpt_job_folds_here(self._j, why, 160), self._h)
        return why.value.decode(errors="replace") if rc == 1 else None

    def steps(self):
        """The committed steps, oldest first, as StepInfo."""
        out = []
        after = _lib.RCKPT_LATEST
        buf = (_lib.StepInfo * 256)()
        n = _lib.c_uint()
        more = _lib.c_int(1)
        while more.value:
            with self._lock:
                check(lib.rckpt_job_steps(self._j, after, buf, 256, ctypes.byref(n),
                                          ctypes.byref(more)), self._h)
            for i in range(n.value):
                s = buf[i]
                out.append(StepInfo(s.step, None if s.parent == _lib.RCKPT_LATEST else s.parent,
                                    s.raw_bytes, s.enc_bytes, s.nchunks, bool(s.flags & 1),
                                    s.ranks or 1, s.opt_raw_bytes, s.opt_enc_bytes))
            if n.value == 0:
                break
            after = buf[n.value - 1].step
        return out
