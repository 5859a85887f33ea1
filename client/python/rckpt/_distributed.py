"""PCRDistributedLoader: a PCR dataset's loader for data-parallel training
(PCRDataset.distributed(), pcr.py), with the locality-aware exchange of
samples between learners over torch.distributed (_TorchTransport, which
group saves use too)."""
import ctypes

import torch

from . import _lib
from ._lib import check, lib
from .pcr import _connect


class _TorchTransport:
    """rckpt_loc_transport_t over torch.distributed point-to-point sends
    (gloo on CPU tensors), in the trainer's process group."""

    def __init__(self, group):
        import torch.distributed as dist
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("locality mode needs torch.distributed initialised "
                               "(init_process_group) in every learner")
        self.dist, self.group = dist, group
        self.rank = dist.get_rank(group)
        self.size = dist.get_world_size(group)
        self.error = None
        self.sent = 0  # bytes this rank sent
        self._send = _lib.LOC_SEND(self.send)
        self._recv = _lib.LOC_RECV(self.recv)
        self.c = _lib.LocTransport(None, self.rank, self.size, self._send, self._recv)

    def _peer(self, peer):
        if self.group is None:
            return peer
        from torch.distributed import distributed_c10d as c10d
        return c10d._get_global_rank(self.group, peer)

    def send(self, ctx, peer, buf, n):
        try:
            t = torch.frombuffer((ctypes.c_uint8 * n).from_address(buf), dtype=torch.uint8)
            self.dist.send(t, self._peer(peer), group=self.group)
            self.sent += n
            return 0
        except Exception as e:  # reported by the loader's caller
            self.error = e
            return -5  # EIO

    def recv(self, ctx, peer, buf, n):
        try:
            t = torch.empty(n, dtype=torch.uint8)
            self.dist.recv(t, self._peer(peer), group=self.group)
            ctypes.memmove(buf, t.data_ptr(), n)
            return 0
        except Exception as e:
            self.error = e
            return -5


class PCRDistributedLoader:
    """The learners' data loader over a PCR dataset (see
    PCRDataset.distributed): iterating gives this learner's local batch of
    each step of the epoch set by set_epoch, as a list of (image, label)
    (or collate(list) when given). The global batches of an epoch (p x
    local_batch samples, the order of rckpt_loc_order) are the same in both
    modes; `ids` holds the last local batch's image ids.

    regular mode: each learner reads its share from the cluster, every
    epoch. locality mode: in the first epoch each learner caches the
    samples it reads (at most cache_bytes of JPEG); later each builds its
    share of every global batch from its cache and the learners exchange
    only the imbalance over torch.distributed (gloo); samples in no cache
    come from the cluster. Every learner must iterate every step."""

    def __init__(self, ds, local_batch, seed, locality, cache_bytes, group, collate, threads):
        self.ds = ds
        self.collate = collate
        self.local_batch = local_batch
        self.seed = seed
        self.epoch = 0
        self.ids = []
        self._resume = None  # the position the next epoch starts from
        if locality:
            self._tr = _TorchTransport(group)
        else:
            import torch.distributed as dist
            on = dist.is_available() and dist.is_initialized()
            rank, size = (dist.get_rank(group), dist.get_world_size(group)) if on else (0, 1)
            self._tr = None
            self._plain = _lib.LocTransport(None, rank, size, _lib.LOC_SEND(), _lib.LOC_RECV())
        tr = self._tr.c if self._tr else self._plain
        r = ds._r
        o = _lib.LoaderOpts(1, _lib.RCKPT_LOADER_LOCALITY if locality else _lib.RCKPT_LOADER_REGULAR,
                            local_batch, seed, cache_bytes, r.fidelity or _lib.RCKPT_PCR_ALL,
                            _lib.RCKPT_PCR_RGB if r.rgb else _lib.RCKPT_PCR_JPEG, threads)
        self._h = _connect(r.args[2], r.args[3], r.args[1], r.timeout_s)
        self._l = _lib.c_voidp()
        rc = lib.rckpt_loader_open(self._h, ctypes.byref(self._l), r.args[0].encode(),
                                   ctypes.byref(tr), ctypes.byref(o))
        if rc < 0:
            msg = lib.rckpt_errmsg(self._h).decode(errors="replace")
            lib.rckpt_destroy(self._h)
            self._h = None
            raise _lib.RckptError(rc, msg)
        self.rank, self.size = tr.rank, tr.size
        _lib.track(self)

    def set_epoch(self, epoch):
        self.epoch = epoch
        self._resume = None

    def state_dict(self):
        """The data position, for a checkpoint (save it in the step's tree,
        e.g. {"model": ..., "data": loader.state_dict()}): the epoch and the
        samples of its order the global batches given out so far hold, over
        all learners, with what fixes the order. Taken between batches, it
        says what the trainer has consumed."""
        e = ctypes.c_uint64(self.epoch)
        c = ctypes.c_uint32(0)
        if self._resume is not None:
            c.value = self._resume
        elif lib.rckpt_loader_position(self._l, ctypes.byref(e), ctypes.byref(c)) < 0:
            e.value, c.value = self.epoch, 0  # no epoch run yet: its start
        r = self.ds._r
        return {"dataset": r.args[0], "seed": self.seed, "fidelity": r.fidelity or 0,
                "epoch": e.value, "consumed": c.value}

    def load_state_dict(self, sd):
        """Resumes at a saved position: the next iteration runs the rest of
        that epoch (on any number of learners: the remaining samples in
        global batches of this loader's size), then set_epoch goes on as
        usual. ValueError when the position is of another dataset, seed or
        fidelity (another order or other bytes)."""
        r = self.ds._r
        for k, mine in (("dataset", r.args[0]), ("seed", self.seed), ("fidelity", r.fidelity or 0)):
            if sd.get(k) != mine:
                raise ValueError("the saved position is of %s %r, this loader's is %r" % (k, sd.get(k), mine))
        if not 0 <= sd["consumed"] <= len(self.ds):
            raise ValueError("the saved position is past the dataset")
        self.epoch = sd["epoch"]
        self._resume = sd["consumed"]

    def __len__(self):
        """Steps per epoch."""
        g = self.size * self.local_batch
        return (len(self.ds) + g - 1) // g

    def __iter__(self):
        steps = ctypes.c_uint32()
        start, self._resume = self._resume or 0, None
        check(lib.rckpt_loader_seek(self._l, self.epoch, start, ctypes.byref(steps)), self._h)
        while True:
            b = _lib.c_voidp()
            rc = lib.rckpt_loader_next(self._l, ctypes.byref(b))
            if rc < 0 and self._tr is not None and self._tr.error is not None:
                raise self._tr.error
            check(rc, self._h)
            if not b:
                return
            items = self.ds._r.images(b)
            self.ids = [i for _, _, _, i in items]
            out = [self.ds._apply(x, y) for x, y, _, _ in items]
            yield self.collate(out) if self.collate else out

    def stats(self):
        """Bytes and samples: from the cluster, from the cache, exchanged."""
        s = _lib.LoaderStats()
        check(lib.rckpt_loader_stats(self._l, ctypes.byref(s)), self._h)
        return {k: getattr(s, k) for k, _ in s._fields_}

    def close(self):
        if self._h is not None and _lib.owner(self):  # a forked child drops it
            lib.rckpt_loader_close(self._l)
            lib.rckpt_destroy(self._h)
        self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
