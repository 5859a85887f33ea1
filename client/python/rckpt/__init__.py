"""rckpt: compressed checkpoints and progressive training data on Ceph,
for PyTorch trainers. A thin layer over librckpt (ctypes); see
docs/python.md.

    import rckpt
    ck = rckpt.Checkpointer(pool="rckpt", job="resnet-run-7")
    last = ck.load_latest(model=model, optimizer=opt, scheduler=sched, state=state)
    for step in range(0 if last is None else last + 1, steps):
        ...
        ck.save(step, model=model, optimizer=opt, scheduler=sched, state=state)
    ck.close()                                             # raises if a save failed
"""
from ._lib import VERSION as __version__
from ._lib import RckptError, gpu_info, version
from .checkpoint import Checkpointer, GradientEMA, Restored, SaveHandle, SaveResult, Shard, StepInfo
from .pcr import PCRDataset, PCRIterableDataset
from .policy import Policy, interval

__all__ = ["Checkpointer", "GradientEMA", "Shard", "PCRDataset", "PCRIterableDataset", "RckptError",
           "Policy", "Restored", "SaveHandle", "SaveResult", "StepInfo", "gpu_info", "interval",
           "version"]
