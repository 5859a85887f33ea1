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
    fidelity may change between epochs (set_fidelity). With DataLoader
    workers, worker w of n takes records w, w+n, ... (each reads whole
    records, so the order interleaves by record)."""

    def __init__(self, dataset, pool="rckpt", conf=None, user=None, fidelity=None,
                 decode=True, transform=None, target_transform=None, threads=0, prefetch=2):
        self._r = _Reader(dataset, pool, conf, user, fidelity, decode, threads, prefetch)
        info = _lib.PcrInfo()
        check(lib.rckpt_pcr_info(self._r.d, ctypes.byref(info)), self._r.h)
        self.info = info
        self.fidelity = fidelity
        self.transform = transform
        self.target_transform = target_transform

    def set_fidelity(self, fidelity):
        self.fidelity = fidelity

    def __len__(self):
        return self.info.images

    def __iter__(self):
        d = self._r.get()
        wi = torch.utils.data.get_worker_info()
        w, n = (wi.id, wi.num_workers) if wi else (0, 1)
        check(lib.rckpt_pcr_rewind(d, self.fidelity or _lib.RCKPT_PCR_ALL), self._r.h)
        rec = 0
        while True:
            b = _lib.c_voidp()
            check(lib.rckpt_pcr_next(d, ctypes.byref(b)), self._r.h)
            if not b:
                return
            mine = rec % n == w
            rec += 1
            if not mine:
                lib.rckpt_pcr_batch_free(b)
                continue
            for x, y, _, _ in self._r.images(b):
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
