"""FFT operator generator: from the size to a scheduled TIR operator for llvm and CUDA.

Data flow: (n, kind, dtype, target) → validated request (`spec.FFTSpec`, shared by `plan` and `te_fft`) →
prime factors and breakdown (`factor`) → formula tree (`formula`) → derived codelets for the leaves
(`codelet`) → passes over memory with folded stride permutations and twiddles (`passes`) → TIR template
(`template`) → schedule per target (`schedule`) → compiled plan (`plan`; on llvm through `lowering`'s
pipeline), or the same template as a stage of the caller's TE graph (`te_fft`). The choices the rules make
(breakdown limits, lanes, vectors, prefetch, tasks, CUDA threads and kernels) are one `variants.Variant`;
`plan(..., effort="measure" | "patient")` times variants on this machine (`search`) and remembers the winners
as wisdom (`wisdom`: `export_wisdom`, `import_wisdom`, `forget_wisdom`).
Every tuning constant is in `tuning` (measurements: bench/results/fft_tuning.md).
"""

from .planner import Plan, fft, ifft, irfft, plan, rfft
from .te_op import te_fft, te_fft_constants
from .variants import Variant
from .wisdom import export_wisdom, forget_wisdom, import_wisdom

__all__ = ["Plan", "Variant", "export_wisdom", "fft", "forget_wisdom", "ifft", "import_wisdom", "irfft", "plan",
           "rfft", "te_fft", "te_fft_constants"]
