"""The Checkpointer's restore side: steps brought back (whole, by name, by
element range, in place), the trainer's resume, and the job's steps
(rewind, branch, pins, the list). A mixin of Checkpointer (checkpoint.py),
whose handle, job and lock it uses."""
import collections
import ctypes
import time

import torch

from . import _lib, _plain
from ._lib import check, lib
from ._tree import (_NODEV, _NOMEM, _TORCH, _OPT_PREFIX, _FORMAT, _FORMAT_TREE, _TRAIN, StepInfo,
                    Restored, _is_flat, _paths, _user_extra, _fill_tree, _load_tree)


def _optimizer_params(optimizer):
    """A torch optimizer's parameters in its state_dict's numbering."""
    return [p for g in optimizer.param_groups for p in g["params"]]


def _optimizer_into(optimizer, into):
    """The optimizer's state tensors as they are now, by the names a save
    gives them: a restore reads into them in place (as into the model's:
    a load that fails after the read leaves them holding the step's
    values), when _load_optimizer will hand them back as they are."""
    if not _plain_optimizer(optimizer):
        return
    for pid, p in enumerate(_optimizer_params(optimizer)):
        for key, v in optimizer.state.get(p, {}).items():
            if isinstance(v, torch.Tensor) and v.numel() > 1:
                into["%s%d/%s" % (_OPT_PREFIX, pid, key)] = v


def _cast_state(p, key, v):
    """What torch's Optimizer.load_state_dict makes of a state value: a
    floating-point tensor in its parameter's dtype, on its device (a
    'step' as it is)."""
    if isinstance(v, torch.Tensor) and key != "step":
        if p.is_floating_point():
            v = v.to(p.dtype)
        return v.to(p.device)
    return v


def _plain_optimizer(optimizer):
    """Whether torch's own Optimizer.load_state_dict is what loading this
    optimizer runs, with no hooks, no fused or capturable group (whose
    'step' torch moves to the device) and state of tensors and numbers
    alone: then _load_optimizer does what it does, without the copy."""
    if not isinstance(optimizer, torch.optim.Optimizer) or \
            type(optimizer).load_state_dict is not torch.optim.Optimizer.load_state_dict:
        return False
    for hooks in ("_optimizer_load_state_dict_pre_hooks", "_optimizer_load_state_dict_post_hooks"):
        if getattr(optimizer, hooks, None):
            return False
    return not any(g.get("fused") or g.get("capturable") for g in optimizer.param_groups)


def _read_in_place(model, live, sd):
    """Whether model's load_state_dict(sd) would only copy each tensor onto
    itself: every entry of live (its state_dict) read in place (sd[k] is
    live[k]), no other key, and no module that loads its own way (an
    override of load_state_dict or _load_from_state_dict, a load hook)."""
    if len(sd) != len(live) or any(sd.get(k) is not v for k, v in live.items()):
        return False
    base = torch.nn.Module
    if type(model).load_state_dict is not base.load_state_dict:
        return False
    for m in model.modules():
        if (type(m)._load_from_state_dict is not base._load_from_state_dict
                or getattr(m, "_load_state_dict_pre_hooks", None)
                or getattr(m, "_load_state_dict_post_hooks", None)):
            return False
    return True


def _load_optimizer(optimizer, osd):
    """optimizer.load_state_dict(osd) without torch's deep copy of every
    state tensor (a second copy of the optimizer's state, as long as a
    restore's read of it): the tensors here are the restore's own, or the
    optimizer's read in place. Anything else (another load_state_dict,
    hooks, fused or capturable groups, groups that do not match, state
    values other than tensors and numbers) goes through the optimizer's
    own load_state_dict."""
    if not _plain_optimizer(optimizer):
        return optimizer.load_state_dict(osd)
    params = _optimizer_params(optimizer)
    groups = osd.get("param_groups") if isinstance(osd, dict) else None
    state = osd.get("state") if isinstance(osd, dict) else None
    if not isinstance(groups, list) or not isinstance(state, dict) or \
            len(groups) != len(optimizer.param_groups) or \
            any(not isinstance(g, dict) or len(g.get("params", ())) != len(o["params"])
                for g, o in zip(groups, optimizer.param_groups)) or \
            any(not isinstance(st, dict) or any(not isinstance(v, (torch.Tensor, int, float, bool))
                                                for v in st.values()) for st in state.values()):
        return optimizer.load_state_dict(osd)  # torch says what does not match
    optimizer.load_state_dict({"state": {}, "param_groups": groups})  # the groups' settings
    ids = [i for g in groups for i in g["params"]]
    for i, p in zip(ids, params):
        if i in state:
            optimizer.state[p] = {k: _cast_state(p, k, v) for k, v in state[i].items()}
    optimizer.__setstate__({"state": optimizer.state})  # the class's own fixes (Adam's step)


class _Restoring:
    """Checkpointer's methods that read what is stored."""

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
            t_read = [0.0]  # seconds dequantizing into the tensors (read_many)
            host = []  # (name, index, tensor): read on the host, all at once
            dests = set()  # data_ptr()s read into in place
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
                    if fits and not live.is_cuda and live.data_ptr() not in dests:
                        out = live  # read in place: no second copy of the model
                        dests.add(live.data_ptr())  # (tied weights: the others read apart)
                    else:
                        out = torch.empty(shape, dtype=_TORCH[d.dtype])
                    tensors[name] = None  # the order of the step's tensors
                    host.append((name, i, out))
                    continue
                if rc == -2:  # left out by a partial restore
                    continue
                check(rc, None, "cannot read tensor %s" % name)
                tensors[name] = out.to(device) if device is not None else out
            if host:  # on every core, in pieces: the library's threads
                n = len(host)
                idx = (ctypes.c_uint * n)(*[i for _, i, _ in host])
                dst = (ctypes.c_void_p * n)(*[t.data_ptr() for _, _, t in host])
                cap = (_lib.c_size * n)(*[t.numel() * t.element_size() for _, _, t in host])
                rcs = (ctypes.c_int * n)()
                t0 = time.perf_counter()
                check(lib.rckpt_restored_read_many(r, n, idx, dst, cap, rcs, 0), None)
                t_read[0] = time.perf_counter() - t0
                for (name, _, out), rc in zip(host, rcs):
                    if rc == -2:  # left out by a partial restore
                        del tensors[name]
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
        if self._writer and not self._saved:
            # a resume, which the library recorded: read the record again when a save needs it
            self._resumes, self._prev_step = None, step_got
        return step_got, tensors, meta, {"wire_bytes": rs.wire_bytes, "calls": rs.calls,
                                         "seconds": rs.seconds, "exact": exact, "t_locate": rs.t_locate,
                                         "t_fetch": rs.t_fetch, "t_decode": rs.t_decode,
                                         "decode_cpu": rs.decode_cpu, "t_read": t_read[0]}

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
        if optimizer is not None:
            _optimizer_into(optimizer, into)
        r = self._restore_full(step, into=into)
        if isinstance(model, torch.nn.Module):
            if not _read_in_place(model, live, r.state_dict):  # else torch's load is copies onto themselves
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
            _load_optimizer(optimizer, r.optimizer)
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
                _load_optimizer(optimizer, r.optimizer)
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
                                    s.ranks or 1, s.opt_raw_bytes, s.opt_enc_bytes,
                                    bool(s.flags & 4)))
            if n.value == 0:
                break
            after = buf[n.value - 1].step
        return out
