"""PCR datasets (Progressive Compressed Records) as PyTorch datasets.

A dataset built with `rckpt pcr build` is read at a fidelity: the number of
scan groups (1..the dataset's groups, or None for all). Fewer groups read
fewer bytes and give every image at lower fidelity.

scale= (decode=True) decodes each image at 1/scale of its width and height
in the DCT domain (2, 4 or 8; None or 1: full size), or "auto": per image
the smallest of those that keeps every luma coefficient its groups hold
(1/8 at group 1, 1/2 at groups 2..4 of colour images, full size from there
on; RCKPT_PCR_SCALE_AUTO in rckpt.h). Faster than decoding at full size
(README "Decode speed of PCR prefixes"); size= then resizes what it gives.
"""
import concurrent.futures
import ctypes
import os

import torch
import torch.nn.functional as F

from . import _lib
from ._lib import check, lib


def _decode_label(b):
    try:
        return b.decode()
    except UnicodeDecodeError:
        return b


FITS = ("resize", "center_crop", "random_crop")

RCKPT_PCR_SCALE_AUTO = 0x100


def _scale_of(scale, decode):
    """rckpt_pcr_opts_t.scale of scale= (None, 1, 2, 4, 8 or "auto")."""
    if scale is None or (scale == 1 and not isinstance(scale, bool)):
        return 0
    if scale == "auto":
        v = RCKPT_PCR_SCALE_AUTO
    elif not isinstance(scale, bool) and scale in (2, 4, 8):
        v = int(scale)
    else:
        raise ValueError("scale must be None, 1, 2, 4, 8 or 'auto', not %r" % (scale,))
    if not decode:
        raise ValueError("scale= needs decode=True (it is the decoded size)")
    return v


def _size_of(size, fit, decode):
    """The checked (H, W) of size= (an int: square), or None."""
    if size is None:
        return None
    if fit not in FITS:
        raise ValueError("fit must be one of %s, not %r" % (", ".join(FITS), fit))
    if not decode:
        raise ValueError("size= needs decode=True (it resizes decoded images)")
    hw = (size, size) if isinstance(size, int) else tuple(size)
    if len(hw) != 2 or any(not isinstance(v, int) or v < 1 for v in hw):
        raise ValueError("size must be a positive int or (H, W) of positive ints, not %r" % (size,))
    return hw


def _resize(x, hw):
    """HxWx3 uint8 -> hw[0] x hw[1] x 3 uint8: bilinear, antialiased when
    shrinking (torchvision's Resize on tensors), rounded."""
    t = x.permute(2, 0, 1).unsqueeze(0).float()  # channels-last NCHW, one conversion
    shrink = hw[0] < x.shape[0] or hw[1] < x.shape[1]
    t = F.interpolate(t, size=hw, mode="bilinear", align_corners=False, antialias=shrink)
    return t[0].permute(1, 2, 0).add_(0.5).clamp_(0, 255).to(torch.uint8)


def _fit(x, hw, fit):
    """x (HxWx3 uint8) at exactly hw: resized, or a window of it (a view,
    no copy) after scaling it up (aspect kept) if it is smaller than hw."""
    h, w = x.shape[0], x.shape[1]
    if (h, w) == hw:
        return x
    if fit == "resize":
        return _resize(x, hw)
    if h < hw[0] or w < hw[1]:
        s = max(hw[0] / h, hw[1] / w)
        x = _resize(x, (max(hw[0], round(h * s)), max(hw[1], round(w * s))))
        h, w = x.shape[0], x.shape[1]
    if fit == "center_crop":
        top, left = (h - hw[0]) // 2, (w - hw[1]) // 2
    else:  # torch's generator: seeded per DataLoader worker
        top = int(torch.randint(h - hw[0] + 1, (1,)))
        left = int(torch.randint(w - hw[1] + 1, (1,)))
    return x[top:top + hw[0], left:left + hw[1]]


class _Items:
    """What both datasets do to an image and its label."""

    def _items_init(self, decode, size, fit, transform, target_transform):
        self.size = _size_of(size, fit, decode)
        self.fit = fit
        self.transform = transform
        self.target_transform = target_transform

    def _apply(self, x, y):
        if self.size is not None:
            x = _fit(x, self.size, self.fit)
        if self.transform is not None:
            x = self.transform(x)
        if self.target_transform is not None:
            y = self.target_transform(y)
        return x, y


class _Reader:
    """An open rckpt_pcr_t, reopened after a fork (DataLoader workers)."""

    def __init__(self, dataset, pool, conf, user, fidelity, rgb, threads, prefetch, scale=0):
        self.args = (dataset, pool, conf, user)
        self.scale = scale
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
        o = _lib.PcrOpts(2, self.fidelity or _lib.RCKPT_PCR_ALL,
                         _lib.RCKPT_PCR_RGB if self.rgb else _lib.RCKPT_PCR_JPEG,
                         self.threads, self.prefetch, self.scale)
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
                    x = torch.empty((im.height, im.width, 3), dtype=torch.uint8)
                    ctypes.memmove(x.data_ptr(), im.rgb, im.width * im.height * 3)
                else:
                    x = ctypes.string_at(im.jpeg, im.jpeg_len)
                out.append((x, label, im.name.decode(errors="replace"), im.id))
        finally:
            lib.rckpt_pcr_batch_free(b)
        return out


class PCRDataset(_Items, torch.utils.data.Dataset):
    """Map-style: dataset[i] is (image, label) of image i at `fidelity`
    groups, gathered in the OSD. image: an HxWx3 uint8 tensor (decode=True)
    or the JPEG's bytes; label: the label (a str when it is UTF-8).

    size=(H, W) (or an int, square) makes every image HxWx3 so that the
    default collate stacks them: fit="resize" scales it (bilinear,
    antialiased when shrinking), "center_crop" / "random_crop" take an HxW
    window of it (a view, no copy; an image smaller than that is first
    scaled up, aspect kept, to cover it). transform / target_transform then
    apply to the image and the label.

    One id costs a round trip to the OSD and a decode, one after the
    other. A list of ids (dataset[ids], get_batch, __getitems__) costs one
    call per record touched, all in flight at once, and the ids are read
    and decoded in parts, the next part while the caller's thread resizes
    and transforms the previous one, as PCRIterableDataset reads records
    ahead. loader() gives a DataLoader that hands whole batches to
    get_batch and, in one process, reads the next batch's first part
    ahead (PyTorch >= 2.0 hands batches over by itself, through
    __getitems__). Not for use from several threads at once. scale= as in
    the module's doc."""

    def __init__(self, dataset, pool="rckpt", conf=None, user=None, fidelity=None,
                 decode=True, transform=None, target_transform=None, threads=0,
                 size=None, fit="resize", scale=None):
        sc = _scale_of(scale, decode)
        self._items_init(decode, size, fit, transform, target_transform)
        self._r = _Reader(dataset, pool, conf, user, fidelity, decode, threads, 0, sc)
        info = _lib.PcrInfo()
        check(lib.rckpt_pcr_info(self._r.d, ctypes.byref(info)), self._r.h)
        self.info = info
        self._ex = self._ex_pid = None
        self._ahead = self._next = None

    def __len__(self):
        return self.info.images

    # ids read and decoded per call in get_batch's pipeline: a part's
    # decode overlaps the previous part's resize and transform
    PART = 8

    def _fetch(self, ids):
        arr = (ctypes.c_uint32 * len(ids))(*ids)
        b = _lib.c_voidp()
        d = self._r.get()
        check(lib.rckpt_pcr_fetch(d, arr, len(ids), ctypes.byref(b)), self._r.h)
        return self._r.images(b)

    def _reader_thread(self):
        """The one thread that calls into the handle during get_batch
        (one per process: a forked worker starts its own)."""
        if self._ex_pid != os.getpid():
            self._ex = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rckpt-pcr")
            self._ex_pid = os.getpid()
            self._ahead = self._next = None
        return self._ex

    def _take_ahead(self, part):
        """The read of `part` started by the previous get_batch, or None;
        a read ahead of other ids is waited for (it uses the handle) and
        dropped."""
        ahead, self._ahead = self._ahead, None
        if ahead is None:
            return None
        if ahead[0] == part:
            return ahead[1]
        concurrent.futures.wait([ahead[1]])
        return None

    def get_batch(self, ids):
        """[(image, label)] of ids, in that order (repeats allowed)."""
        n = len(self)
        ids = [int(i) for i in ids]
        if any(i < 0 or i >= n for i in ids):
            raise IndexError("image id out of range 0..%d" % (n - 1))
        if not ids:
            return []
        self._r.get()  # reopen after a fork here, not in the reader thread
        ex = self._reader_thread()
        nxt, self._next = self._next, None  # loader()'s next batch: read its first part ahead
        parts = [tuple(ids[k:k + self.PART]) for k in range(0, len(ids), self.PART)]
        if nxt:
            parts.append(tuple(int(i) for i in nxt[:self.PART]))
        fut = self._take_ahead(parts[0])
        if fut is None and len(parts) == 1:  # one part, nothing to overlap
            return [self._apply(x, y) for x, y, _, _ in self._fetch(parts[0])]
        if fut is None:
            fut = ex.submit(self._fetch, parts[0])
        out = []
        try:
            for k in range(len(parts) - (1 if nxt else 0)):
                items = fut.result()
                fut = ex.submit(self._fetch, parts[k + 1]) if k + 1 < len(parts) else None
                out.extend(self._apply(x, y) for x, y, _, _ in items)
        except BaseException:
            if fut is not None:  # a transform raised: the read in flight ends first
                concurrent.futures.wait([fut])
            raise
        if nxt:
            self._ahead = (parts[-1], fut)
        return out

    __getitems__ = get_batch  # PyTorch >= 2.0's DataLoader: one call per batch

    def __getitem__(self, i):
        if isinstance(i, (list, tuple, range)) or (torch.is_tensor(i) and i.dim() == 1):
            return self.get_batch(i)
        i = int(i)
        if i < 0:
            i += len(self)
        return self.get_batch([i])[0]

    def loader(self, batch_size, shuffle=False, drop_last=False, generator=None, **kwargs):
        """A DataLoader of this dataset whose batches are read by
        get_batch, batch_size ids in one call (a plain DataLoader with
        batch_size=B calls dataset[i] B times in PyTorch < 2.0): ids in
        order, or a fresh permutation per epoch (shuffle=True, drawn from
        generator), batches stacked by the default collate unless
        collate_fn is given. Other keywords (num_workers, pin_memory, ...)
        go to the DataLoader."""
        data = torch.utils.data
        base = (data.RandomSampler(self, generator=generator) if shuffle
                else data.SequentialSampler(self))
        batches = data.BatchSampler(base, batch_size, drop_last)
        if not kwargs.get("num_workers"):  # one process: read each next batch ahead
            batches = _AheadSampler(self, batches)
        kwargs.setdefault("collate_fn", data.default_collate)
        return data.DataLoader(self, sampler=batches, batch_size=None, **kwargs)

    def close(self):
        if self._ex is not None and self._ex_pid == os.getpid():
            self._ex.shutdown()  # waits for a read ahead
        self._ex = self._ahead = None
        self._r.close()


class _AheadSampler(torch.utils.data.Sampler):
    """Batches of ids for loader(), each telling the dataset the batch
    after it, so get_batch starts reading that one while the caller
    finishes this one (the iterable's read-ahead, across batches). Only
    where sampler and dataset share a process (num_workers=0)."""

    def __init__(self, ds, batches):
        self.ds, self.batches = ds, batches

    def __len__(self):
        return len(self.batches)

    def __iter__(self):
        it = iter(self.batches)
        cur = next(it, None)
        while cur is not None:
            nxt = next(it, None)
            self.ds._next = nxt
            yield cur
            cur = nxt
        self.ds._next = None


class PCRIterableDataset(_Items, torch.utils.data.IterableDataset):
    """Iterable: every image, record after record, each record read with
    one ranged read of its first `fidelity` groups and prefetched. The
    fidelity may change between epochs (set_fidelity).

    With DataLoader workers, worker w of n reads and decodes only records
    w, w+n, ... of the epoch's record order: together they yield every
    image once. shuffle=True permutes the record order per epoch (seeded
    by seed and set_epoch's epoch, the same in every worker) and passes
    each worker's images through a shuffle buffer of shuffle_buffer
    images. Call set_epoch(e) before each epoch, as with a
    DistributedSampler: workers get a copy of the dataset each epoch.

    size=(H, W) and fit= make every image HxWx3 as in PCRDataset (the
    default collate then stacks batches); transform and target_transform
    apply after that. scale= as in the module's doc."""

    def __init__(self, dataset, pool="rckpt", conf=None, user=None, fidelity=None,
                 decode=True, transform=None, target_transform=None, threads=0, prefetch=2,
                 shuffle=False, seed=0, shuffle_buffer=1024, size=None, fit="resize",
                 scale=None):
        if shuffle_buffer < 1:
            raise ValueError("shuffle_buffer must be at least 1")
        sc = _scale_of(scale, decode)
        self._items_init(decode, size, fit, transform, target_transform)
        self._r = _Reader(dataset, pool, conf, user, fidelity, decode, threads, prefetch, sc)
        info = _lib.PcrInfo()
        check(lib.rckpt_pcr_info(self._r.d, ctypes.byref(info)), self._r.h)
        self.info = info
        self.fidelity = fidelity
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
            yield self._apply(x, y)

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
    reads from the cluster. Not with scale= (the loader decodes at full
    size): ValueError."""
    if self._r.scale:
        raise ValueError("distributed() decodes at full size: open the dataset without scale=")
    return PCRDistributedLoader(self, local_batch, seed, locality, cache_bytes, group, collate, threads)


PCRDataset.distributed = _distributed
