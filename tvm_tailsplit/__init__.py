"""tvm-tailsplit: TVM 0.27 passes and generators for irregular tiles.

- ``TailSplit``: split loop ranges by the guards below ``pragma_emit_insn`` marks so that tensorize applies;
  ``tensorize_marked`` / ``TensorizeMarked`` then tensorize the main and tail tiles (``split`` holds the rest:
  ``split.analysis``, ``split.intrinsics``, ``split.workloads``, ``split.examples``).
- ``WarpSpecialize``: producer/consumer warp specialization of blocks annotated ``warp_role`` (llvm threads +
  atomics, CUDA mbarriers / named barriers); ``warpspec.analyze`` / ``warpspec.check``.
- ``fft``: an FFT operator generator (formula tree, derived codelets, TIR for llvm and CUDA) with numpy-like
  ``fft.plan`` / ``fft.fft`` / ``fft.ifft`` / ``fft.rfft`` / ``fft.irfft``.

Layering (who may import whom): this facade imports the wings; a wing (``split``, ``fft``, ``warpspec``) imports
its own modules and the shared modules (``ir_utils``, ``cuda``, ``testing``), never another wing or the facade;
``ir_utils`` imports nothing of the package, ``cuda`` and ``testing`` import ``ir_utils`` at most.
"""

from . import fft, split, warpspec
from .split import MARK_KEY, TailSplit, TensorizeMarked, register_tail_intrinsics, tensorize_marked
from .warpspec import WarpSpecialize

__all__ = [
    "MARK_KEY",
    "TailSplit",
    "TensorizeMarked",
    "WarpSpecialize",
    "fft",
    "register_tail_intrinsics",
    "split",
    "tensorize_marked",
    "warpspec",
]
__version__ = "0.1.0"
