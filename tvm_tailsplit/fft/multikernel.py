"""Multi-kernel CUDA schedules, for transforms whose scratch exceeds one thread block's shared memory.

Algorithm (four-step / six-step, `choose_kernel_groups`): a plan whose complex breakdown is a Cooley-Tukey chain
`n = r0·r1···r(D-1)·n_D` (left factors codelets) runs its passes in order: the passes of the sub-transform at
depth D, then the left codelet of node D-1, ..., of node 0 (`passes`). Cut the chain at a depth t: with
`n1 = r0···r(t-1)` and `n2 = n_t = n / n1`, the passes of the sub-transform at depth t are n1 independent
n2-point transforms ("columns": loop digits `i0..i(t-1)`, reading the input at stride n1, each writing its own
n2 contiguous elements of the scratch of node t-1), and the left codelets of nodes t-1..0 are n2 independent
n1-point transforms (the last loop of each pass modulo n2: every element they touch is `column + n2·q`), the
twiddles `ω_n^(j1·k2)` folded into the loads of node t-1's codelet and the transposition into the index maps.
So each side of a cut is one kernel, a batched in-shared-memory FFT: one thread block per `columns_per_block`
consecutive columns (consecutive threads take consecutive columns, so that a warp reads whole 32-byte sectors
of the strided input), the scratch of its inner passes in shared memory at the column's local index (the
index map without the column's terms, divided by the column stride) with the block's columns side by side,
one `__syncthreads()` between its passes (the one-kernel machinery: no `ThreadSync`, one thread extent per
kernel, see `schedule`), and only the scratch that crosses a cut in global memory. With two cuts (six-step) the
middle kernel's columns combine both kinds. The cuts are the fewest whose kernels' shared memory fits the
target's shared memory per block (`cuda.CudaLimits`: 163 KiB on sm_80, 227 KiB on sm_90), the most balanced among
them (`choose_kernel_groups`); kernels run in order on the stream, the only global synchronisation. Twiddle tables
stay the passes' own (float64, rounded once). The real
transforms' pre- or post-processing passes (r2c, c2r) are one kernel each, every loop iteration a column.

Other large plans (Rader or Bluestein at the top, chains that no cut fits) run one kernel per pass over memory
(`schedule_cuda_multikernel`): the template is emitted with one group loop per pass and its scratch in global
memory; each pass's nest is fused and split into thread blocks of `threads` threads, each thread running one codelet
instance in registers.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass

import numpy as np
from tvm import s_tir, tirx

from ..cuda import CudaLimits
from .factor import Breakdown, Codelet, CooleyTukey
from .passes import PassList
from .schedule import cuda_block_threads
from .template import BARRIER_BLOCK, physical_scratch_elements
from .tuning import CUDA_SECTOR_BYTES

__all__ = ["KernelGroup", "choose_kernel_groups", "shared_bytes", "schedule_cuda_grouped", "schedule_cuda_multikernel"]


@dataclass(frozen=True)
class KernelGroup:
    """Passes `start..stop-1` of a plan as one kernel over independent columns.

    A pass's loops `digits` (the first len(digits) loops, radices r0.., i0 fastest) select column `colA`; with
    `modulus` > 1, its last loop `j = colB + modulus·q` selects `colB` (the rest `q` stays a loop); the column is
    `colB + modulus·colA`. `shared` maps the scratch buffers used only by this kernel to their elements per
    column (`local = (index without the column's terms) / modulus`); the block holds `columns_per_block`
    consecutive columns side by side (the last block of a transform guarded), in `threads` threads."""

    start: int
    stop: int
    digits: tuple[int, ...]
    modulus: int
    columns_per_block: int
    shared: tuple[tuple[str, int], ...]
    threads: int = 0  # threads per block (at most the largest pass's work are bound)

    @property
    def columns(self) -> int:
        return math.prod(self.digits) * self.modulus

    def within(self, loops: tuple[int, ...]) -> list[int]:
        """Extents of a pass's loops inside one column."""
        rest = list(loops[len(self.digits):])
        if self.modulus > 1:
            rest[-1] //= self.modulus
        return rest


def _chain(tree: Breakdown) -> list[int]:
    """The left radices r0, r1, ... of the Cooley-Tukey chain along the right factors (codelet left factors)."""
    radices = []
    while isinstance(tree, CooleyTukey) and isinstance(tree.left, Codelet):
        radices.append(tree.left.n)
        tree = tree.right
    return radices


def shared_bytes(passes: PassList, group: KernelGroup, real_dtype: str) -> int:
    """Shared memory of one block of the group: its physical scratch buffers (interval colouring)."""
    own = PassList(passes=passes.passes[group.start:group.stop], buffers=dict(group.shared))
    return 2 * np.dtype(real_dtype).itemsize * group.columns_per_block * physical_scratch_elements(own)


def _group(passes: PassList, start: int, stop: int, digits: tuple[int, ...], modulus: int,
           sector: int) -> KernelGroup | None:
    """The group of passes start..stop-1, or None when its columns do not divide its buffers."""
    own = passes.passes[start:stop]
    used = {name for p in own for name in p.reads + p.writes if name in passes.buffers}
    elsewhere = {name for p in passes.passes[:start] + passes.passes[stop:] for name in p.reads + p.writes}
    columns = math.prod(digits) * modulus
    shared = []
    for name in sorted(used - elsewhere):
        if passes.buffers[name] % columns:
            return None
        shared.append((name, passes.buffers[name] // columns))
    if any(p.loops[:len(digits)] != digits for p in own):
        return None
    return KernelGroup(start, stop, digits, modulus, min(sector, columns), tuple(shared))


def choose_kernel_groups(passes: PassList, tree: Breakdown, real_dtype: str, threads: int,
                         limits: CudaLimits) -> list[KernelGroup] | None:
    """The kernels of a large plan (module docstring), or None for one kernel per pass.

    The passes of the complex transform form the chain's kernels; the real transforms' pre- or post-processing
    passes (`r2c_*`, `c2r_*`) are one kernel each, every codelet instance a column of its own.
    Rule (`tuning`): the fewest cuts of the chain whose every kernel's shared memory, at one 32-byte sector of
    columns per block (`CUDA_SECTOR_BYTES`; the last block of a transform guarded where they do not divide its
    columns), is at most
    the architecture's shared memory per block (`limits.shared`); among those, the cuts whose largest kernel's shared
    memory is smallest; then each kernel's columns per block doubled while its largest pass has fewer codelet
    instances than `threads` and its shared memory stays within the limit; a kernel's block runs
    `schedule.cuda_block_threads` threads (`threads` times the 48 KiB spans of its shared memory)."""
    radices = _chain(tree)
    count = len(passes.passes)
    chain = [not p.name.startswith(("r2c_", "c2r_")) for p in passes.passes]
    if not radices or sum(chain) <= len(radices):
        return None
    first, last = chain.index(True), count - chain[::-1].index(True)
    if not all(chain[first:last]):
        return None
    # the chain's last len(radices) passes are the left codelets of nodes D-1..0: node t's loops are
    # (r0..r(t-1), n_(t+1))
    sizes = [math.prod(radices[t:]) * tree.n // math.prod(radices) for t in range(len(radices) + 1)]
    for t in range(len(radices)):
        if passes.passes[last - 1 - t].loops != (*radices[:t], sizes[t + 1]):
            return None
    sector = max(1, CUDA_SECTOR_BYTES // (2 * np.dtype(real_dtype).itemsize))
    for cuts in range(1, len(radices) + 1):
        best = None
        for depths in itertools.combinations(range(len(radices), 0, -1), cuts):
            groups = _groups(passes, radices, sizes, depths, sector, first, last)
            if groups is None:
                continue
            largest = max(shared_bytes(passes, g, real_dtype) for g in groups)
            if largest <= limits.shared and (best is None or largest < best[0]):
                best = (largest, groups)
        if best is not None:
            return [_widen(passes, g, real_dtype, threads, limits) for g in best[1]]
    return None


def _groups(passes: PassList, radices: list[int], sizes: list[int], depths: tuple[int, ...], sector: int,
            first: int, last: int) -> list[KernelGroup] | None:
    """The kernels of the cuts at `depths` (decreasing) of the chain's passes `first..last-1`: the sub-transform
    below the deepest cut, then the left codelets between consecutive cuts, then those above the shallowest; and
    one kernel per pass outside the chain (its loops all columns)."""
    flat = [_group(passes, i, i + 1, passes.passes[i].loops, 1, sector) for i in range(first)]
    bounds = [first] + [last - d for d in depths] + [last]
    cut_depths = list(depths) + [0]
    groups = []
    for k in range(len(bounds) - 1):
        digits = tuple(radices[:cut_depths[k]])
        modulus = 1 if k == 0 else sizes[cut_depths[k - 1]]
        group = _group(passes, bounds[k], bounds[k + 1], digits, modulus, sector)
        if group is None:
            return None
        groups.append(group)
    groups = flat + groups + [_group(passes, i, i + 1, passes.passes[i].loops, 1, sector)
                              for i in range(last, len(passes.passes))]
    return None if None in groups else groups


def _widen(passes: PassList, group: KernelGroup, real_dtype: str, threads: int, limits: CudaLimits) -> KernelGroup:
    """`group` with its columns per block doubled while its largest pass has fewer instances than `threads`, and
    its threads per block (`choose_kernel_groups`)."""
    work = max(math.prod(group.within(p.loops)) for p in passes.passes[group.start:group.stop])
    while group.columns_per_block * work * 2 <= threads and 2 * group.columns_per_block <= group.columns:
        wider = dataclasses.replace(group, columns_per_block=2 * group.columns_per_block)
        if shared_bytes(passes, wider, real_dtype) > limits.shared:
            break
        group = wider
    return dataclasses.replace(group, threads=cuda_block_threads(shared_bytes(passes, group, real_dtype), threads,
                                                                 limits))


def schedule_cuda_grouped(func: tirx.PrimFunc, threads: list[int]) -> s_tir.Schedule:
    """Bind each kernel's block loop (the template's column-block loop) to `blockIdx.x` and every pass inside it to
    the same number of threads: the kernel's `threads[k]`, or its largest pass's work when it is smaller (the last
    round of a pass guarded); the barrier blocks stay between the passes."""
    sch = s_tir.Schedule(func)
    kernels: list = []
    for block in sch.get_child_blocks(sch.get_sblock("root")):
        loop = sch.get_loops(block)[0]
        if not kernels or not sch.get(kernels[-1][0]).same_as(sch.get(loop)):
            kernels.append((loop, []))
        if not sch.get(block).name_hint.startswith(BARRIER_BLOCK):
            loops = sch.get_loops(block)[1:]
            kernels[-1][1].append(sch.fuse(*loops) if len(loops) > 1 else loops[0])
    for (loop, fused), limit in zip(kernels, threads, strict=True):
        sch.bind(loop, "blockIdx.x")
        width = min(limit, max(sch.get(f).extent.value for f in fused))
        for f in fused:
            _, inner = sch.split(f, [None, width])
            sch.bind(inner, "threadIdx.x")
    return sch


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
