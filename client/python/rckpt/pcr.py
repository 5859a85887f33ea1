"""PCR datasets (Progressive Compressed Records) as PyTorch datasets.

A dataset built with `rckpt pcr build` is read at a fidelity: the number of
scan groups (1..the dataset's groups, or None for all). Fewer groups read
fewer bytes and give every image at lower fidelity.
"""
import ctypes
import os

import torch

from . import _lib
from ._lib import check, lib


def _decode_label(b):
    try:
        return b.decode()
    except UnicodeDecodeError:
        return b


class _Reader:
    """An open rckpt_pcr_t, reopened after a fork (DataLoader workers)."""

    def __init__(self, dataset, pool, conf, user, fidelity, rgb, threads, prefetch):
        self.args = (dataset, pool, conf, user)
        self.fidelity = fidelity
        self.rgb = rgb
        self.threads = threads
        self.prefetch = prefetch
        self.pid = None
        self.h = self.d = None
        self.open()

    def open(self):
        dataset, pool, conf, user = self.args
        self.h = _lib.connect(conf, user, pool)
        self.d = _lib.c_voidp()
        o = _lib.PcrOpts(1, self.fidelity or _lib.RCKPT_PCR_ALL,
                         _lib.RCKPT_PCR_RGB if self.rgb else _lib.RCKPT_PCR_JPEG,
                         self.threads, self.prefetch)
        rc = lib.rckpt_pcr_open(self.h, ctypes.byref(self.d), dataset.encode(), ctypes.byref(o))
        if rc < 0:
            msg = lib.rckpt_errmsg(self.h).decode(errors="replace")
            lib.rckpt_destroy(self.h)
            self.h = None
            raise _lib.RckptError(rc, msg)
        self.pid = os.getpid()
        _lib.track(self)

    def get(self):
        if self.pid != os.getpid():  # a forked child: the parent's handles are not ours
            self.h = self.d = None
            self.open()
        return self.d

    def close(self):
        if self.h is not None and self.pid == os.getpid():
            lib.rckpt_pcr_close(self.d)
            lib.rckpt_destroy(self.h)
        self.h = self.d = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def images(self, b):
        """(image, label, name) for every image of batch b; frees b."""
        out = []
        try:
            for i in range(lib.rckpt_pcr_batch_count(b)):
                im = _lib.PcrImage()
                check(lib.rckpt_pcr_batch_image(b, i, ctypes.byref(im)), None)
                label = _decode_label(ctypes.string_at(im.label, im.label_len)) \
                    if im.label_len else None
                if self.rgb:
                    n = im.width * im.height * 3
                    buf = ctypes.string_at(im.rgb, n)
                    x = torch.frombuffer(bytearray(buf), dtype=torch.uint8).view(
                        im.height, im.width, 3)
                else:
                    x = ctypes.string_at(im.jpeg, im.jpeg_len)
                out.append((x, label, im.name.decode(errors="replace"), im.id))
        finally:
            lib.rckpt_pcr_batch_free(b)
        return out


class PCRDataset(torch.utils.data.Dataset):
    """Map-style: dataset[i] is (image, label) of image i at `fidelity`
    groups, gathered in the OSD (one call per item; a batch sampler's ids go
    through get_batch in one call per record touched). image: an HxWx3
    uint8 tensor (decode=True) or the JPEG's bytes; label: the label
    (a str when it is UTF-8); transform / target_transform apply to them."""

    def __init__(self, dataset, pool="rckpt", conf=None, user=None, fidelity=None,
                 decode=True, transform=None, target_transform=None, threads=0):
        self._r = _Reader(dataset, pool, conf, user, fidelity, decode, threads, 0)
        info = _lib.PcrInfo()
        check(lib.rckpt_pcr_info(self._r.d, ctypes.byref(info)), self._r.h)
        self.info = info
        self.transform = transform
        self.target_transform = target_transform

    def __len__(self):
        return self.info.images

    def _apply(self, x, y):
        if self.transform is not None:
            x = self.transform(x)
        if self.target_transform is not None:
            y = self.target_transform(y)
        return x, y

    def get_batch(self, ids):
        ids = [int(i) for i in ids]
        if any(i < 0 or i >= len(self) for i in ids):
            raise IndexError("image id out of range 0..%d" % (len(self) - 1))
        arr = (ctypes.c_uint32 * max(len(ids), 1))(*ids)
        b = _lib.c_voidp()
        d = self._r.get()
        check(lib.rckpt_pcr_fetch(d, arr, len(ids), ctypes.byref(b)), self._r.h)
        return [self._apply(x, y) for x, y, _, _ in self._r.images(b)]

    def __getitem__(self, i):
        if i < 0:
            i += len(self)
        return self.get_batch([i])[0]

    def close(self):
        self._r.close()


class PCRIterableDataset(torch.utils.data.IterableDataset):
    """Iterable: every image, record after record, each record read with
    one ranged read of its first `fidelity` groups and prefetched. The
    fidelity may change between epochs (set_fidelity).

    With DataLoader workers, worker w of n reads and decodes only records
    w, w+n, ... of the epoch's record order: together they yield every
    image once. shuffle=True permutes the record order per epoch (seeded
    by seed and set_epoch's epoch, the same in every worker) and passes
    each worker's images through a shuffle buffer of shuffle_buffer
    images. Call set_epoch(e) before each epoch, as with a
    DistributedSampler: workers get a copy of the dataset each epoch."""

    def __init__(self, dataset, pool="rckpt", conf=None, user=None, fidelity=None,
                 decode=True, transform=None, target_transform=None, threads=0, prefetch=2,
                 shuffle=False, seed=0, shuffle_buffer=1024):
        if shuffle_buffer < 1:
            raise ValueError("shuffle_buffer must be at least 1")
        self._r = _Reader(dataset, pool, conf, user, fidelity, decode, threads, prefetch)
        info = _lib.PcrInfo()
        check(lib.rckpt_pcr_info(self._r.d, ctypes.byref(info)), self._r.h)
        self.info = info
        self.fidelity = fidelity
        self.transform = transform
        self.target_transform = target_transform
        self.shuffle = shuffle
        self.seed = seed
        self.shuffle_buffer = shuffle_buffer
        self.epoch = 0

    def set_fidelity(self, fidelity):
        self.fidelity = fidelity

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __len__(self):
        return self.info.images

    def records(self, worker=0, workers=1):
        """The records worker `worker` of `workers` reads this epoch, in order."""
        order = list(range(self.info.records))
        if self.shuffle:
            g = torch.Generator()
            g.manual_seed(self.seed * 1000003 + self.epoch)
            order = torch.randperm(len(order), generator=g).tolist()
        return order[worker::workers]

    def _images(self, d):
        while True:
            b = _lib.c_voidp()
            check(lib.rckpt_pcr_next(d, ctypes.byref(b)), self._r.h)
            if not b:
                return
            for x, y, _, _ in self._r.images(b):
                yield x, y

    def _shuffled(self, images, worker):
        g = torch.Generator()
        g.manual_seed((self.seed * 1000003 + self.epoch) * 1009 + worker + 1)
        buf = []
        for item in images:
            if len(buf) < self.shuffle_buffer:
                buf.append(item)
                continue
            j = int(torch.randint(len(buf), (1,), generator=g))
            buf[j], item = item, buf[j]
            yield item
        while buf:
            j = int(torch.randint(len(buf), (1,), generator=g))
            buf[j], buf[-1] = buf[-1], buf[j]
            yield buf.pop()

    def __iter__(self):
        d = self._r.get()
        wi = torch.utils.data.get_worker_info()
        w, n = (wi.id, wi.num_workers) if wi else (0, 1)
        mine = self.records(w, n)
        arr = (ctypes.c_uint32 * max(len(mine), 1))(*mine)
        check(lib.rckpt_pcr_rewind_records(d, self.fidelity or _lib.RCKPT_PCR_ALL, arr, len(mine)),
              self._r.h)
        images = self._images(d)
        if self.shuffle and self.shuffle_buffer > 1:
            images = self._shuffled(images, w)
        for x, y in images:
            if self.transform is not None:
                x = self.transform(x)
            if self.target_transform is not None:
                y = self.target_transform(y)
            yield x, y

    def read_stats(self):
        s = _lib.PcrReadStats()
        check(lib.rckpt_pcr_read_stats(self._r.get(), ctypes.byref(s)), self._r.h)
        return {"wire_bytes": s.wire_bytes, "reads": s.reads, "images": s.images}

    def close(self):
        self._r.close()


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
        self._h = _lib.connect(*r.args[2:4], r.args[1])
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
        if self._h is not None:
            lib.rckpt_loader_close(self._l)
            lib.rckpt_destroy(self._h)
            self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _distributed(self, local_batch, seed=0, locality=False, cache_bytes=0, group=None,
                 collate=None, threads=0):
    """This learner's loader of the dataset for data-parallel training
    (PCRDistributedLoader): global batches of p x local_batch samples, p
    the torch.distributed world (or group) size, 1 without it. With
    locality=True (needs torch.distributed, gloo) the learners cache their
    first epoch's samples (cache_bytes each; 0: 1 GiB) and exchange only
    the imbalance afterwards: the same global batches, a fraction of the
    reads from the cluster."""
    return PCRDistributedLoader(self, local_batch, seed, locality, cache_bytes, group, collate, threads)


PCRDataset.distributed = _distributed
