"""The adaptive checkpoint policy for preemptible machines (librckpt's
rckpt_policy_*): Daly's interval from the measured save, restart and step
times and the mean time to preemption learned from the pool's history;
insurance saves when no emergency save would fit the grace period;
emergency saves on a preemption notice (SIGTERM, a file appearing, or a
command exiting 0).

    pol = rckpt.Policy(ck, grace_s=30, signals=(signal.SIGTERM,))
    for step in range(start, steps):
        with pol.step(step):
            train_step()
        d = pol.should_save(step)
        if d:                      # "save", "insurance" or "emergency"
            pol.save(step, model.state_dict(), optimizer=opt)
        if pol.stopping:           # after an emergency save, or no time for one
            break
"""
import contextlib
import signal as _signal
import time

from . import _lib
from ._lib import check, lib

DECISIONS = {0: None, 1: "save", 2: "insurance", 3: "emergency", 4: "stop"}


def interval(delta, mttp, restart=0.0):
    """Daly's higher-order optimum interval (seconds) for save time delta,
    mean time to preemption mttp and restart time restart."""
    return lib.rckpt_policy_interval(delta, mttp, restart)


class Policy:
    """The policy of a Checkpointer's job (see the module's text)."""

    def __init__(self, checkpointer, grace_s=30.0, beta_s=1.0, default_mttp_s=3600.0,
                 min_interval_s=0.0, notice_file=None, notice_cmd=None, poll_s=1.0,
                 signals=(_signal.SIGTERM,), history=64):
        self.ck = checkpointer
        o = _lib.PolicyOpts(1, grace_s, beta_s, default_mttp_s, min_interval_s,
                            notice_file.encode() if notice_file else None,
                            notice_cmd.encode() if notice_cmd else None, poll_s, history)
        self._p = _lib.c_voidp()
        with checkpointer._lock:
            check(lib.rckpt_policy_open(checkpointer._j, _lib.ctypes.byref(self._p),
                                        _lib.ctypes.byref(o)), checkpointer._h)
        self.stopping = False
        self.last_decision = None
        self.notice_time = None
        self._old = {}
        for s in signals or ():
            self._old[s] = _signal.signal(s, self._on_signal)

    def _on_signal(self, signum, frame):
        if self.notice_time is None:
            self.notice_time = time.time()
        lib.rckpt_policy_notify(self._p)

    def notify(self):
        """A preemption notice from elsewhere (e.g. a cloud metadata poller)."""
        self._on_signal(None, None)

    @contextlib.contextmanager
    def step(self, step):
        """Times one training step."""
        t0 = time.perf_counter()
        yield
        lib.rckpt_policy_step_time(self._p, time.perf_counter() - t0)

    def should_save(self, step):
        """None, "save", "insurance" or "emergency" after step `step`; sets
        `stopping` on a notice (after the emergency save, or when none fits)."""
        d = DECISIONS[lib.rckpt_policy_should_save(self._p, step)]
        self.last_decision = d
        if d == "stop":
            self.stopping = True
            return None
        return d

    def save(self, step, state_dict, **kw):
        """Checkpointer.save(...).wait(), timed for the policy; after an
        emergency save, `stopping` is set. Returns the SaveResult."""
        t0 = time.perf_counter()
        r = self.ck.save(step, state_dict, **kw).wait()
        lib.rckpt_policy_save_time(self._p, time.perf_counter() - t0)
        lib.rckpt_policy_saved(self._p, step)
        if self.last_decision == "emergency":
            self.stopping = True
        return r

    def restarted(self, seconds):
        """The restart time of this run (from the preemption to its first
        step after the restore): stored with the last preemption."""
        check(lib.rckpt_policy_restart_time(self._p, seconds), self.ck._h)

    def info(self):
        i = _lib.PolicyInfo()
        lib.rckpt_policy_info(self._p, _lib.ctypes.byref(i))
        return {k: getattr(i, k) for k, _ in i._fields_}

    def close(self):
        for s, h in self._old.items():
            _signal.signal(s, h)
        self._old = {}
        if self._p:
            lib.rckpt_policy_close(self._p)
            self._p = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
