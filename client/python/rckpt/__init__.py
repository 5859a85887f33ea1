"""rckpt: compressed checkpoints and progressive training data on Ceph,
for PyTorch trainers. A thin layer over librckpt (ctypes); see the
project's README, "From Python".

    import rckpt
    ck = rckpt.Checkpointer(pool="rckpt", job="resnet-run-7")
    h = ck.save(step, model.state_dict(), optimizer=opt)   # returns at once
    ...
    ck.restore_into(model, optimizer=opt)                  # the latest step
"""
from ._lib import VERSION as __version__
from ._lib import RckptError, gpu_info, version
from .checkpoint import Checkpointer, GradientEMA, Restored, SaveHandle, SaveResult, Shard, StepInfo
from .pcr import PCRDataset, PCRIterableDataset
from .policy import Policy, interval

__all__ = ["Checkpointer", "GradientEMA", "Shard", "PCRDataset", "PCRIterableDataset", "RckptError",
           "Policy", "Restored", "SaveHandle", "SaveResult", "StepInfo", "gpu_info", "interval",
           "version"]
