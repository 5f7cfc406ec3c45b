"""Multi-kernel CUDA schedule: one kernel per pass over memory, for transforms whose scratch exceeds shared memory.

Algorithm: the template is emitted with one group loop per pass (`build_primfunc(..., kernel_per_pass=True)`)
and its scratch in global memory. Every pass is a loop nest `group, pass loops..., lane` of independent
codelet instances (the transforms of a pass are independent by construction: a Cooley-Tukey node's first
sub-transforms all complete before its twiddled second ones start, see `passes`). The schedule fuses the
whole nest of a pass and splits it into thread blocks of `threads` threads (`blockIdx.x`, `threadIdx.x`), so
that each pass becomes its own kernel: kernels run in order on the stream, which is the only global
synchronisation between passes, and each thread runs one codelet in registers, reading its inputs (with the
folded stride permutation and twiddles) from global memory and writing its outputs back. The work of a pass
is `batch · n / radix` threads, so any size and batch fills the GPU without shared-memory limits.
"""

from __future__ import annotations

from tvm import s_tir, tirx

__all__ = ["schedule_cuda_multikernel"]


def schedule_cuda_multikernel(func: tirx.PrimFunc, threads: int) -> s_tir.Schedule:
    """Bind every pass (a block under its own group loop) to a grid of `threads`-thread blocks."""
    sch = s_tir.Schedule(func)
    for block in sch.get_child_blocks(sch.get_sblock("root")):
        loops = sch.get_loops(block)
        fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
        width = min(threads, sch.get(fused).extent.value)
        grid, inner = sch.split(fused, [None, width])
        sch.bind(grid, "blockIdx.x")
        sch.bind(inner, "threadIdx.x")
    return sch
