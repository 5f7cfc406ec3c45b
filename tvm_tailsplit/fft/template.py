"""The TIR template of a plan: the passes over memory as blocks of one PrimFunc, ready for a schedule.

Algorithm: the transforms of the batch are processed in lane groups of `lanes` transforms (plus one tail
group of `batch % lanes` transforms). For every group, every pass is a loop nest `group, pass loops..., lane`
around one block whose body is the pass's straight-line code (codelet loads, `Bind` temporaries, stores).
The lane loop is innermost so that the llvm schedule vectorizes across the batch, and the group loop is
outermost so that it runs in parallel (on llvm, a pass's loops nest in its `loop_order`, whose innermost
loop the schedule vectorizes inside the transform in one-lane groups: see `passes._loop_order`); on CUDA the
group is a thread block and the other loops are threads.
The batch may be symbolic (a `tirx.Var`: one compiled plan for every batch) when the groups hold one transform
(no tail group): the group loop is then a loop over at most `parallel_tasks` tasks of serial groups, the groups
past the batch guarded (`T.where`), which the schedule runs in parallel.
For CUDA plans whose scratch exceeds shared memory, each kernel over columns (`multikernel.KernelGroup`: a
consecutive run of passes whose work splits into independent columns) gets a loop over blocks of columns, its own
scratch in shared memory at the column's local index and the scratch between kernels in global memory; other
such plans give every pass its own group loop (one kernel per pass over memory, see `multikernel`).
A CUDA plan of one kernel (`pass_barriers`) has a thread-block barrier
(`tvm_storage_sync("shared")`, `__syncthreads()`) in a block of its own (`BARRIER_BLOCK`) between consecutive passes
of a group: a pass reads elements that other threads wrote in earlier passes, and writes scratch that other
threads read in earlier passes (physical scratch buffers are shared by logical ones of disjoint live ranges),
while within a pass every codelet instance (and Rader/Bluestein/real-transform step) reads only elements that no
instance of the same pass writes (a pass never reads and writes one scratch buffer, see `assign_buffers`; an
in-place transform's input and output are the same memory, but only a single codelet pass reads the input and
writes the output, each instance its own transform's elements), so one barrier between passes is all the
synchronisation a kernel needs and none is inside a pass. A one-kernel plan may stage its rows (`staged`,
`stage_rows`; `schedule.cuda_staging` chooses): the group's contiguous input is copied to shared rows before the
first pass and (blocks of several transforms) the output from shared rows after the last one, each copy separated
from the passes by a barrier; a block of one transform stages its input alone (its last pass's stores are
already coalesced).

On llvm, every lane group of a batch whose groups are small (`prefetch_bytes`) prefetches the input and
output cache lines of a group a little ahead (`prefetch_distance` bytes), a share of the lines in each of
its passes (spread over the iterations of the pass's outermost loop when they share it evenly, else before
the pass): within a group the passes visit the lanes' rows in an interleaved order that hardware prefetchers
do not follow.

Memory: the input and output are the caller's float arrays with a trailing dimension of 2 for complex data
(numpy's complex layout), with arbitrary constant element and batch strides (in elements). Scratch buffers
are laid out `[group, re/im, element, lane]`, so that every access inside a pass is a contiguous vector across
lanes; logical scratch buffers share physical ones when their live ranges do not overlap. Twiddles and the
Rader/Bluestein kernels come from one constant table argument `tables` (float64 values rounded once to the
plan's precision) and the Rader permutations from the int32 argument `indices`.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass

import tvm
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.script.ir_builder import tirx as T

from .passes import PassList, View
from .tuning import CACHE_LINE, CUDA_STAGE_SKEW_VECTORS, CUDA_STAGE_VECTOR_FLOATS, PARALLEL_TASKS

__all__ = ["BARRIER_BLOCK", "STAGE_BLOCK", "ExternalLayout", "assign_buffers", "build_primfunc", "lane_groups",
           "largest_scratch_floats", "physical_buffers", "physical_scratch_elements", "stage_rows",
           "stage_vector_floats", "staged_float", "staged_row_length"]


@dataclass(frozen=True)
class ExternalLayout:
    """Layout of the input or output: `kind` is "complex", "real_pairs" (complex values packed in a real
    array) or "real"; `elements` counts buffer elements (complex or real) per transform; `distance` and
    `stride` are the steps between transforms and between elements, in buffer elements."""

    kind: str
    elements: int
    distance: int
    stride: int

    def shape(self, batch: int) -> tuple[int, ...]:
        return (batch, self.elements, 2) if self.kind == "complex" else (batch, self.elements)

    def strides(self) -> tuple[int, ...]:
        if self.kind == "complex":
            return (2 * self.distance, 2 * self.stride, 1)
        return (self.distance, self.stride)

    def is_compact(self) -> bool:
        return self.stride == 1 and self.distance == self.elements

    def floats(self) -> int:
        """Floats of one transform's elements."""
        return self.elements * (2 if self.kind == "complex" else 1)


def assign_buffers(passes: PassList) -> dict[str, str]:
    """Map logical scratch buffers to physical ones by their live ranges (greedy interval colouring)."""
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for index, p in enumerate(passes.passes):
        for name in p.reads + p.writes:
            if name in passes.buffers:
                first.setdefault(name, index)
                last[name] = index
    physical_end: dict[str, int] = {}
    assignment: dict[str, str] = {}
    for name in sorted(first, key=lambda b: first[b]):
        free = [phys for phys, end in physical_end.items() if end < first[name]]
        phys = free[0] if free else f"P{len(physical_end)}"
        assignment[name] = phys
        physical_end[phys] = last[name]
    return assignment


def physical_buffers(passes: PassList) -> tuple[dict[str, str], dict[str, int]]:
    """The physical scratch buffer of each logical one (`assign_buffers`) and each physical buffer's complex
    elements per lane (the largest of its logical buffers)."""
    assignment = assign_buffers(passes)
    sizes: dict[str, int] = {}
    for logical, phys in assignment.items():
        sizes[phys] = max(sizes.get(phys, 0), passes.buffers[logical])
    return assignment, sizes


def physical_scratch_elements(passes: PassList) -> int:
    """Complex elements per lane of all physical scratch buffers."""
    return sum(physical_buffers(passes)[1].values())


def largest_scratch_floats(passes: PassList, transforms: int) -> int:
    """The floats of the largest physical scratch buffer holding `transforms` transforms: a lane group's (its
    lanes) where each group allocates its own scratch, or the whole batch's where one allocation spans it (the
    global scratch between the kernels of a multi-kernel CUDA plan). The operator indexes each allocation with
    32-bit integers, like its parameters (`spec.MAX_BUFFER_FLOATS`)."""
    return 2 * transforms * max(physical_buffers(passes)[1].values(), default=0)


class _Emitter:
    """What a pass body uses to read and write views inside one block (one lane of one group)."""

    def __init__(self, dtype, external, scratch, tables, indices, batch_index, group, lane, rows=None,
                 complex_vectors=False):
        self.dtype = dtype
        self.external = external
        # the lane group's input and output rows in shared memory (`staged`): name -> (buffer [group, lane, float],
        # whether its floats are skewed: `staged_float`)
        self.rows = rows or {}
        # store a complex element of an external "complex" buffer as one vector of its two parts (CUDA)
        self.complex_vectors = complex_vectors
        self.scratch = scratch
        self.tables = tables
        self.indices = indices
        self.batch_index = batch_index
        self.group = group
        self.lane = lane
        self.zero = tirx.const(0.0, dtype)

    def const(self, value: float):
        return tirx.const(value, self.dtype)

    def bind(self, expr):
        return T.bind(expr)

    def bind_complex(self, value):
        return tuple(part if isinstance(part, (tirx.Var, tirx.FloatImm)) else T.bind(part) for part in value)

    def cadd(self, a, b):
        return a[0] + b[0], a[1] + b[1]

    def csub(self, a, b):
        return a[0] - b[0], a[1] - b[1]

    def cscale(self, a, c):
        return a[0] * c, a[1] * c

    def conj(self, a):
        return a[0], self.zero - a[1]

    def cmul(self, a, b):
        return a[0] * b[0] - a[1] * b[1], a[0] * b[1] + a[1] * b[0]

    def constant(self, offset: int, index):
        return self.tables[offset + index, 0], self.tables[offset + index, 1]

    def index(self, offset: int, index):
        return self.indices[offset + index]

    def _row(self, name: str, offset) -> tuple:
        """The shared buffer and indices of float `offset` of the lane's staged row of the external buffer `name`."""
        row, skew = self.rows[name]
        return row, [self.group, self.lane, staged_float(offset, self.external[name][1].floats(), skew)]

    def _real(self, view: View) -> bool:
        return self.external[view.buffer][1].kind == "real"

    def _element(self, view: View, element, loop_vars):
        return view.offset.expr(loop_vars) + element * view.stride

    def _scratch(self, view: View, element, loop_vars, part: int) -> tuple:
        """The indices of part `part` (0 real, 1 imaginary) of element `element` of a scratch view."""
        return self.group, part, self._element(view, element, loop_vars), self.lane

    def load(self, view: View, element, loop_vars):
        index = self._element(view, element, loop_vars)
        if view.buffer in self.rows:
            parts = []
            for offset in [index] if self._real(view) else [2 * index, 2 * index + 1]:
                row, place = self._row(view.buffer, offset)
                parts.append(row[tuple(place)])
            value = (parts[0], self.zero) if self._real(view) else tuple(parts)
        elif view.buffer in self.external:
            buffer, layout = self.external[view.buffer]
            b = self.batch_index
            if layout.kind == "complex":
                value = (buffer[b, index, 0], buffer[b, index, 1])
            elif layout.kind == "real_pairs":
                value = (buffer[b, index * 2], buffer[b, index * 2 + 1])
            else:
                value = (buffer[b, index], self.zero)
        else:
            buffer = self.scratch[view.buffer]
            value = tuple(buffer[self._scratch(view, element, loop_vars, part)] for part in (0, 1))
        twiddle = view.twiddle
        if twiddle is None:
            return value
        base = twiddle.base.expr(loop_vars) + element * twiddle.step
        if isinstance(base, int) and base == 0:
            return value
        root = self.constant(twiddle.table, twiddle.factor.expr(loop_vars) * base)
        if twiddle.sign > 0:
            root = self.conj(root)
        return self.cmul(value, root)

    def store(self, view: View, element, value, loop_vars) -> None:
        index = self._element(view, element, loop_vars)
        if view.scale != 1.0:
            value = self.cscale(value, self.const(view.scale))
        if view.buffer in self.rows:
            offsets = [index] if self._real(view) else [2 * index, 2 * index + 1]
            for part, offset in zip(value, offsets, strict=False):  # a real row keeps the real part
                row, place = self._row(view.buffer, offset)
                T.buffer_store(row, part, place)
        elif view.buffer in self.external:
            buffer, layout = self.external[view.buffer]
            b = self.batch_index
            if layout.kind == "complex" and self.complex_vectors:
                T.buffer_store(buffer, tirx.Shuffle(list(value), [0, 1]), [b, index, tirx.Ramp(0, 1, 2)])
            elif layout.kind == "complex":
                T.buffer_store(buffer, value[0], [b, index, 0])
                T.buffer_store(buffer, value[1], [b, index, 1])
            elif layout.kind == "real_pairs":
                T.buffer_store(buffer, value[0], [b, index * 2])
                T.buffer_store(buffer, value[1], [b, index * 2 + 1])
            else:
                T.buffer_store(buffer, value[0], [b, index])
        else:
            buffer = self.scratch[view.buffer]
            T.buffer_store(buffer, value[0], list(self._scratch(view, element, loop_vars, 0)))
            T.buffer_store(buffer, value[1], list(self._scratch(view, element, loop_vars, 1)))


class _ColumnEmitter(_Emitter):
    """The emitter of a pass in a kernel over columns (`multikernel.KernelGroup`): scratch that crosses kernels is
    global `[transform, re/im, element]`, the kernel's own scratch is shared `[block, re/im, local, column]` at
    the column's local index (`_local`)."""

    def __init__(self, dtype, external, scratch, tables, indices, batch_index, block, column, shared, within):
        super().__init__(dtype, external, scratch, tables, indices, batch_index, block, column)
        self.shared = shared  # logical shared buffer -> divisor (the group's modulus)
        self.within = within  # pass loop position -> (local variable, its scale in the loop's value), or absent

    def _local(self, view: View, element, divisor: int):
        """`(index - the column's terms) / divisor`: the column's loops dropped, the others at their scale."""
        index = 0
        for position, coeff in view.offset.terms:
            if position in self.within:
                var, scale = self.within[position]
                if coeff * scale % divisor:
                    raise ValueError(f"{view} is not a column of stride {divisor}")
                index = index + var * (coeff * scale // divisor)
        if view.offset.const % divisor or view.stride % divisor:
            raise ValueError(f"{view} is not a column of stride {divisor}")
        return index + view.offset.const // divisor + element * (view.stride // divisor)

    def _scratch(self, view: View, element, loop_vars, part: int) -> tuple:
        if view.buffer in self.shared:
            return self.group, part, self._local(view, element, self.shared[view.buffer]), self.lane
        return self.batch_index, part, self._element(view, element, loop_vars)


def _emit_column_kernel(passes: PassList, group, kernel: int, batch: int, dtype, external, tables, indices,
                        global_scratch: dict, shared_scope: str) -> None:
    """One kernel over columns: a loop over blocks of `group.columns_per_block` columns of every transform (the
    columns past the transform's last guarded), each pass a nest `block, local loops..., column` (a barrier block
    between passes), the group's scratch buffers
    shared `[block, re/im, local, column]` (physical buffers by interval colouring)."""
    width = group.columns_per_block
    per_transform = -(-group.columns // width)
    blocks = batch * per_transform
    own = PassList(passes=passes.passes[group.start:group.stop], buffers=dict(group.shared))
    assignment, sizes = physical_buffers(own)
    physical = {phys: T.sblock_alloc_buffer((blocks, 2, size, width), dtype, scope=shared_scope)
                for phys, size in sizes.items()}
    scratch = {**global_scratch, **{logical: physical[phys] for logical, phys in assignment.items()}}
    divisors = {logical: group.modulus for logical in assignment}
    digits = len(group.digits)
    with T.serial(blocks) as block_loop:
        for number in range(group.start, group.stop):
            p = passes.passes[number]
            if number > group.start:
                with T.sblock(f"{BARRIER_BLOCK}_k{kernel}_{number}"):
                    T.evaluate(T.tvm_storage_sync("shared"))
            extents = group.within(p.loops)
            frames = [T.serial(extent) for extent in extents] + [T.serial(width)]
            entered = [frame.__enter__() for frame in frames]
            with T.sblock(f"k{kernel}_{number}_{p.name}"):
                if group.columns % width:
                    T.where(tirx.floormod(block_loop, per_transform) * width + entered[-1] < group.columns)
                block = T.axis.spatial(blocks, block_loop)
                local = [T.axis.spatial(extent, var) for extent, var in zip(extents, entered[:-1], strict=True)]
                lane = T.axis.spatial(width, entered[-1])
                column = tirx.floormod(block, per_transform) * width + lane
                column_a = tirx.floordiv(column, group.modulus) if group.modulus > 1 else column
                loop_vars, within = [], {}
                stride = 1
                for radix in group.digits:
                    loop_vars.append(tirx.floormod(tirx.floordiv(column_a, stride), radix) if stride > 1
                                     else tirx.floormod(column_a, radix))
                    stride *= radix
                for position, var in enumerate(local, start=digits):
                    last = position == len(p.loops) - 1 and group.modulus > 1
                    scale = group.modulus if last else 1
                    loop_vars.append(tirx.floormod(column, group.modulus) + var * scale if last else var)
                    within[position] = (var, scale)
                emitter = _ColumnEmitter(dtype, external, scratch, tables, indices,
                                         tirx.floordiv(block, per_transform), block, lane, divisors, within)
                p.body(emitter, loop_vars)
            for frame in reversed(frames):
                frame.__exit__(None, None, None)


def lane_groups(batch, lanes: int) -> list[tuple[str, int, int, int]]:
    """(name, first transform, groups, lanes) of the full lane groups and of the tail group. A symbolic batch
    (a `tirx.Var`) has groups of one transform (`lanes` 1), without a tail group."""
    if not isinstance(batch, int):
        if lanes != 1:
            raise ValueError(f"a symbolic batch needs lane groups of 1 transform, got lanes={lanes}")
        return [("main", 0, batch, 1)]
    groups = []
    if batch // lanes:
        groups.append(("main", 0, batch // lanes, lanes))
    if batch % lanes:
        groups.append(("tail", batch - batch % lanes, 1, batch % lanes))
    return groups


def build_primfunc(
    passes: PassList,
    dtype: str,
    batch: int,
    lanes: int,
    input_layout: ExternalLayout,
    output_layout: ExternalLayout,
    scratch_scope: str = "global",
    kernel_per_pass: bool = False,
    prefetch_bytes: int = 0,
    prefetch_distance: int = 0,
    loop_orders: bool = False,
    parallel_tasks: int = PARALLEL_TASKS,
    pass_barriers: bool = False,
    staged: tuple[str, ...] = (),
    complex_vectors: bool = False,
    kernel_groups: list | None = None,
    shared_scopes: tuple[str, ...] = (),
) -> tirx.PrimFunc:
    """The s_tir PrimFunc `main(input, output[, tables][, indices])` of the passes (unscheduled).

    With `kernel_per_pass`, every pass has its own group loop (one CUDA kernel per pass over memory, the
    passes exchanging data through global scratch) instead of one group loop around all passes.
    With `prefetch_bytes`, a lane group of compact input and output whose data is at most that many bytes
    prefetches the input (for reading) and output (for writing) of the group that comes at least
    `prefetch_distance` bytes later, one cache line at a time, an equal share of the lines in each pass
    (`PREFETCH_BLOCK`; see `_emit_prefetch`).
    With `loop_orders`, the passes nest their loops in their `loop_order` (llvm).
    `batch` is an int, or a `tirx.Var` (a symbolic batch, `lanes` 1) that the input's first dimension binds;
    the groups of a symbolic batch run as at most `parallel_tasks` tasks.
    With `pass_barriers` (one CUDA kernel), a barrier block (`BARRIER_BLOCK`) separates consecutive passes.
    With `staged` (one CUDA kernel: the external buffers "input" and/or "output", compact), a lane group copies its
    input rows to shared memory before its first pass and its output rows from there after its last pass, each
    behind a barrier (`stage_rows`): the passes read and write these rows `[group, lane, float]` instead, in the
    scratch's scope (`scratch_scope`; the kernel must be compiled without TVM's `StorageRewrite`, see `planner`).
    With `complex_vectors` (one CUDA kernel), a pass stores each complex element of a "complex" external buffer as
    one vector of its two parts (8 bytes for complex64, 16 for complex128; its float offset is even): the last
    pass's threads write consecutive elements, so that a warp's store is whole sectors in one instruction.
    With `kernel_groups` (`multikernel.KernelGroup`s, a CUDA plan of several kernels over columns, `batch` an int),
    each group is one kernel (`_emit_column_kernel`) with its own scratch in `shared_scopes[k]` and the scratch
    that crosses kernels in global memory, one buffer per logical buffer.
    """
    assignment, physical_size = physical_buffers(passes)
    with IRBuilder() as builder:
        with T.prim_func(s_tir=True):
            T.func_name("main")
            external = {}
            itemsize = tvm.runtime.DataType(dtype).bits // 8
            for name, layout in (("input", input_layout), ("output", output_layout)):
                strides = None if layout.is_compact() else list(layout.strides())
                if strides is not None and isinstance(batch, int) and batch == 1:
                    # one transform has no distance: its batch stride is whatever the caller's tensor says (a
                    # constant one refused a strided tensor of one transform whose rows are further apart)
                    strides[0] = tirx.Var(f"{name}_batch_stride", "int32")
                # numpy arrays are only element-aligned: the operator must not assume more
                buffer = T.buffer(layout.shape(batch), dtype, strides=strides, align=itemsize)
                external[name] = (T.arg(name, buffer), layout)
            tables = T.arg("tables", T.buffer((passes.table_size, 2), dtype)) if passes.table_size else None
            indices = T.arg("indices", T.buffer((passes.index_size,), "int32")) if passes.index_size else None
            if kernel_groups is not None:
                own = {name for group in kernel_groups for name, _ in group.shared}
                crossing = {name: T.sblock_alloc_buffer((batch, 2, size), dtype, scope="global")
                            for name, size in passes.buffers.items() if name not in own}
                for kernel, group in enumerate(kernel_groups):
                    _emit_column_kernel(passes, group, kernel, batch, dtype, external, tables, indices, crossing,
                                        shared_scopes[kernel])
            for variant, first, groups, width in [] if kernel_groups is not None else lane_groups(batch, lanes):
                scratch_physical = {
                    phys: T.sblock_alloc_buffer((groups, 2, size, width), dtype, scope=scratch_scope)
                    for phys, size in physical_size.items()
                }
                scratch = {logical: scratch_physical[phys] for logical, phys in assignment.items()}
                # a block of one transform skews its row (`staged_float`)
                rows = {name: (T.sblock_alloc_buffer(
                    (groups, width, staged_row_length(external[name][1].floats(), lanes == 1)), dtype,
                    scope=scratch_scope), lanes == 1)
                    for name in staged}
                numbered = list(enumerate(passes.passes))
                for segment in ([[item] for item in numbered] if kernel_per_pass else [numbered]):
                    with contextlib.ExitStack() as loops:
                        if isinstance(groups, int):
                            group_loop = loops.enter_context(T.serial(groups))
                        else:
                            per_task = tirx.floordiv(groups + parallel_tasks - 1, parallel_tasks)
                            task = loops.enter_context(T.serial(tirx.floordiv(groups + per_task - 1, per_task)))
                            group_loop = task * per_task + loops.enter_context(T.serial(per_task))
                        if "input" in staged:
                            stage_rows(external["input"], rows["input"], True, variant, group_loop, groups, width,
                                       first)
                        for number, p in segment:
                            if pass_barriers and number > segment[0][0]:
                                _emit_barrier(f"{BARRIER_BLOCK}_{variant}_{number}")
                            prefetch = None
                            if prefetch_bytes and not kernel_per_pass and (not isinstance(groups, int)
                                                                           or groups > 1):
                                prefetch = functools.partial(_emit_prefetch, external, variant, group_loop, groups,
                                                             width, first, batch, itemsize, prefetch_bytes,
                                                             prefetch_distance, number, len(segment))
                            _emit_pass(p, f"{variant}_{number}_{p.name}", group_loop, groups, width, first, dtype,
                                       external, scratch, tables, indices, loop_orders, prefetch, rows,
                                       complex_vectors)
                        if "output" in staged:
                            stage_rows(external["output"], rows["output"], False, variant, group_loop, groups,
                                       width, first)
    return builder.get()


PREFETCH_BLOCK = "prefetch"
# the name prefix of the barrier blocks between the passes of a CUDA kernel (`pass_barriers`)
BARRIER_BLOCK = "barrier"
# the name prefix of the blocks that copy a lane group's rows between an external buffer and shared memory (`staged`)
STAGE_BLOCK = "stage"


def _emit_barrier(name: str) -> None:
    with T.sblock(name):
        T.evaluate(T.tvm_storage_sync("shared"))


def stage_vector_floats(floats: int) -> int:
    """Floats per vector access of a staged row of `floats` floats: `CUDA_STAGE_VECTOR_FLOATS` when it divides."""
    return CUDA_STAGE_VECTOR_FLOATS if floats % CUDA_STAGE_VECTOR_FLOATS == 0 else 1


def staged_float(offset, floats: int, skew: bool):
    """Where float `offset` (an int or a PrimExpr) of a staged row of `floats` floats lies in its shared row: in
    place, or with `skew` (a block of one transform) one vector further every `CUDA_STAGE_SKEW_VECTORS` vectors,
    so that the first pass's reads a codelet stride apart meet in fewer banks; a vector stays whole and aligned."""
    vector = stage_vector_floats(floats)
    return offset + vector * (offset // (vector * CUDA_STAGE_SKEW_VECTORS)) if skew else offset


def staged_row_length(floats: int, skew: bool) -> int:
    """Floats of shared memory that a staged row of `floats` floats spans (`staged_float` of its last float, + 1)."""
    return staged_float(floats - 1, floats, skew) + 1


def stage_rows(external, rows, load: bool, variant: str, group_loop, groups, width: int, first: int) -> None:
    """Copy the lane group's rows of `external` (compact: `width` consecutive transforms, one contiguous range of
    floats) to the shared rows `rows = (buffer[group, lane, float], skew)` (`load`; floats placed by
    `staged_float`) followed by a barrier, or after a barrier from the rows back: one block per float, which the
    CUDA schedule spreads over the threads in vectors (`schedule.schedule_cuda`), the float of a complex element's
    part `2·element + part`."""
    buffer, layout = external
    rows, skew = rows
    floats = layout.floats()
    if not load:
        _emit_barrier(f"{BARRIER_BLOCK}_{variant}_{buffer.name}")
    with T.serial(width) as lane_loop, T.serial(floats) as float_loop:
        with T.sblock(f"{STAGE_BLOCK}_{variant}_{buffer.name}"):
            group = T.axis.spatial(groups, group_loop)
            lane = T.axis.spatial(width, lane_loop)
            offset = T.axis.spatial(floats, float_loop)
            index = [first + group * width + lane] + ([offset // 2, offset % 2] if layout.kind == "complex"
                                                      else [offset])
            place = [group, lane, staged_float(offset, floats, skew)]
            if load:
                T.buffer_store(rows, buffer[tuple(index)], place)
            else:
                T.buffer_store(buffer, rows[tuple(place)], index)
    if load:
        _emit_barrier(f"{BARRIER_BLOCK}_{variant}_{buffer.name}")


def _emit_prefetch(external, variant, group_loop, groups, width, first, batch, itemsize, limit, distance, part,
                   parts, outer, outer_extent) -> None:
    """Prefetch share `part` of `parts` (the pass's share) of a later lane group's part of the compact input and
    output, one cache line per iteration: inside the pass's outermost loop (`outer`, of `outer_extent`
    iterations) when its iterations share the lines evenly, else before the pass (`outer` None).

    The transforms of a lane group are processed side by side, so that within a group the passes read and
    write the lanes' rows in an interleaved order, which the hardware prefetchers do not follow; the group's
    data is contiguous, so touching the next group's lines ahead of time keeps the memory system busy.
    The lines are prefetched in shares before the passes rather than all before the first (a burst of
    prefetches fills the line-fill buffers and stalls the pass after it), spread over the iterations of a
    pass's outermost loop rather than all before it. Measurements: bench/results/fft_tuning.md.
    """
    for name in ("input", "output"):
        _emit_prefetch_lines(external[name], name, variant, group_loop, groups, width, first, batch, itemsize,
                             limit, distance, part, parts, outer, outer_extent)


def _emit_prefetch_lines(external, name, variant, group_loop, groups, width, first, batch, itemsize, limit,
                         distance, part, parts, outer, outer_extent) -> None:
    """`_emit_prefetch` for one external buffer."""
    buffer, layout = external
    if not layout.is_compact():
        return
    floats = layout.floats()
    group_bytes = width * floats * itemsize
    if group_bytes > limit:
        return
    per_line = CACHE_LINE // itemsize
    lines = -(-width * floats // per_line)
    ahead = max(1, -(-distance // group_bytes))
    start, stop = lines * part // parts, lines * (part + 1) // parts
    if stop == start:
        return
    # spread over the iterations of the pass's outermost loop when they share the lines evenly, else before it
    spread = outer_extent > 1 and (stop - start) % outer_extent == 0
    if spread != (outer is not None):
        return
    per_iteration = (stop - start) // (outer_extent if spread else 1)
    with T.serial(per_iteration) as line_loop:
        with T.sblock(f"{PREFETCH_BLOCK}_{variant}_{name}_{part}"):
            group = T.axis.spatial(groups, group_loop)
            if not isinstance(groups, int):
                T.where(group_loop < groups)
            offset = outer * per_iteration + line_loop if spread else line_loop
            line = T.axis.spatial(lines, offset + start)
            # the last groups prefetch the batch's last group again: the start is clamped once per group, so
            # that the loop over lines is one prefetch instruction per line
            flat = T.min(first + (group + ahead) * width, batch - width) * floats + line * per_line
            row, column = flat // floats, flat % floats
            index = [row, column // 2, column % 2] if layout.kind == "complex" else [row, column]
            rw = tirx.const(1 if name == "output" else 0, "int32")
            T.evaluate(tirx.call_llvm_intrin("void", "llvm.prefetch.p0", tirx.address_of(buffer[tuple(index)]), rw,
                                             tirx.const(3, "int32"), tirx.const(1, "int32")))


def _emit_pass(p, name, group_loop, groups, width, first, dtype, external, scratch, tables, indices,
               loop_order: bool = False, prefetch=None, rows=None, complex_vectors: bool = False) -> None:
    order = list(p.loop_order) if loop_order and p.loop_order is not None else list(range(len(p.loops)))
    frames = [T.serial(p.loops[position]) for position in order] + [T.serial(width)]
    # the prefetches of a pass may go into its outermost loop when it has another one inside (the schedule
    # fuses the innermost loop with the lanes), else before it (`_emit_prefetch` decides)
    outer_extent = p.loops[order[0]] if len(order) >= 2 else 1
    if prefetch is not None:
        prefetch(None, outer_extent)
    entered = []
    for frame in frames:
        entered.append(frame.__enter__())
        if prefetch is not None and len(entered) == 1 and outer_extent > 1:
            prefetch(entered[0], outer_extent)
    loop_vars = [None] * len(p.loops) + [entered[-1]]
    for position, var in zip(order, entered, strict=False):
        loop_vars[position] = var
    with T.sblock(name):
        group = T.axis.spatial(groups, group_loop)
        if not isinstance(groups, int):
            T.where(group_loop < groups)
        block_vars = [T.axis.spatial(extent, var) for extent, var in zip(p.loops, loop_vars[:-1], strict=True)]
        lane = T.axis.spatial(width, loop_vars[-1])
        emitter = _Emitter(dtype, external, scratch, tables, indices, first + group * width + lane, group, lane,
                           rows, complex_vectors)
        p.body(emitter, block_vars)
    for frame in reversed(frames):
        frame.__exit__(None, None, None)
