"""GradientEMA: the gradient RMS the compressor weighs values by."""
from ._tree import _DTYPES


class GradientEMA:
    """The gradient statistics the compressor weighs values by: per
    parameter, the root mean square of its recent mini-batch gradients,
    sqrt(EMA of grad**2), a diagonal Fisher estimate. The compressor's
    quality measure weighs each value's error by its square (a second-order
    estimate of the loss the error costs) and ranks values by |w| * rms for
    pruning and protection.

    Hooks on every parameter fold each backward's gradient in while
    `enabled` is true: s <- beta*s + (1-beta)*grad**2. Enable it for the
    last few batches before a checkpoint (window) so it costs nothing the
    rest of the time; track(step, every, window) does that from a step
    counter. Pass the object itself as save(..., grads=ema).

    A trainer using Adam or AdamW needs none: save(..., optimizer=opt)
    takes the same statistics from the optimizer's exp_avg_sq."""

    def __init__(self, module, beta=0.9):
        if not 0 <= beta < 1:
            raise ValueError("beta must be in [0, 1)")
        self.beta = beta
        self.enabled = False
        self._ema = {}
        self._handles = []
        for name, p in module.named_parameters():
            if p.requires_grad and p.dtype in _DTYPES:
                self._handles.append(p.register_hook(self._fold(name)))

    def _fold(self, name):
        def hook(grad):
            if self.enabled:
                g = grad.detach().float()
                e = self._ema.get(name)
                if e is None or e.shape != g.shape or e.device != g.device:
                    self._ema[name] = g * g
                else:
                    e.mul_(self.beta).addcmul_(g, g, value=1 - self.beta)
            return None
        return hook

    def track(self, step, every, window=8):
        """Enables the EMA for the `window` steps before each multiple of
        `every` (the steps whose gradients a save at that multiple uses)."""
        self.enabled = (step % every) >= every - window or (step % every) == 0
        return self.enabled

    def state(self):
        """name -> fp32 gradient RMS tensor, for the parameters that have one."""
        return {k: v.sqrt() for k, v in self._ema.items()}

    def remove(self):
        for h in self._handles:
            h.remove()
        self._handles = []
