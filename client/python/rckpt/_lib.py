"""ctypes declarations of librckpt's public interface (client/include/rckpt.h).

Internal to the package: the classes in checkpoint.py and pcr.py are the
API. The structures here mirror the header field for field; a change there
changes them here (tests/python checks a round trip through every one).
"""
import atexit
import ctypes
import ctypes.util
import errno
import os
import threading
import weakref

RCKPT_F32, RCKPT_F16, RCKPT_BF16 = 1, 2, 3
RCKPT_MAX_DIMS = 8
RCKPT_LATEST = 2**64 - 1
RCKPT_COMPUTE = {"auto": 0, "cpu": 1, "gpu": 2}
RCKPT_TAKEOVER = {"auto": 0, False: 1, True: 2}  # enum rckpt_takeover
RCKPT_PCR_ALL = 0
RCKPT_PCR_JPEG, RCKPT_PCR_RGB = 0, 1
RCKPT_PCR_GROUPS_MAX = 64

c_u64 = ctypes.c_uint64
c_uint = ctypes.c_uint
c_int = ctypes.c_int
c_double = ctypes.c_double
c_size = ctypes.c_size_t
c_voidp = ctypes.c_void_p
c_charp = ctypes.c_char_p


class Tensor(ctypes.Structure):
    _fields_ = [("name", c_charp), ("dtype", c_uint), ("ndim", c_uint),
                ("shape", c_u64 * RCKPT_MAX_DIMS), ("data", c_voidp)]


QUALITY_CB = ctypes.CFUNCTYPE(c_int, c_voidp, ctypes.POINTER(Tensor), c_uint,
                              ctypes.POINTER(c_double))


class ConnectOpts(ctypes.Structure):
    _fields_ = [("version", c_uint), ("conf_path", c_charp), ("user", c_charp),
                ("pool", c_charp), ("timeout_s", c_uint), ("read_from", c_uint)]

READ_FROM = {"balance": 0, "primary": 1, "localize": 2}  # RCKPT_READ_*


class JobOpts(ctypes.Structure):
    _fields_ = [("version", c_uint), ("writer", c_int), ("eps", c_double),
                ("chunk_params", c_u64), ("base_every", c_uint), ("lease_s", c_uint),
                ("inflight", c_uint), ("mem_budget", c_u64), ("compute", c_uint),
                ("quality", QUALITY_CB), ("quality_arg", c_voidp), ("quality_eps", c_double),
                ("partial_block", ctypes.c_uint32), ("segment_bytes", c_u64), ("exact", c_int),
                ("opt_eps", c_double), ("threads", c_uint), ("takeover", c_int),
                ("wait_s", c_uint), ("compact_every", c_uint), ("no_heads", c_int)]


class SaveStats(ctypes.Structure):
    _fields_ = [("raw_bytes", c_u64), ("enc_bytes", c_u64), ("nchunks", c_uint),
                ("is_base", c_int), ("quality", c_double), ("t_encode", c_double),
                ("t_write", c_double), ("is_partial", c_int), ("blocks", c_u64),
                ("blocks_saved", c_u64), ("opt_quality", c_double), ("opt_raw_bytes", c_u64),
                ("opt_enc_bytes", c_u64), ("head_bytes", c_u64)]


class TensorRole(ctypes.Structure):
    _fields_ = [("name", c_charp), ("role", c_uint), ("param", c_charp), ("eps", c_double)]


RCKPT_ROLE = {"model": 0, "moment1": 1, "moment2": 2, "optim": 3}


class Partial(ctypes.Structure):
    _fields_ = [("fraction", c_double), ("select", c_uint), ("seed", c_u64)]


class Range(ctypes.Structure):
    _fields_ = [("name", c_charp), ("first", c_u64), ("count", c_u64)]


class PolicyOpts(ctypes.Structure):
    _fields_ = [("version", c_uint), ("grace_s", c_double), ("beta_s", c_double),
                ("default_mttp_s", c_double), ("min_interval_s", c_double),
                ("notice_file", c_charp), ("notice_cmd", c_charp), ("poll_s", c_double),
                ("history", c_uint)]


class PolicyInfo(ctypes.Structure):
    _fields_ = [("mttp_s", c_double), ("preemptions", c_uint), ("job_preemptions", c_uint),
                ("save_s", c_double), ("restart_s", c_double), ("step_s", c_double),
                ("interval_s", c_double), ("emergency_fits", c_int), ("noticed", c_int),
                ("notice_age_s", c_double)]


RCKPT_SELECT = {"priority": 0, "round_robin": 1, "random": 2}


class RestoreStats(ctypes.Structure):
    _fields_ = [("wire_bytes", c_u64), ("calls", c_uint), ("seconds", c_double), ("t_locate", c_double),
                ("t_fetch", c_double), ("t_decode", c_double), ("decode_cpu", c_double)]


class Shard(ctypes.Structure):
    _fields_ = [("name", c_charp), ("dtype", c_uint), ("ndim", c_uint),
                ("shape", c_u64 * RCKPT_MAX_DIMS), ("offset", c_u64), ("count", c_u64),
                ("data", c_voidp)]


class StepInfo(ctypes.Structure):
    _fields_ = [("step", c_u64), ("parent", c_u64), ("raw_bytes", c_u64),
                ("enc_bytes", c_u64), ("nchunks", c_uint), ("flags", c_uint), ("ranks", c_uint),
                ("opt_raw_bytes", c_u64), ("opt_enc_bytes", c_u64)]


class GpuInfo(ctypes.Structure):
    _fields_ = [("built_with_cuda", c_int), ("runtime_version", c_int),
                ("driver_version", c_int), ("device_count", c_int),
                ("device_name", ctypes.c_char * 128)]


class PcrOpts(ctypes.Structure):
    """rckpt_pcr_opts_t, version 1."""
    _fields_ = [("version", c_uint), ("groups", c_uint), ("output", c_uint),
                ("threads", c_uint), ("prefetch", c_uint), ("scale", c_uint)]


class PcrInfo(ctypes.Structure):
    _fields_ = [("records", ctypes.c_uint32), ("images", ctypes.c_uint32), ("groups", c_uint),
                ("fidelity_sample", ctypes.c_uint32), ("created", c_u64),
                ("source_bytes", c_u64), ("head_bytes", c_u64),
                ("group_bytes", c_u64 * RCKPT_PCR_GROUPS_MAX),
                ("group_images", ctypes.c_uint32 * RCKPT_PCR_GROUPS_MAX),
                ("mssim", c_double * RCKPT_PCR_GROUPS_MAX)]


class PcrImage(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint32), ("name", c_charp), ("label", c_voidp),
                ("label_len", c_size), ("jpeg", c_voidp), ("jpeg_len", c_size),
                ("rgb", c_voidp), ("width", c_uint), ("height", c_uint)]


class PcrReadStats(ctypes.Structure):
    _fields_ = [("wire_bytes", c_u64), ("reads", c_u64), ("images", c_u64)]


LOC_SEND = ctypes.CFUNCTYPE(c_int, c_voidp, c_uint, c_voidp, c_size)
LOC_RECV = ctypes.CFUNCTYPE(c_int, c_voidp, c_uint, c_voidp, c_size)


class LocTransport(ctypes.Structure):
    _fields_ = [("ctx", c_voidp), ("rank", c_uint), ("size", c_uint),
                ("send", LOC_SEND), ("recv", LOC_RECV)]


RCKPT_LOADER_REGULAR, RCKPT_LOADER_LOCALITY = 0, 1


class LoaderOpts(ctypes.Structure):
    _fields_ = [("version", c_uint), ("mode", c_uint), ("local_batch", ctypes.c_uint32),
                ("seed", c_u64), ("cache_bytes", c_u64), ("groups", c_uint),
                ("output", c_uint), ("threads", c_uint)]


class LoaderStats(ctypes.Structure):
    _fields_ = [("storage_bytes", c_u64), ("storage_samples", c_u64), ("cache_hits", c_u64),
                ("sent_samples", c_u64), ("sent_bytes", c_u64),
                ("recv_samples", c_u64), ("recv_bytes", c_u64),
                ("cached_samples", c_u64), ("cached_bytes", c_u64)]


# The package's version: the library's it was made with (client/include/
# rckpt.h RCKPT_VERSION_*), checked against the library loaded.
VERSION = "0.1.0"
ABI_VERSION = 0  # librckpt.so.ABI_VERSION


def _candidates():
    env = os.environ.get("RCKPT_LIBRARY")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    # a source checkout (client/python/rckpt): its build trees' library
    root = os.path.normpath(os.path.join(here, "..", "..", ".."))
    if os.path.isfile(os.path.join(root, "client", "include", "rckpt.h")):
        for b in ("build", "build-asan"):
            yield os.path.join(root, b, "client", "librckpt.so")
    # installed (python3-rckpt with librckpt0): the loader's search path
    yield "librckpt.so.%d" % ABI_VERSION


def _load():
    tried = []
    for path in _candidates():
        if os.path.sep in path and not os.path.exists(path):
            tried.append(path + " (missing)")
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError("rckpt: cannot load librckpt; install librckpt%d, build it (./dev.sh build) or "
                      "set RCKPT_LIBRARY to its path. Tried: %s" % (ABI_VERSION, "; ".join(tried)))


def _check_version(lib):
    lib.rckpt_version_number.restype = c_uint
    lib.rckpt_version_number.argtypes = []
    major, minor, patch = (int(x) for x in VERSION.split("."))
    want, got = major * 10000 + minor * 100 + patch, lib.rckpt_version_number()
    if got != want:
        raise ImportError("rckpt: this package is version %s but the library loaded (%s) is %d.%d.%d: "
                          "install the same version of both" %
                          (VERSION, lib._name, got // 10000, got // 100 % 100, got % 100))
    return lib


lib = _check_version(_load())

P = ctypes.POINTER
_sigs = {
    "rckpt_version_string": (c_charp, []),
    "rckpt_strerror": (c_charp, [c_int]),
    "rckpt_create": (c_int, [P(c_voidp)]),
    "rckpt_connect": (c_int, [c_voidp, P(ConnectOpts)]),
    "rckpt_destroy": (None, [c_voidp]),
    "rckpt_errmsg": (c_charp, [c_voidp]),
    "rckpt_pool_name": (c_charp, [c_voidp]),
    "rckpt_job_open": (c_int, [c_voidp, P(c_voidp), c_charp, P(JobOpts)]),
    "rckpt_job_close": (None, [c_voidp]),
    "rckpt_job_release": (c_int, [c_voidp]),
    "rckpt_job_head": (c_int, [c_voidp, P(c_u64)]),
    "rckpt_job_attach": (c_int, [c_voidp, c_voidp, c_size]),
    "rckpt_job_save_async": (c_int, [c_voidp, c_u64, P(Tensor), c_uint, P(Tensor), c_uint,
                                     P(c_voidp)]),
    "rckpt_job_save_partial_async": (c_int, [c_voidp, c_u64, P(Tensor), c_uint, P(Tensor), c_uint,
                                             P(Partial), P(c_voidp)]),
    "rckpt_save_wait": (c_int, [c_voidp, P(SaveStats)]),
    "rckpt_job_restore_ranges": (c_int, [c_voidp, c_u64, P(Range), c_uint, P(c_voidp),
                                         P(RestoreStats)]),
    "rckpt_restored_read_range": (c_int, [c_voidp, c_uint, c_u64, c_u64, c_voidp]),
    "rckpt_restored_find": (c_int, [c_voidp, c_charp]),
    "rckpt_job_restore_tensors": (c_int, [c_voidp, c_u64, P(c_charp), c_uint, P(c_voidp),
                                          P(RestoreStats)]),
    "rckpt_restored_step": (c_u64, [c_voidp]),
    "rckpt_restored_count": (c_uint, [c_voidp]),
    "rckpt_restored_tensor": (c_int, [c_voidp, c_uint, P(Tensor)]),
    "rckpt_restored_read": (c_int, [c_voidp, c_uint, c_voidp, c_size]),
    "rckpt_restored_read_device": (c_int, [c_voidp, c_uint, c_voidp, c_size]),
    "rckpt_restored_read_many": (c_int, [c_voidp, c_uint, P(c_uint), P(c_voidp), P(c_size), P(c_int),
                                         c_uint]),
    "rckpt_restored_attachment": (c_int, [c_voidp, P(c_voidp), P(c_size)]),
    "rckpt_restored_free": (None, [c_voidp]),
    "rckpt_job_set_exact": (c_int, [c_voidp, c_int]),
    "rckpt_job_set_eps": (c_int, [c_voidp, c_double, c_double]),
    "rckpt_job_restores": (c_int, [c_voidp, P(c_u64), P(c_u64)]),
    "rckpt_job_set_roles": (c_int, [c_voidp, P(TensorRole), c_uint]),
    "rckpt_restored_role": (c_int, [c_voidp, c_uint]),
    "rckpt_group_open": (c_int, [c_voidp, P(c_voidp), c_charp, P(JobOpts), P(LocTransport)]),
    "rckpt_group_save": (c_int, [c_voidp, c_u64, P(Shard), c_uint, P(SaveStats)]),
    "rckpt_group_attach": (c_int, [c_voidp, c_charp, c_size]),
    "rckpt_group_set_exact": (c_int, [c_voidp, c_int]),
    "rckpt_group_close": (None, [c_voidp]),
    "rckpt_restored_exact": (c_int, [c_voidp]),
    "rckpt_job_pin": (c_int, [c_voidp, c_u64, c_int]),
    "rckpt_job_pinned": (c_int, [c_voidp, c_u64]),
    "rckpt_job_steps": (c_int, [c_voidp, c_u64, P(StepInfo), c_uint, P(c_uint), P(c_int)]),
    "rckpt_job_delete": (c_int, [c_voidp, c_charp]),
    "rckpt_job_rewind": (c_int, [c_voidp, c_u64, c_charp]),
    "rckpt_job_branch": (c_int, [c_voidp, c_u64, c_u64, c_charp]),
    "rckpt_job_folds_here": (c_int, [c_voidp, c_charp, c_size]),
    "rckpt_gpu_info": (c_int, [P(GpuInfo)]),
    "rckpt_policy_interval": (c_double, [c_double, c_double, c_double]),
    "rckpt_policy_open": (c_int, [c_voidp, P(c_voidp), P(PolicyOpts)]),
    "rckpt_policy_close": (None, [c_voidp]),
    "rckpt_policy_step_time": (None, [c_voidp, c_double]),
    "rckpt_policy_save_time": (None, [c_voidp, c_double]),
    "rckpt_policy_restart_time": (c_int, [c_voidp, c_double]),
    "rckpt_policy_notify": (None, [c_voidp]),
    "rckpt_policy_should_save": (c_int, [c_voidp, c_u64]),
    "rckpt_policy_saved": (None, [c_voidp, c_u64]),
    "rckpt_policy_info": (c_int, [c_voidp, P(PolicyInfo)]),
    "rckpt_pcr_open": (c_int, [c_voidp, P(c_voidp), c_charp, P(PcrOpts)]),
    "rckpt_pcr_close": (None, [c_voidp]),
    "rckpt_pcr_info": (c_int, [c_voidp, P(PcrInfo)]),
    "rckpt_pcr_rewind": (c_int, [c_voidp, c_uint]),
    "rckpt_pcr_rewind_records": (c_int, [c_voidp, c_uint, P(ctypes.c_uint32), ctypes.c_uint32]),
    "rckpt_pcr_next": (c_int, [c_voidp, P(c_voidp)]),
    "rckpt_pcr_fetch": (c_int, [c_voidp, P(ctypes.c_uint32), c_uint, P(c_voidp)]),
    "rckpt_pcr_batch_count": (c_uint, [c_voidp]),
    "rckpt_pcr_batch_image": (c_int, [c_voidp, c_uint, P(PcrImage)]),
    "rckpt_pcr_batch_free": (None, [c_voidp]),
    "rckpt_pcr_read_stats": (c_int, [c_voidp, P(PcrReadStats)]),
    "rckpt_loc_order": (c_int, [c_u64, c_u64, ctypes.c_uint32, P(ctypes.c_uint32)]),
    "rckpt_loader_open": (c_int, [c_voidp, P(c_voidp), c_charp, P(LocTransport), P(LoaderOpts)]),
    "rckpt_loader_close": (None, [c_voidp]),
    "rckpt_loader_epoch": (c_int, [c_voidp, c_u64, P(ctypes.c_uint32)]),
    "rckpt_loader_next": (c_int, [c_voidp, P(c_voidp)]),
    "rckpt_loader_seek": (c_int, [c_voidp, c_u64, ctypes.c_uint32, P(ctypes.c_uint32)]),
    "rckpt_loader_position": (c_int, [c_voidp, P(c_u64), P(ctypes.c_uint32)]),
    "rckpt_loader_stats": (c_int, [c_voidp, P(LoaderStats)]),
}
for _name, (_res, _args) in _sigs.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args


class RckptError(OSError):
    """A librckpt call failed: errno (negative code's magnitude), the code's
    name, and the library's message saying which call failed and why."""

    def __init__(self, code, message):
        self.code = code
        name = lib.rckpt_strerror(code).decode()
        if message and name not in message:
            message = "%s (%s)" % (message, name)
        super().__init__(-code if -code in errno.errorcode else errno.EIO, message or name)


def check(rc, h, what=None):
    """Raises RckptError for a negative rc, with h's message."""
    if rc < 0:
        msg = lib.rckpt_errmsg(h).decode(errors="replace") if h else ""
        raise RckptError(rc, msg or what)
    return rc


def version():
    return lib.rckpt_version_string().decode()


def gpu_info():
    g = GpuInfo()
    lib.rckpt_gpu_info(ctypes.byref(g))
    return g


# Every object of the binding that holds a connected handle registers here;
# at interpreter exit the ones still open are closed, newest first (a loader
# before the dataset it reads), before Python and the C runtime tear down.
# A handle left open until then keeps librados' threads running into the
# process's teardown, where they crashed (SIGSEGV in its timer thread): a
# trainer that forgets close() must still exit cleanly.
_open = []  # weak references, in creation order
_open_lock = threading.Lock()


def track(obj):
    """Registers obj (which has close()) to be closed at exit if still open,
    and notes the process that owns its handle (owner())."""
    obj._owner_pid = os.getpid()
    with _open_lock:
        _open[:] = [r for r in _open if r() is not None]
        _open.append(weakref.ref(obj))


def owner(obj):
    """Whether this process opened obj's handle. A forked child (a
    DataLoader worker) inherits its parent's handles without the librados
    threads behind them: closing one there waits for threads that do not
    exist, and its shutdown would write into the parent's OSD sessions. A
    child drops such a handle without calling into it."""
    return getattr(obj, "_owner_pid", None) == os.getpid()


@atexit.register
def _close_open():
    with _open_lock:
        objs = [r() for r in reversed(_open)]
        _open.clear()
    for o in objs:
        if o is not None:
            try:
                o.close()
            except Exception:  # exiting: nothing left to tell
                pass


def connect(conf=None, user=None, pool="rckpt", timeout_s=0, read_from="balance"):
    """A connected rckpt_t handle (an int); free with lib.rckpt_destroy.
    read_from: which copy of a replicated pool serves reads ("balance",
    "primary" or "localize")."""
    if read_from not in READ_FROM:
        raise ValueError("read_from must be one of %s, not %r" % (sorted(READ_FROM), read_from))
    h = c_voidp()
    check(lib.rckpt_create(ctypes.byref(h)), None, "rckpt_create: out of memory")
    o = ConnectOpts(1, conf.encode() if conf else None, user.encode() if user else None,
                    pool.encode() if pool else None, timeout_s, READ_FROM[read_from])
    rc = lib.rckpt_connect(h, ctypes.byref(o))
    if rc < 0:
        msg = lib.rckpt_errmsg(h).decode(errors="replace")
        lib.rckpt_destroy(h)
        raise RckptError(rc, msg)
    return h
