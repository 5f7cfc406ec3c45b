"""FFT operator generator: from the size to a scheduled TIR operator for llvm and CUDA.

Data flow: (n, kind, dtype, target) → validated request (`spec.FFTSpec`, shared by `plan` and `te_fft`) →
prime factors and breakdown (`factor`) → formula tree (`formula`) → derived codelets for the leaves
(`codelet`) → passes over memory with folded stride permutations and twiddles (`passes`) → TIR template
(`template`) → schedule per target (`schedule`) → compiled plan (`plan`; on llvm through `lowering`'s
pipeline), or the same template as a stage of the caller's TE graph (`te_fft`; `fuse_consumers` computes its
element-wise consumers in the stores of its last pass). The choices the rules make
(breakdown limits, lanes, vectors, prefetch, tasks, CUDA threads and kernels) are one `variants.Variant`;
`plan(..., effort="measure" | "patient")` times variants on this machine (`search`) and remembers the winners
as wisdom (`wisdom`: `export_wisdom`, `import_wisdom`, `forget_wisdom`).
Every tuning constant is in `tuning` (measurements: bench/results/fft_tuning.md).
Compiled llvm plans and the searches' wisdom persist on disk (`cache`). n-D transforms are Relax graphs of 1-D
plans (`ndim.plan_nd`). numpy.fft / scipy.fft functions run on cached plans (`numpy_api`), and this module is a
scipy.fft backend (`scipy_backend`): `with scipy.fft.set_backend(tvm_tailsplit.fft): scipy.fft.fft(x)`. Dask
arrays: `dask_array` (fft_wrap with the generated operator per chunk; dask imported on use). FFT convolution
(`convolve`, `plan_convolve`): one pipeline whose product with the filter's spectrum is fused into the pass
that ends the forward transform and begins the inverse one.
"""

from . import dask_array
from .convolve import ConvolvePlan, convolve, plan_convolve
from .fusion import fuse_consumers
from .ndim import NDPlan, plan_nd
from .numpy_api import (
    fft,
    fft2,
    fftfreq,
    fftn,
    fftshift,
    hfft,
    hfft2,
    hfftn,
    ifft,
    ifft2,
    ifftn,
    ifftshift,
    ihfft,
    ihfft2,
    ihfftn,
    irfft,
    irfft2,
    irfftn,
    next_fast_len,
    prev_fast_len,
    rfft,
    rfft2,
    rfftfreq,
    rfftn,
)
from .planner import Plan, plan
from .scipy_backend import __ua_domain__, __ua_function__
from .te_op import emit_fft, te_fft, te_fft_constants
from .variants import Variant
from .wisdom import export_wisdom, forget_wisdom, import_wisdom

__all__ = [
    "ConvolvePlan", "NDPlan", "Plan", "Variant", "__ua_domain__", "__ua_function__", "convolve", "dask_array",
    "emit_fft", "export_wisdom", "fuse_consumers",
    "fft", "fft2", "fftfreq", "fftn", "fftshift", "forget_wisdom", "hfft", "hfft2", "hfftn", "ifft", "ifft2", "ifftn",
    "ifftshift", "ihfft", "ihfft2", "ihfftn", "import_wisdom", "irfft", "irfft2", "irfftn", "next_fast_len", "plan",
    "plan_convolve", "plan_nd", "prev_fast_len", "rfft", "rfft2", "rfftfreq", "rfftn", "te_fft", "te_fft_constants",
]
