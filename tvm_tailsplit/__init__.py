"""tvm-tailsplit: TVM 0.27 passes and generators for irregular tiles.

- ``TailSplit``: split loop ranges by the guards below ``pragma_emit_insn`` marks so that tensorize applies.
- ``WarpSpecialize``: producer/consumer warp specialization of blocks annotated ``warp_role`` (llvm threads +
  atomics, CUDA mbarriers / named barriers); ``warpspec.analyze`` / ``warpspec.check``.
- ``fft``: an FFT operator generator (formula tree, derived codelets, TIR for llvm and CUDA) with numpy-like
  ``fft.plan`` / ``fft.fft`` / ``fft.ifft`` / ``fft.rfft`` / ``fft.irfft``.
- ``analysis``: instruction counts, conditions under marks, mapping-cost estimates.
"""

from . import analysis, fft, warpspec
from .split import MARK_KEY, TailSplit
from .split.tensorize import TensorizeMarked, register_tail_intrinsics, tensorize_marked
from .warpspec import WarpSpecialize

__all__ = [
    "MARK_KEY",
    "TailSplit",
    "TensorizeMarked",
    "WarpSpecialize",
    "analysis",
    "fft",
    "register_tail_intrinsics",
    "tensorize_marked",
    "warpspec",
]
__version__ = "0.1.0"
