"""Schedules of the FFT template per target, applied with `tvm.s_tir.Schedule`.

* llvm: the lane loop of every pass block (transforms of the batch side by side; scratch accesses are
  contiguous across lanes) is vectorized, and the group loop (lane groups of the batch) runs in parallel
  on all cores, as at most `tuning.PARALLEL_TASKS` tasks of serial groups that share one scratch allocation (a
  symbolic batch arrives with that task loop from the template, which is made parallel as it is). With
  fewer lanes than a vector (one transform per group), the innermost loop over codelet instances of the
  pass is vectorized with them. The straight-line codelet bodies need no further scheduling; the prefetch
  blocks (`template`) are left as they are.
* CUDA: one thread block per lane group (the group loop is bound to `blockIdx.x`); inside a block, each
  pass's loops and lanes are fused and spread over the same number of threads (`threadIdx.x`: the variant's
  threads, or fewer when no pass has that much work), the last round of a pass guarded where the threads do
  not divide its work; scratch lives in shared memory (static up to 48 KiB, dynamic above, up to the
  architecture's `cuda.CudaLimits.shared`). The threads per block: `tuning.CUDA_THREADS` per 48 KiB span of the
  block's shared memory, at most `CudaLimits.max_threads` (`cuda_block_threads`, also for `multikernel`'s kernels
  over columns). The whole transform is one kernel, whose passes the template's barriers separate (`template`,
  `pass_barriers`): one `__syncthreads()` between consecutive passes, none inside a pass, so that the kernel is
  compiled without TVM's `ThreadSync` (`planner`). TVM's `ThreadSync` cannot tell apart the passes' buffers in
  dynamic shared memory (it merges them into one buffer) and puts barriers inside the passes, where the guards
  forbid them; and one kernel takes one extent for each thread index, so that every pass binds the same one.
  A block of several transforms (`cuda_staging`) would have each thread read and write its own transforms' rows
  in global memory, consecutive threads a row apart (uncoalesced: a warp-wide access on 32 cache lines at
  n = 16); the template stages them instead (`template.stage_rows`): the block's contiguous rows are copied to
  shared memory before the first pass and back after the last, the copies spread over the same threads in
  vectors of one complex element (consecutive threads on consecutive vectors: whole cache lines per warp), the
  shared rows padded to an odd number of vectors (`storage_align`) so that the threads of a warp, one transform
  each, read and write them in distinct banks. The rules are `tuning.CUDA_STAGE_MIN_LANES` and
  `tuning.CUDA_STAGE_VECTOR_FLOATS`.
  A block of one transform (n >= ~1000) reads its input uncoalesced the same way: in its first pass the fastest
  thread index is the pass's last loop digit, neighbouring threads a codelet stride apart (16 sectors per warp-wide
  load at n = 1024, 32 at n = 4096); its last pass's stores are consecutive threads on consecutive complex elements
  already (each element one vector of its two parts: `template.build_primfunc`'s complex_vectors). With the
  variant's `stage_input` (`tuning.CUDA_STAGE_INPUT`) the same copy stages its input row alone (`cuda_staging`),
  one barrier before the first pass, which reads the row in shared memory (skewed one vector every
  `tuning.CUDA_STAGE_SKEW_VECTORS`, `template.staged_float`, against the bank conflicts of its strided reads).
  Staging was chosen over reordering the first pass's loops (the element's fastest digit on the fastest thread) and
  padding the scratch's index maps: the first pass's loop order is also its scratch writes' order, which the next
  pass's reads follow, so a reorder moves the stride to the scratch (bank conflicts, or a padded index map for
  every pass); a copy of the contiguous row is the machinery blocks of several transforms have, costs one row of
  shared memory and a barrier, and keeps the passes' index maps as `passes` builds them for llvm. Its cost is a
  choice the search times (`search`: the `staging` axis).
"""

from __future__ import annotations

import math

import numpy as np
from tvm import s_tir, tirx

from ..cuda import CudaLimits
from .passes import PassList
from .template import (
    BARRIER_BLOCK,
    PREFETCH_BLOCK,
    STAGE_BLOCK,
    ExternalLayout,
    physical_scratch_elements,
    stage_vector_floats,
    staged_row_length,
)
from .tuning import (
    CUDA_STAGE_MIN_LANES,
    CUDA_STATIC_SHARED_LIMIT,
    GROUP_SCRATCH_LIMIT,
    INNER_VECTOR_SCALE,
    LARGE_INNER_VECTOR_SCALE,
    LARGE_SCRATCH_BYTES,
    PARALLEL_TASKS,
    VECTOR_LANES,
)

__all__ = ["choose_cuda_lanes", "choose_inner_vector_scale", "choose_lanes", "cuda_block_threads",
           "cuda_staging", "schedule_cuda", "schedule_llvm",
           "stage_vector_floats", "staged_bytes", "staged_row_floats"]


def choose_lanes(passes: PassList, real_dtype: str, batch: int) -> int:
    """Transforms per lane group on llvm: one transform vectorized inside when the transform has scratch and
    every pass's innermost loop is a multiple of the vector width, else a vector's width of the batch
    (`VECTOR_LANES`), halved while the group's scratch exceeds `GROUP_SCRATCH_LIMIT`."""
    per_lane = 2 * np.dtype(real_dtype).itemsize * physical_scratch_elements(passes)
    width = VECTOR_LANES[real_dtype]
    inner_loops = [p.loops[-1 if p.loop_order is None else p.loop_order[-1]] for p in passes.passes if p.loops]
    if per_lane > 0 and all(extent % width == 0 for extent in inner_loops):
        return 1
    lanes = min(width, batch)
    while lanes > 1 and per_lane * lanes > GROUP_SCRATCH_LIMIT:
        lanes //= 2
    return lanes


def choose_cuda_lanes(passes: PassList, real_dtype: str, batch: int, threads: int,
                      layouts: tuple[ExternalLayout, ExternalLayout] | None = None) -> int:
    """Transforms per thread block on CUDA: the largest power of two of them whose codelet instances in the
    largest pass fill at most `threads` threads (`threads` over the instances of one transform), at most the
    batch, while the block's scratch stays within static shared memory (`CUDA_STATIC_SHARED_LIMIT`); one
    transform when one transform's pass fills the threads. (With one transform per block, a 16-point transform,
    one instance, ran one working thread per block.) With the plan's `layouts`, the block's staged rows
    (`cuda_staging`) count too, unless then fewer than `CUDA_STAGE_MIN_LANES` transforms fit (the rows are not
    staged then)."""
    work = max((math.prod(p.loops) for p in passes.passes), default=1)
    per_lane = 2 * np.dtype(real_dtype).itemsize * physical_scratch_elements(passes)

    def largest(lane_bytes: int) -> int:
        lanes = 1
        while 2 * lanes * work <= threads and 2 * lanes <= batch and 2 * lanes * lane_bytes <= CUDA_STATIC_SHARED_LIMIT:
            lanes *= 2
        return lanes

    if layouts is not None and all(layout.is_compact() for layout in layouts):
        staged = largest(per_lane + staged_bytes(layouts, ("input", "output"), 1, real_dtype))
        if staged >= CUDA_STAGE_MIN_LANES:
            return staged
    return largest(per_lane)


def cuda_block_threads(shared_bytes: int, threads: int, limits: CudaLimits) -> int:
    """Threads per block of a kernel whose block holds `shared_bytes` of shared memory: `threads` times the number
    of `CUDA_STATIC_SHARED_LIMIT` spans (48 KiB) it covers (fewer such blocks fit on a multiprocessor, so each runs
    more threads), at most the architecture's `limits.max_threads`."""
    spans = max(1, -(-shared_bytes // CUDA_STATIC_SHARED_LIMIT))
    return min(limits.max_threads, threads * spans)


def choose_inner_vector_scale(scratch_bytes: int) -> int:
    """Codelet instances of one transform per vector, in vector widths: `INNER_VECTOR_SCALE`, or
    `LARGE_INNER_VECTOR_SCALE` when the group's scratch exceeds `LARGE_SCRATCH_BYTES` (it streams through L2/L3)."""
    return LARGE_INNER_VECTOR_SCALE if scratch_bytes > LARGE_SCRATCH_BYTES else INNER_VECTOR_SCALE


def _pass_blocks(sch: s_tir.Schedule) -> list:
    root = sch.get_sblock("root")
    return list(sch.get_child_blocks(root))


def _group_loops(sch: s_tir.Schedule, blocks: list) -> list:
    """The distinct outermost (group) loops, one per lane-group variant."""
    seen = []
    for block in blocks:
        loop = sch.get_loops(block)[0]
        if not any(sch.get(loop).same_as(sch.get(other)) for other in seen):
            seen.append(loop)
    return seen


def schedule_llvm(func: tirx.PrimFunc, vector_width: int, inner_vector_scale: int = INNER_VECTOR_SCALE,
                  parallel_tasks: int = PARALLEL_TASKS) -> s_tir.Schedule:
    """Vectorize across lanes, parallelize over lane groups in at most `parallel_tasks` tasks.

    When a group has fewer lanes than `vector_width` (a batch of 1, or scratch too large for more lanes) and
    the lane count divides it, the innermost transform loop of a pass is split and fused with the lanes, so
    that a vector also holds independent codelet instances of the same transform (`inner_vector_scale`
    times `vector_width` of them when the loop divides, else `vector_width`).
    """
    sch = s_tir.Schedule(func)
    blocks = _pass_blocks(sch)
    for block in blocks:
        loops = sch.get_loops(block)
        if sch.get(block).name_hint.startswith(PREFETCH_BLOCK):
            continue  # a loop over cache lines: nothing to vectorize
        lane = loops[-1]
        lanes = sch.get(lane).extent.value
        if lanes < vector_width and vector_width % lanes == 0 and len(loops) >= 3 and \
                isinstance(sch.get(loops[-2]).extent, tirx.IntImm):  # a pass loop, not a symbolic group loop
            extent = sch.get(loops[-2]).extent.value
            for width in (inner_vector_scale * vector_width, vector_width):
                if extent % (width // lanes) == 0:
                    _, inner = sch.split(loops[-2], [None, width // lanes])
                    lane = sch.fuse(inner, lane)
                    lanes = width
                    break
        if lanes > 1:
            sch.vectorize(lane)
    for group in _group_loops(sch, blocks):
        extent = sch.get(group).extent
        if not isinstance(extent, tirx.IntImm):
            # a symbolic batch: the template's loop over at most PARALLEL_TASKS tasks of serial groups
            sch.parallel(group)
            continue
        extent = extent.value
        if extent > 1:
            # parallel tasks of serial groups that share one scratch allocation (`lowering`)
            tasks = max(d for d in range(1, min(extent, parallel_tasks) + 1) if extent % d == 0)
            if tasks < extent:
                group, _ = sch.split(group, [tasks, None])
            sch.parallel(group)
    return sch


def staged_row_floats(floats: int) -> int:
    """Floats between consecutive shared rows of `floats` floats: an odd number of vectors (`storage_align`)."""
    vector = stage_vector_floats(floats)
    return floats + vector * (1 - floats // vector % 2)


def cuda_staging(layouts: tuple[ExternalLayout, ExternalLayout], lanes: int, real_dtype: str, scratch_bytes: int,
                 limits: CudaLimits, stage_input: bool) -> tuple[str, ...]:
    """The external buffers ("input", "output") whose rows a one-kernel plan of `lanes` transforms per block stages
    through shared memory: both when a block holds at least `CUDA_STAGE_MIN_LANES` transforms, both layouts are
    compact and its scratch and padded rows fit in static shared memory (`CUDA_STATIC_SHARED_LIMIT`); the input
    alone when a block holds fewer, the variant's `stage_input` asks for it (`CUDA_STAGE_INPUT`), the plan has
    scratch (more than one pass over memory: a single pass reads each input element once, where its codelet needs
    it), the input is compact and the scratch and row fit in the block's shared memory (`limits.shared`); else
    none."""
    input_layout, _ = layouts
    if lanes >= CUDA_STAGE_MIN_LANES:
        both = ("input", "output")
        fits = scratch_bytes + staged_bytes(layouts, both, lanes, real_dtype) <= CUDA_STATIC_SHARED_LIMIT
        return both if fits and all(layout.is_compact() for layout in layouts) else ()
    fits = scratch_bytes + staged_bytes(layouts, ("input",), lanes, real_dtype) <= limits.shared
    return ("input",) if stage_input and scratch_bytes > 0 and input_layout.is_compact() and fits else ()


def staged_bytes(layouts: tuple[ExternalLayout, ExternalLayout], staged: tuple[str, ...], lanes: int,
                 real_dtype: str) -> int:
    """Bytes of shared memory of a block's `staged` rows (`cuda_staging`), each padded by `staged_row_floats`
    (several transforms) or skewed (`template.staged_float`: one transform)."""
    floats = [layout.floats() for name, layout in zip(("input", "output"), layouts, strict=True) if name in staged]
    if lanes == 1:
        return sum(staged_row_length(f, True) for f in floats) * np.dtype(real_dtype).itemsize
    return lanes * sum(staged_row_floats(f) for f in floats) * np.dtype(real_dtype).itemsize


def schedule_cuda(func: tirx.PrimFunc, threads: int) -> s_tir.Schedule:
    """One thread block per lane group; every pass spread over the same number of threads: `threads`, or the
    largest pass's work when it is smaller. The barrier blocks between passes (`template.BARRIER_BLOCK`) stay
    where they are, outside the threads' loops. A staged copy (`template.STAGE_BLOCK`) runs over the same threads
    in vectors (`stage_vector_floats`): consecutive threads copy consecutive vectors of the group's contiguous
    rows, whose shared copy is padded to an odd number of vectors per row (`staged_row_floats`, by
    `storage_align`)."""
    sch = s_tir.Schedule(func)
    blocks = _pass_blocks(sch)
    for group in _group_loops(sch, blocks):
        sch.bind(group, "blockIdx.x")
    passes, stages = [], []
    for block in blocks:
        name = sch.get(block).name_hint
        if name.startswith(BARRIER_BLOCK):
            continue
        loops = sch.get_loops(block)[1:]
        floats = sch.get(loops[-1]).extent.value
        fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
        if name.startswith(STAGE_BLOCK):
            stages.append((block, fused, floats))
        else:
            passes.append(fused)
    # one kernel has one extent per thread index: every pass binds `width` threads, its last round guarded
    width = min(threads, max(sch.get(fused).extent.value for fused in passes))
    for fused in passes:
        _, inner = sch.split(fused, [None, width])
        sch.bind(inner, "threadIdx.x")
    for block, fused, floats in stages:
        vector = stage_vector_floats(floats)
        written = sch.get(block).writes[0].source
        if written.scope().startswith("shared"):  # the input's rows, written by their copy
            if int(written.shape[1]) > 1:  # one transform's row is skewed instead (`template.staged_float`)
                sch.storage_align(block, 0, axis=1, factor=2 * vector, offset=vector)
        else:  # the output's rows, written by the last pass
            writer = sch.get_producers(block)[0]
            rows = sch.get(block).reads[0].source
            index = [region.source.same_as(rows) for region in sch.get(writer).writes].index(True)
            sch.storage_align(writer, index, axis=1, factor=2 * vector, offset=vector)
        vectors, lane = sch.split(fused, [None, vector])
        _, inner = sch.split(vectors, [None, width])
        sch.bind(inner, "threadIdx.x")
        if vector > 1:
            sch.vectorize(lane)
    return sch
