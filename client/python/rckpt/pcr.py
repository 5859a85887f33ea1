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

Connections. A dataset connects on first use in the process that reads
(its constructor connects only to read the index, then lets go), and again
in each process it is copied into: a DataLoader worker forked from the
trainer never uses (or frees) a handle it inherited, and one started by
spawn or forkserver gets the dataset by pickle, which keeps the plain
parameters alone. A read that fails for its connection (it timed out: no
answer within timeout_s; the client was cut off, blocklisted, refused) is
made again on a fresh connection, up to `retries` times; then RckptError,
naming the dataset, the images or record and the cause.

Labels: when every image of the dataset has a label and each is an
integer as str(int) writes it (the index's label table, checked once
when the dataset is made), labels come back as ints; otherwise a label
is a str when it is UTF-8, bytes when not, None for an image without one.
int_labels=False keeps strings; True requires integers (ValueError if not).
"""
import concurrent.futures
import ctypes
import errno
import os
import re
import sys
import threading

import torch
import torch.nn.functional as F

from . import _lib
from ._lib import check, lib

lib.rckpt_pcr_lookup.restype = ctypes.c_int
lib.rckpt_pcr_lookup.argtypes = [_lib.c_voidp, ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint32),
                                 ctypes.POINTER(_lib.c_voidp), ctypes.POINTER(_lib.c_size)]

# What a read fails with when its connection is at fault, not the data:
# no answer in time, a client cut off or blocklisted (Ceph's EBLOCKLISTED
# is ESHUTDOWN), a connection refused, reset or unreachable. Such a read is
# made again on a fresh connection.
CONNECTION_ERRORS = frozenset(-e for e in (
    errno.ETIMEDOUT, errno.ESHUTDOWN, errno.ENOTCONN, errno.ECONNRESET, errno.ECONNREFUSED,
    errno.ECONNABORTED, errno.EPIPE, errno.ENETDOWN, errno.ENETUNREACH, errno.EHOSTDOWN,
    errno.EHOSTUNREACH))

# an integer label: what str(int) writes, at most 18 digits (an int64)
_INT_LABEL = re.compile(rb"(?:0|-?[1-9][0-9]{0,17})\Z")


def _decode_label(b):
    try:
        return b.decode()
    except UnicodeDecodeError:
        return b


def _timeout_of(timeout_s):
    """rckpt_connect_opts_t.timeout_s of timeout_s= (None: the library's 30 s;
    seconds, rounded up to whole ones)."""
    if timeout_s is None:
        return 0
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
        raise ValueError("timeout_s must be None or a number of seconds > 0, not %r" % (timeout_s,))
    return min(int(-(-timeout_s // 1)), 2**31)


def _fidelity_of(fidelity):
    """A reader's fidelity: None (every scan group) or a group count >= 1
    (above the dataset's: refused when it is opened)."""
    if fidelity is None:
        return None
    if isinstance(fidelity, bool) or not isinstance(fidelity, int) or fidelity < 1:
        raise ValueError("fidelity must be None (every scan group) or a number of scan groups >= 1, "
                         "not %r" % (fidelity,))
    return fidelity


def _retries_of(retries):
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError("retries must be an int >= 0, not %r" % (retries,))
    return retries


def _in_fresh_thread(fn, *args):
    """fn(*args) on a thread of its own, made for it. librados draws a new
    client's address (its nonce) from a generator kept per thread: in a
    process forked after a connection was made on the same thread, every
    child's generator is the parent's copy, so DataLoader workers forked
    from one trainer connected with one and the same address, and the
    OSD's connections to them kept replacing each other (reads stalled,
    and under load timed out). A fresh thread seeds a fresh generator."""
    out = []

    def run():
        try:
            out.append((True, fn(*args)))
        except BaseException as e:  # handed to the caller's thread
            out.append((False, e))
    t = threading.Thread(target=run, name="rckpt-connect", daemon=True)
    t.start()
    t.join()
    ok, v = out[0]
    if not ok:
        raise v
    return v


def _connect(conf, user, pool, timeout_s):
    """A connected rckpt_t handle made on a fresh thread (_in_fresh_thread)."""
    return _in_fresh_thread(_lib.connect, conf, user, pool, timeout_s)


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


def _sizes_differ(batch):
    """The first two different shapes among the images of a batch of
    (image, label) samples, or None."""
    shapes = []
    for item in batch:
        x = item[0] if isinstance(item, (tuple, list)) and item else item
        if torch.is_tensor(x) and tuple(x.shape) not in shapes:
            shapes.append(tuple(x.shape))
            if len(shapes) == 2:
                return shapes
    return None


def collate(batch, dataset="the PCR dataset"):
    """torch's default collate, with a clear error where it cannot stack
    the images of a batch because they differ in size (the dataset was
    made without size=). PCRDataset.loader() collates with it, and so
    does a DataLoader given a PCR dataset with the default collate."""
    try:
        return torch.utils.data.default_collate(batch)
    except RuntimeError as e:
        shapes = _sizes_differ(batch)
        if shapes is None:
            raise
        (h0, w0), (h1, w1) = shapes[0][:2], shapes[1][:2]
        raise ValueError(
            "%s: the default collate cannot stack images of different sizes (%dx%d and %dx%d "
            "in one batch): give the dataset size=(H, W) (and fit=) so that every image has "
            "one size, or the DataLoader a collate_fn that keeps lists" %
            (dataset, h0, w0, h1, w1)) from e


class _Collate:
    """collate() naming the dataset (a DataLoader's collate_fn)."""

    def __init__(self, name):
        self.name = name

    def __call__(self, batch):
        return collate(batch, self.name)


def _default_collate_fns():
    fns = {torch.utils.data.default_collate}
    try:
        from torch.utils.data._utils import collate as c
        fns.add(c.default_collate)
    except ImportError:
        pass
    return fns


class _Items:
    """What both datasets do to an image and its label."""

    def _items_init(self, decode, size, fit, transform, target_transform):
        self.size = _size_of(size, fit, decode)
        self.fit = fit
        self.decode = decode
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

    def _guard_collate(self):
        """Images of their own sizes (decode=True, no size=) going to a
        DataLoader with torch's default collate, which would fail on them
        with "stack expects each tensor to be equal size": that loader's
        fetcher (in this process) collates with collate() instead, which
        gives the same batches and, for such a batch, an error that says
        what to do. Looked for once per fetcher; nothing else changes."""
        if not self.decode or self.size is not None:
            return
        try:
            from torch.utils.data._utils.fetch import _BaseDatasetFetcher
            f = sys._getframe(2)
            for _ in range(6):
                if f is None:
                    return
                fetcher = f.f_locals.get("self")
                if isinstance(fetcher, _BaseDatasetFetcher):
                    if fetcher.auto_collation and fetcher.collate_fn in _default_collate_fns():
                        fetcher.collate_fn = _Collate("%s %r" % (type(self).__name__, self._r.name))
                    return
                f = f.f_back
        except Exception:  # another torch: its own error stands
            pass


class _Reader:
    """The dataset's handles (an rckpt_t and its rckpt_pcr_t), opened on
    first use in the process that uses them, never used or freed in
    another (a forked DataLoader worker opens its own); pickled, it keeps
    its parameters alone. attempt() retries a read that fails for its
    connection on a fresh one."""

    _STATE = ("args", "scale", "fidelity", "rgb", "threads", "prefetch", "timeout_s", "retries",
              "int_labels")

    def __init__(self, dataset, pool, conf, user, fidelity, rgb, threads, prefetch, scale=0,
                 timeout_s=None, retries=2):
        self.args = (dataset, pool, conf, user)
        self.scale = scale
        self.fidelity = _fidelity_of(fidelity)
        self.rgb = rgb
        self.threads = threads
        self.prefetch = prefetch
        self.timeout_s = _timeout_of(timeout_s)
        self.retries = _retries_of(retries)
        self.int_labels = False
        self.pid = self._tracked = None
        self.h = self.d = None
        self.opened = 0  # connections this process made

    @property
    def name(self):
        return self.args[0]

    def __getstate__(self):
        return {k: getattr(self, k) for k in self._STATE}

    def __setstate__(self, st):
        self.__dict__.update(st)
        self.pid = self._tracked = None
        self.h = self.d = None
        self.opened = 0

    def _open_here(self):
        dataset, pool, conf, user = self.args
        h = _lib.connect(conf, user, pool, self.timeout_s)
        d = _lib.c_voidp()
        o = _lib.PcrOpts(1, self.fidelity or _lib.RCKPT_PCR_ALL,
                         _lib.RCKPT_PCR_RGB if self.rgb else _lib.RCKPT_PCR_JPEG,
                         self.threads, self.prefetch, self.scale)
        rc = lib.rckpt_pcr_open(h, ctypes.byref(d), dataset.encode(), ctypes.byref(o))
        if rc < 0:
            msg = lib.rckpt_errmsg(h).decode(errors="replace")
            lib.rckpt_destroy(h)
            if self.fidelity and "scan groups" in msg:
                msg = "fidelity=%d: %s" % (self.fidelity, msg)
            raise _lib.RckptError(rc, msg)
        return h, d

    def get(self):
        """The open rckpt_pcr_t of this process, opened here if need be."""
        me = os.getpid()
        if self.pid != me or self.d is None:
            # a parent's handles (after fork) are not ours to use or free
            self.h = self.d = None
            self.pid = None
            self.h, self.d = _in_fresh_thread(self._open_here)
            self.pid = me
            if self._tracked != me:  # first in this process
                _lib.track(self)
                self._tracked = me
                self.opened = 0
            self.opened += 1
        return self.d

    def close(self):
        if self.h is not None and self.pid == os.getpid():
            lib.rckpt_pcr_close(self.d)  # waits for its reads in flight
            lib.rckpt_destroy(self.h)
        self.h = self.d = None
        self.pid = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def attempt(self, read, what):
        """read(d) on this process's handle; a read that fails for its
        connection (CONNECTION_ERRORS, opening included) is made again on
        a fresh one up to `retries` times. what(d) names what was read
        (d: the handle it failed on, or None) for the error."""
        tries = 0
        while True:
            try:
                return read(self.get())
            except _lib.RckptError as e:
                self.failed(e, tries, what)
                tries += 1

    def failed(self, e, tries, what):
        """After read `tries` (0: the first) failed with e: re-raises e
        when its connection is not at fault; else drops the connection
        (the next get() opens a fresh one), and raises when no retry is
        left, naming the dataset, what(d) and the cause."""
        if e.code not in CONNECTION_ERRORS:
            raise e
        try:
            where = what(self.d if self.pid == os.getpid() else None)
        except Exception:
            where = what(None)
        self.close()
        if tries >= self.retries:
            again = " %d times, each on a fresh connection" % (tries + 1) if tries else ""
            raise _lib.RckptError(e.code, "PCR dataset %r: %s failed%s (timeout_s %d, retries %d): %s"
                                  % (self.name, where, again, self.timeout_s or 30, self.retries,
                                     e.strerror or e)) from e

    def lookup(self, d, i):
        """(record, label bytes or None) of image i, from the index."""
        rec = ctypes.c_uint32()
        p = _lib.c_voidp()
        n = _lib.c_size()
        check(lib.rckpt_pcr_lookup(d, i, ctypes.byref(rec), ctypes.byref(p), ctypes.byref(n)), self.h)
        return rec.value, (ctypes.string_at(p.value, n.value) if n.value else None)

    def scan_labels(self, d, images, int_labels):
        """Whether labels come back as ints: int_labels (None: when every
        image of the table has an integer label)."""
        if int_labels is False:
            return False
        p = _lib.c_voidp()
        n = _lib.c_size()
        f, rp, np_ = lib.rckpt_pcr_lookup, ctypes.byref(p), ctypes.byref(n)
        bad = None if images else 0
        for i in range(images):  # ~1 us an image; only an integer-labelled dataset reads it all
            if f(d, i, None, rp, np_) < 0 or not n.value or \
                    not _INT_LABEL.match(ctypes.string_at(p.value, n.value)):
                bad = i
                break
        if int_labels and bad is not None:
            raise ValueError("int_labels=True: the label of image %d of dataset %r is not an integer"
                             % (bad, self.name))
        return bad is None

    def images(self, b):
        """(image, label, name, id) for every image of batch b; frees b."""
        out = []
        try:
            for i in range(lib.rckpt_pcr_batch_count(b)):
                im = _lib.PcrImage()
                check(lib.rckpt_pcr_batch_image(b, i, ctypes.byref(im)), None)
                label = ctypes.string_at(im.label, im.label_len) if im.label_len else None
                if label is not None:
                    label = int(label) if self.int_labels else _decode_label(label)
                if self.rgb:
                    x = torch.empty((im.height, im.width, 3), dtype=torch.uint8)
                    ctypes.memmove(x.data_ptr(), im.rgb, im.width * im.height * 3)
                else:
                    x = ctypes.string_at(im.jpeg, im.jpeg_len)
                out.append((x, label, im.name.decode(errors="replace"), im.id))
        finally:
            lib.rckpt_pcr_batch_free(b)
        return out


def _ids_text(ids, r, d):
    """"images 3, 7 (records 0, 1)" of ids (records when d is open)."""
    shown = sorted(set(ids))
    text = "image%s %s%s" % ("" if len(shown) == 1 else "s", ", ".join(str(i) for i in shown[:8]),
                              ", ..." if len(shown) > 8 else "")
    if d is not None:
        recs = sorted({r.lookup(d, i)[0] for i in shown})
        text += " (record%s %s%s)" % ("" if len(recs) == 1 else "s",
                                      ", ".join(str(x) for x in recs[:8]),
                                      ", ..." if len(recs) > 8 else "")
    return "reading " + text


def _open_info(r, int_labels):
    """The dataset's PcrInfo, and whether its labels are ints: read on a
    connection made for it and let go (the process that reads connects
    when it reads)."""
    def read(d):
        info = _lib.PcrInfo()
        check(lib.rckpt_pcr_info(d, ctypes.byref(info)), r.h)
        return info, r.scan_labels(d, info.images, int_labels)
    try:
        return r.attempt(read, lambda d: "reading the index")
    finally:
        r.close()


class PCRDataset(_Items, torch.utils.data.Dataset):
    """Map-style: dataset[i] is (image, label) of image i at `fidelity`
    groups, gathered in the OSD. image: an HxWx3 uint8 tensor (decode=True)
    or the JPEG's bytes; label: the label (an int when the dataset's
    labels are all integers, else a str when it is UTF-8; the module's
    doc).

    Without size=, decoded images keep their own sizes and the default
    collate cannot stack a batch of them: the DataLoader then fails with
    a ValueError that says so. size=(H, W) (or an int, square) makes every
    image HxWx3 so that the default collate stacks them: fit="resize" scales it (bilinear,
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
    the module's doc.

    DataLoader workers (fork, spawn or forkserver) each connect on their
    first read; timeout_s (None: 30 s) bounds each read, and a read that
    fails for its connection is made again on a fresh one up to retries
    times (the module's doc). Picklable: the parameters travel, not the
    connection."""

    def __init__(self, dataset, pool="rckpt", conf=None, user=None, fidelity=None,
                 decode=True, transform=None, target_transform=None, threads=0,
                 size=None, fit="resize", scale=None, timeout_s=None, retries=2,
                 int_labels=None):
        sc = _scale_of(scale, decode)
        self._items_init(decode, size, fit, transform, target_transform)
        self._r = _Reader(dataset, pool, conf, user, fidelity, decode, threads, 0, sc,
                          timeout_s, retries)
        self.info, self._r.int_labels = _open_info(self._r, int_labels)
        self._ex = self._ex_pid = None
        self._ahead = self._next = None

    def __getstate__(self):
        st = dict(self.__dict__)
        st["_ex"] = st["_ex_pid"] = st["_ahead"] = st["_next"] = None
        return st

    def __len__(self):
        return self.info.images

    # ids read and decoded per call in get_batch's pipeline: a part's
    # decode overlaps the previous part's resize and transform
    PART = 8

    def _fetch(self, ids):
        arr = (ctypes.c_uint32 * len(ids))(*ids)
        r = self._r

        def read(d):
            b = _lib.c_voidp()
            check(lib.rckpt_pcr_fetch(d, arr, len(ids), ctypes.byref(b)), r.h)
            return r.images(b)
        return r.attempt(read, lambda d: _ids_text(ids, r, d))

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
        self._guard_collate()
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
        generator), batches stacked by collate() (the default collate,
        with a clear error for images of different sizes) unless
        collate_fn is given. Other keywords (num_workers, pin_memory, ...)
        go to the DataLoader; with workers, persistent_workers defaults to
        True (spawned workers otherwise start again every epoch, ~0.85 s
        each time on docs/datasets.md's run)."""
        data = torch.utils.data
        base = (data.RandomSampler(self, generator=generator) if shuffle
                else data.SequentialSampler(self))
        batches = data.BatchSampler(base, batch_size, drop_last)
        if not kwargs.get("num_workers"):  # one process: read each next batch ahead
            batches = _AheadSampler(self, batches)
        else:  # workers that live across epochs: no start-up per epoch
            kwargs.setdefault("persistent_workers", True)
        kwargs.setdefault("collate_fn", _Collate("PCRDataset %r" % self._r.name))
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
    default collate then stacks batches; without size= a batch of images
    of different sizes fails with a ValueError that says so); transform
    and target_transform apply after that. scale=, labels, timeout_s,
    retries and connections as in the module's doc: a record whose read
    fails for its connection is read again on a fresh one, and the pass
    goes on from that record (none is given twice)."""

    def __init__(self, dataset, pool="rckpt", conf=None, user=None, fidelity=None,
                 decode=True, transform=None, target_transform=None, threads=0, prefetch=2,
                 shuffle=False, seed=0, shuffle_buffer=1024, size=None, fit="resize",
                 scale=None, timeout_s=None, retries=2, int_labels=None):
        if shuffle_buffer < 1:
            raise ValueError("shuffle_buffer must be at least 1")
        sc = _scale_of(scale, decode)
        self._items_init(decode, size, fit, transform, target_transform)
        self._r = _Reader(dataset, pool, conf, user, fidelity, decode, threads, prefetch, sc,
                          timeout_s, retries)
        self.info, self._r.int_labels = _open_info(self._r, int_labels)
        self.fidelity = self._r.fidelity
        self.shuffle = shuffle
        self.seed = seed
        self.shuffle_buffer = shuffle_buffer
        self.epoch = 0

    def set_fidelity(self, fidelity):
        f = _fidelity_of(fidelity)
        if f is not None and f > self.info.groups:
            raise ValueError("fidelity %d: dataset %s has %d scan groups (1..%d, or None for every one)"
                             % (f, self._r.name, self.info.groups, self.info.groups))
        self.fidelity = f

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

    def _images(self, records):
        """(image, label) of records, in that order; where a read fails for
        its connection, the records not yet given are read again on a
        fresh connection (_Reader.attempt's rule)."""
        r = self._r
        k = self.fidelity or _lib.RCKPT_PCR_ALL
        done = tries = 0  # records given; failed tries of the record at `done`
        while done < len(records):
            try:
                d = r.get()
                left = records[done:]
                arr = (ctypes.c_uint32 * len(left))(*left)
                check(lib.rckpt_pcr_rewind_records(d, k, arr, len(left)), r.h)
                while True:
                    b = _lib.c_voidp()
                    check(lib.rckpt_pcr_next(d, ctypes.byref(b)), r.h)
                    if not b:
                        return
                    items = r.images(b)
                    done += 1
                    tries = 0
                    for x, y, _, _ in items:
                        yield x, y
            except _lib.RckptError as e:
                r.failed(e, tries, lambda d: "reading record %d" % records[done])
                tries += 1

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
        self._guard_collate()
        wi = torch.utils.data.get_worker_info()
        w, n = (wi.id, wi.num_workers) if wi else (0, 1)
        images = self._images(self.records(w, n))
        if self.shuffle and self.shuffle_buffer > 1:
            images = self._shuffled(images, w)
        for x, y in images:
            yield self._apply(x, y)

    def read_stats(self):
        """Bytes and reads of this process's connection (since it opened)."""
        s = _lib.PcrReadStats()
        check(lib.rckpt_pcr_read_stats(self._r.get(), ctypes.byref(s)), self._r.h)
        return {"wire_bytes": s.wire_bytes, "reads": s.reads, "images": s.images}

    def close(self):
        self._r.close()


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
    from ._distributed import PCRDistributedLoader  # it imports this module: here, not at the top
    if self._r.scale:
        raise ValueError("distributed() decodes at full size: open the dataset without scale=")
    return PCRDistributedLoader(self, local_batch, seed, locality, cache_bytes, group, collate, threads)


PCRDataset.distributed = _distributed
