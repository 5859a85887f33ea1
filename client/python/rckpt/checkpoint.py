"""Checkpoints of PyTorch models in rckpt (librckpt through ctypes).

A Checkpointer is one training job's checkpoints in a Ceph pool: save()
compresses a state_dict into it (the Inshrinkerator pipeline of librckpt),
restore() brings one back; load_latest() resumes a trainer in one call.
See docs/python.md. The save side is here; the restore side and the job's
steps in _restore.py, the state dicts' names in _tree.py, GradientEMA in
_grads.py.
"""
import collections
import ctypes
import errno
import sys
import threading
import time
import warnings

import torch

from . import _lib, _plain
from ._grads import GradientEMA
from ._lib import RckptError, check, lib
from ._restore import _Restoring
from ._tree import (EPS_DEFAULT, _DTYPES, _TORCH, _OPT_PREFIX, _FORMAT, _FORMAT_TREE, _TRAIN,
                    SaveResult, Shard, _compressible, _tensor_of, _is_flat, _is_optimizer_state,
                    _segment, _role)
from ._tree import Restored, StepInfo

# Resumes per save at which the default eps was measured to hold a run's
# final held-out loss within 1% (10 resumes over 20 saves, docs/
# compression.md "Thresholds that follow the restores").
RESUME_RATE_REF = 0.5

__all__ = ["Checkpointer", "GradientEMA", "Restored", "SaveHandle", "SaveResult", "Shard", "StepInfo"]


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


class Checkpointer(_Restoring):
    """One job's checkpoints in a pool.

    pool, job: where (job: 1..63 of [A-Za-z0-9._-], the first not . or -, one RADOS namespace).
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
    eps_schedule: None (default: every save at eps) or "lr": a save given
      its optimizer takes eps times its learning rate over the schedule's
      initial one (param group "lr" / "initial_lr", which torch's LR
      schedulers set; the largest over groups), at least eps_min (None:
      eps / 10). Late in a decaying schedule a restore's error is no
      longer healed by training, so late saves are stored finer
      (docs/compression.md "Thresholds that follow the learning rate").
      "restores": a job that resumes often (its record of resumes is in
      the store) stores finer: eps times restore_factor(step), at least
      eps_min ("Thresholds that follow the restores"). "lr+restores":
      both factors. save(eps=...) sets one save's threshold instead.
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
      this (0: 32 MiB, or half the OSDs' osd_max_object_size when less;
      at most 32 MiB, what one compaction call in an OSD may move).
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
    compact_every: after every N-th committed save (default 8) the writer
      compacts the job in the background of that save (the trainer goes
      on): the head becomes a base, so a restore of the latest step folds
      at most N records per chunk instead of the whole chain (up to 256).
      It applies the job's stored retention policy (every step kept unless
      one was set with `rckpt ckpt compact --keep-last/--keep-every`).
      0: never (then `rckpt compact --all` from cron keeps restores fast).
    head_records: with each delta the writer also stores the step as a
      base (its head record, formats/store.md "Head records"), so that
      restoring the newest step reads one record a chunk whatever the
      chain (default True). False: fewer bytes written a save; a restore
      of the newest step then folds its chain in the OSDs.
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
                 progress=None, eps_schedule=None, eps_min=None, compact_every=8, head_records=True):
        if not job:
            raise ValueError("job is required")
        if takeover not in ("auto", True, False):
            raise ValueError("takeover must be 'auto', True or False")
        if snapshot not in (True, False, "device"):
            raise ValueError("snapshot must be True, False or 'device'")
        if not wait_s >= 0:
            raise ValueError("wait_s must be >= 0")
        if isinstance(compact_every, bool) or not isinstance(compact_every, int) or compact_every < 0:
            raise ValueError("compact_every must be an int >= 0 (0: never), not %r" % (compact_every,))
        if optimizer_state not in ("lossless", "quantize"):
            raise ValueError("optimizer_state must be 'lossless' or 'quantize'")
        if compute not in _lib.RCKPT_COMPUTE:
            raise ValueError("compute must be auto, cpu or gpu")
        if eps_schedule not in (None, "lr", "restores", "lr+restores"):
            raise ValueError("eps_schedule must be None, 'lr', 'restores' or 'lr+restores'")
        self.eps = EPS_DEFAULT if eps is None else eps
        self.eps_schedule = eps_schedule
        self.eps_min = self.eps / 10 if eps_min is None else eps_min
        self._warned_lr = False  # eps_schedule="lr" without initial_lr: said once
        self._resumes = None     # the job's record of resumes, read when a save needs it
        self._prev_step = None   # the step of this writer's last save, or of its resume
        self._saved = False      # a restore before the first save is a resume
        if eps_schedule is not None and not 0 < self.eps_min <= self.eps:
            raise ValueError("eps_min must be in (0, eps]")
        if eps_schedule is not None and group is not None:
            raise ValueError("group saves take one eps for now: no eps_schedule")
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
        o.eps = self.eps
        o.chunk_params = chunk_params
        o.base_every = base_every
        o.compact_every = compact_every
        o.no_heads = 0 if head_records else 1
        o.compute = _lib.RCKPT_COMPUTE[compute]
        o.quality_eps = quality_eps
        if quality is not None:
            self._cb = _lib.QUALITY_CB(self._quality)  # kept alive with self
            o.quality = self._cb
        self._g = None
        rc = 0
        if group is not None:
            from ._distributed import _TorchTransport
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
             select="priority", seed=0, lossless=None, *, model=None, scheduler=None, state=None,
             eps=None):
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
        lossy saves after an exact one are deltas on it.

        eps: this save's threshold, in (0, 1) (None: the checkpointer's
        eps, or its eps_schedule's value for this save)."""
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
        seps = self.save_eps(optimizer, step) if eps is None else float(eps)
        if not 0 < seps < 1:
            raise ValueError("eps must be in (0, 1)")
        self._prev_step, self._saved = step, True
        if self._g and seps != self.eps:
            raise ValueError("group saves take one eps for now: the checkpointer's")
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
                                  args=(handle, step, comp, g, blob, t0, part, exact, roles, seps),
                                  daemon=True)
            self._pending = handle
            handle.t_blocked = time.perf_counter() - t0  # before the thread reads it
            th.start()
            return handle
        try:
            s = self._encode(step, comp, g, blob, part, exact, roles, seps)  # the tensors are free after
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
                             st.t_encode, 0.0, blocked, False, 0, 0, 0.0, 0, 0, 0))
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

    def save_eps(self, optimizer=None, step=None):
        """The threshold a save of `step` with this optimizer takes, within
        [eps_min, eps]: eps, times with eps_schedule "lr" the largest
        lr / initial_lr of the optimizer's param groups (those an LR
        scheduler set initial_lr in), and with "restores" the
        restore_factor of the step."""
        sched = (self.eps_schedule or "").split("+")
        f = 1.0
        if "lr" in sched and optimizer is not None:
            lr = [g["lr"] / g["initial_lr"] for g in optimizer.param_groups
                  if g.get("initial_lr", 0) > 0 and g.get("lr") is not None]
            if lr:
                f = max(lr)
            elif not self._warned_lr:
                self._warned_lr = True
                warnings.warn("eps_schedule='%s': the optimizer's param groups have no initial_lr "
                              "(an LR scheduler sets it; a trainer setting lr by hand sets it too): "
                              "saving at eps" % self.eps_schedule, stacklevel=3)
        if "restores" in sched and step is not None:
            f *= self.restore_factor(step)
        return min(self.eps, max(self.eps_min, self.eps * f))

    def restore_factor(self, step):
        """What eps_schedule "restores" multiplies a save's eps by: the
        job's resumes (its record in the store, rckpt_job_restores) per
        step so far, times the steps since this writer's last save (or its
        resume), is the chance p that a resume will read this save; the
        default eps holds a run's final loss within 1% at RESUME_RATE_REF
        (10 resumes over 20 saves), so the factor is RESUME_RATE_REF / p,
        at most 1: a job resuming twice as often stores each save at half
        the error, and the sum of its resumes' errors stays the same."""
        if self._resumes is None:
            n, last = _lib.c_u64(), _lib.c_u64()
            with self._lock:
                check(lib.rckpt_job_restores(self._j, ctypes.byref(n), ctypes.byref(last)), self._h)
            self._resumes = n.value
            if self._prev_step is None and last.value != _lib.RCKPT_LATEST:
                self._prev_step = last.value
        if not self._resumes or self._prev_step is None or not step > self._prev_step:
            return 1.0
        p = min(1.0, self._resumes * (step - self._prev_step) / step)
        return min(1.0, RESUME_RATE_REF / p)

    def _encode(self, step, comp, g, blob, part=None, exact=False, roles=(), seps=0.0):
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
                rc = lib.rckpt_job_set_eps(self._j, seps, 0.0)
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
                                  st.opt_raw_bytes, st.opt_enc_bytes, st.head_bytes))

    def _run_save(self, handle, step, comp, g, blob, t0, part=None, exact=False, roles=(), seps=0.0):
        try:
            s = self._encode(step, comp, g, blob, part, exact, roles, seps)
        except BaseException as e:
            handle._finish(error=e)
            return
        self._finish_save(handle, s, handle.t_blocked)
