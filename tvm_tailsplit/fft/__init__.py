"""FFT operator generator: from the size to a scheduled TIR operator for llvm and CUDA.

Data flow: (n, kind, dtype, target) → prime factors and breakdown (`factor`) → formula tree (`formula`) →
derived codelets for the leaves (`codelet`) → passes over memory with folded stride permutations and
twiddles (`passes`) → TIR template (`template`) → schedule per target (`schedule`) → compiled plan (`plan`).
"""

from .planner import Plan, fft, ifft, irfft, plan, rfft

__all__ = ["Plan", "fft", "ifft", "irfft", "plan", "rfft"]
