"""Tile operations: the tasks that the Hopper lowering maps to TMA transactions and wgmma instructions.

Analysis only (a pure function of the schedule tree); `warpspec.hopper` rewrites. A task is

* a **TMA load** when its body copies a 2-D box of a global buffer (a kernel parameter) into one stage of a shared
  ring: `ring[s, i, j] = src[o0 + i, o1 + j]` over loops `(i, j)` that cover the ring's rows, with rows of exactly
  `TMA_ROW_BYTES` bytes (the 128-byte swizzle that wgmma reads) and at most `TMA_MAX_BOX_ROWS` rows. The copied
  value may be guarded by the source's bounds, `if_then_else(o1 + j < cols and ..., src[...], 0)`: TMA fills the
  part of a box outside the tensor with zeros. Its transaction size is the whole box's bytes (zero-filled bytes
  count too). A copy whose source a task writes after it in program order (later, or in a loop around both) is
  none: the copy reads its source asynchronously, until its transaction completes, and the synchronization is
  derived from program order (`_sources_overwritten`; a write before the copies, outside their loops, is fine);
* a **wgmma tile** when its body is `acc[a0 + i, j] = acc[a0 + i, j] + f32(A[s, a0 + i, kk]) * f32(B[s, j, kk])`
  over `(i, j, kk)`: A and B K-major stages of rings written only by TMA loads, `acc` float32; `i` spans a multiple
  of `WGMMA_M` rows, `j` a multiple of 8 columns (at most `WGMMA_MAX_N`), `kk` the whole `TMA_ROW_BYTES` row;
* a **fragment fill** (`acc[a0 + i, j] = 0` over the band) of a band of an accumulator;
* a **fragment store** of the band its task reads (`T.reads(acc[a0:a0 + m, 0:n])`): a *store tree* whose leaves
  write `out[...] = f(acc[a0 + dr + i, dc + j])` (any element-wise `f`, a cast say; offsets `dr`, `dc` free of the
  loops) under loops over `i` and `j` (the *band loops*, row loop outside; each a sub-range of the band) and any
  guards (`if` over the tile's indices above the loops, or over the element's between or below them) and `Bind`s
  (above the loops).
  That is the form an irregular output takes: a guard `if row < M and col < N` under the band loops, or what
  TailSplit makes of it under a mark (a guard chain above the mark deciding the tile, band loops cut to their
  always-true ranges, `min` ends for a symbolic `M`).

An accumulator whose every task is a fill, a wgmma tile or a store, over one band of rows per warp role (the bands
of different roles apart), becomes each role's **fragment**: registers in wgmma's accumulator layout instead of
shared memory, as wide as the role's wgmma tiles (one width per role); a store may read the first columns of it.
Tasks of no tile form stay generic (run by the role's threads as on older GPUs) and must not touch a swizzled ring
or a fragment; `tile_plan` rejects the kernel otherwise, naming the task.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field

import tvm
import tvm_ffi
from tvm import sym, tirx

from ..ir_utils import has_unit_step, substitute, uses_var
from .tree import Region, ScheduleTree, TaskNode, WarpSpecializeInputError, region_text

__all__ = ["FRAGMENT_STORE_MARK", "TMA_MAX_BOX_ROWS", "TMA_ROW_BYTES", "WGMMA_M", "WGMMA_MAX_N", "FragmentTask",
           "TilePlan", "TmaLoad", "WgmmaTile", "band_offsets", "pairs_columns", "tile_plan"]

FRAGMENT_STORE_MARK = "wgmma_fragment_store"
"""The mark (`MARK_KEY`) on the row loop of a fragment store that has guards (a ragged output): TailSplit splits
them below it; the Hopper lowering maps the store tree to the fragment's registers, the other forms run its loops
(and drop the mark)."""
TMA_ROW_BYTES = 128
"""Rule: a TMA box row is 128 bytes (64 fp16), the 128-byte swizzle atom that wgmma's K-major descriptors read."""
TMA_MAX_BOX_ROWS = 256
"""Rule: a TMA box has at most 256 rows (the hardware's limit per box dimension)."""
WGMMA_M = 64
"""Rule: one wgmma instruction covers 64 rows of the accumulator (one warpgroup of 128 threads)."""
WGMMA_MAX_N = 256
"""Rule: one wgmma instruction covers at most 256 columns (n a multiple of 8)."""
WGMMA_K = 16
"""Rule: one fp16 wgmma instruction consumes 16 elements of K."""


@dataclass(frozen=True)
class TmaLoad:
    """A TMA load task: `rows x cols` box of `source` at `origin` into `ring[stage]` (expressions in the task's
    loop variables)."""

    task: str
    source: tirx.Buffer
    ring: tirx.Buffer
    stage: tirx.PrimExpr
    origin: tuple[tirx.PrimExpr, tirx.PrimExpr]
    rows: int
    cols: int

    @property
    def bytes(self) -> int:
        return self.rows * self.cols * tvm.DataType(self.source.dtype).bits // 8


@dataclass(frozen=True)
class WgmmaTile:
    """A wgmma tile task: `acc[row0:row0+m, 0:n] += A[stage_a, row0:row0+m, 0:k] @ B[stage_b, 0:n, 0:k].T`."""

    task: str
    a: tirx.Buffer
    b: tirx.Buffer
    stage_a: tirx.PrimExpr
    stage_b: tirx.PrimExpr
    accumulator: tirx.Buffer
    row0: int
    m: int
    n: int
    k: int


@dataclass(frozen=True)
class FragmentTask:
    """A fill (`store is None`) or store task of rows `row0:row0+m`, columns `0:n` of an accumulator fragment of
    `width` columns. A store's `store`
    is its store tree (the task's body), whose band loops are `band_loops` (row loops, column loops: variables of
    the body's loops over the fragment's rows `i` and columns `j`, read as `acc[row0 + dr + i, dc + j]`, see
    `band_offsets`)."""

    task: str
    accumulator: tirx.Buffer
    row0: int
    m: int
    n: int
    store: tirx.Stmt | None
    band_loops: tuple[frozenset[tirx.Var], frozenset[tirx.Var]] = (frozenset(), frozenset())
    width: int = 0
    """The columns of the fragment (its register layout): the `n` of its role's wgmma tiles, which a store may read
    only part of (`n <= width`); `tile_plan` sets it."""


@dataclass(frozen=True)
class TilePlan:
    """The tile operations of a kernel, by task name, and the accumulators that become fragments."""

    loads: dict[str, TmaLoad] = field(default_factory=dict)
    mmas: dict[str, WgmmaTile] = field(default_factory=dict)
    fragment_tasks: dict[str, FragmentTask] = field(default_factory=dict)
    fragments: frozenset[str] = frozenset()
    refused: dict[str, str] = field(default_factory=dict)
    """Why each task shaped like a TMA load or a wgmma tile is none, by task name (for the errors that follow)."""

    def feeds_tma(self, task: TaskNode) -> bool:
        """Whether `task` writes a buffer that a TMA load of the plan reads (its global source)."""
        sources = {load.source.name for load in self.loads.values()}
        return any(region.buffer.name in sources for region in task.writes)

    def describe(self) -> str:
        """The tile plan as text: TMA loads, wgmma tiles, fragment fills and fragment stores."""
        lines = [f"TMA load {t.task}: {t.rows}x{t.cols} {t.source.name} -> {t.ring.name}, {t.bytes} bytes"
                 for t in self.loads.values()]
        lines += [f"wgmma {t.task}: m{t.m} n{t.n} k{t.k} ({t.a.name} x {t.b.name} -> {t.accumulator.name} rows "
                  f"{t.row0}:{t.row0 + t.m})" for t in self.mmas.values()]
        lines += [f"fragment {'store' if t.store is not None else 'fill'} {t.task}: {t.accumulator.name} rows "
                  f"{t.row0}:{t.row0 + t.m}" for t in self.fragment_tasks.values()]
        return "\n".join(lines)


def _loop_nest(body: tirx.Stmt) -> tuple[list[tirx.For], tirx.Stmt]:
    loops = []
    while isinstance(body, tirx.For) and body.kind == tirx.ForKind.SERIAL:
        loops.append(body)
        body = body.body
    return loops, body


def _constant(expr: tirx.PrimExpr) -> int | None:
    return int(expr) if isinstance(expr, tirx.IntImm) else None


def _same(analyzer: sym.Analyzer, a: tirx.PrimExpr, b: tirx.PrimExpr) -> bool:
    return analyzer.can_prove_equal(a, b)


def _bands(loops: list[tirx.For]) -> list[int] | None:
    extents = [_constant(loop.extent) for loop in loops]
    if (any(e is None for e in extents) or any(_constant(loop.min) != 0 for loop in loops)
            or not all(has_unit_step(loop) for loop in loops)):
        return None
    return extents


def _bounds_guarded_load(value: tirx.PrimExpr, analyzer: sym.Analyzer) -> tvm.ir.TensorLoad | None:
    """`load` for `load` or for `if_then_else(index_d < shape_d and ..., load, 0)` (a guard that is exactly a
    conjunction of upper bounds of the load's indices by the source's shape); else None."""
    if isinstance(value, tvm.ir.TensorLoad):
        return value
    if not (isinstance(value, tvm.ir.Call) and value.op.name.endswith("if_then_else")):
        return None
    condition, load, otherwise = value.args
    if not isinstance(load, tvm.ir.TensorLoad) or not _is_zero(otherwise):
        return None
    terms, pending = [], [condition]
    while pending:
        term = pending.pop()
        if isinstance(term, tirx.And):
            pending += [term.a, term.b]
        else:
            terms.append(term)
    for term in terms:
        if not isinstance(term, tirx.LT) or not any(
                _same(analyzer, term.a, index) and _same(analyzer, term.b, extent)
                for index, extent in zip(load.indices, load.source.shape, strict=True)):
            return None
    return load


def _is_zero(expr: tirx.PrimExpr) -> bool:
    return isinstance(expr, tirx.FloatImm | tirx.IntImm) and float(expr.value) == 0.0


def _tma_load(task: TaskNode, params: set[str], analyzer: sym.Analyzer) -> TmaLoad | str | None:
    """The TMA load of `task` (module doc); for a task shaped like one (two loops around a copy into a 3-D shared
    ring) that is none, why (a phrase); else None."""
    loops, store = _loop_nest(task.realize.block.body)
    if (len(loops) != 2 or not isinstance(store, tirx.BufferStore) or len(store.buffer.shape) != 3
            or not store.buffer.scope().startswith("shared")):
        return None
    ring = store.buffer
    load = _bounds_guarded_load(store.value, analyzer)
    if load is None:
        return ("it must copy an element of a global buffer, unguarded or guarded by that buffer's bounds "
                "(if_then_else(index < extent and ..., src[...], 0), TMA's zero fill)")
    extents = _bands(loops)
    source = load.source
    if extents is None:
        return "its loops must start at 0 and have constant extents and step 1"
    if source.name not in params or len(source.shape) != 2 or source.dtype != ring.dtype:
        return (f"its source '{source.name}' must be a 2-D kernel parameter of the ring's dtype {ring.dtype} (a "
                "tensor map)")
    i, j = (loop.loop_var for loop in loops)
    rows, cols = extents
    zero = {i: tirx.IntImm("int32", 0), j: tirx.IntImm("int32", 0)}
    origin = tuple(substitute(index, zero) for index in load.indices)
    stage = store.indices[0]
    expected_ring = [stage, i, j]
    expected_source = [origin[0] + i, origin[1] + j]
    if not (all(_same(analyzer, a, b) for a, b in zip(store.indices, expected_ring, strict=True))
            and all(_same(analyzer, a, b) for a, b in zip(load.indices, expected_source, strict=True))):
        return (f"it must copy the box {source.name}[row0 + {i.name}, col0 + {j.name}] into "
                f"{ring.name}[stage, {i.name}, {j.name}]")
    row_bytes = cols * tvm.DataType(source.dtype).bits // 8
    if row_bytes != TMA_ROW_BYTES or rows > TMA_MAX_BOX_ROWS:
        return (f"its box must have rows of {TMA_ROW_BYTES} bytes and at most {TMA_MAX_BOX_ROWS} rows, not {rows} "
                f"rows of {row_bytes} bytes")
    if [_constant(d) for d in ring.shape[1:]] != [rows, cols]:
        return f"its box ({rows} x {cols}) must fill a stage of '{ring.name}' ({list(ring.shape[1:])})"
    return TmaLoad(task.name, source, ring, stage, origin, rows, cols)


def _product_operands(value: tirx.PrimExpr) -> tuple[tvm.ir.TensorLoad, tvm.ir.TensorLoad] | None:
    if not isinstance(value, tirx.Mul):
        return None
    operands = []
    for side in (value.a, value.b):
        if isinstance(side, tirx.Cast):
            side = side.value
        if not isinstance(side, tvm.ir.TensorLoad):
            return None
        operands.append(side)
    return operands[0], operands[1]


def _wgmma_tile(task: TaskNode, analyzer: sym.Analyzer) -> WgmmaTile | str | None:
    """The wgmma tile of `task` (module doc); for a task shaped like one (three loops around `acc[...] =
    acc[...] + x * y`) that is none, why (a phrase); else None."""
    loops, store = _loop_nest(task.realize.block.body)
    if len(loops) != 3 or not isinstance(store, tirx.BufferStore) or not isinstance(store.value, tirx.Add):
        return None
    acc = store.buffer
    previous, product = store.value.a, store.value.b
    operands = _product_operands(product)
    if operands is None or not isinstance(previous, tvm.ir.TensorLoad) or not previous.source.same_as(acc):
        return None
    extents = _bands(loops)
    if extents is None:
        return "its loops must start at 0 and have constant extents and step 1"
    if acc.dtype != "float32" or len(acc.shape) != 2:
        return f"its accumulator '{acc.name}' must be a 2-D float32 buffer, not {len(acc.shape)}-D {acc.dtype}"
    i, j, kk = (loop.loop_var for loop in loops)
    m, n, k = extents
    a, b = operands
    row0 = _constant(analyzer.simplify(store.indices[0] - i))
    if (row0 is None or not _same(analyzer, store.indices[1], j)
            or not all(_same(analyzer, x, y) for x, y in zip(previous.indices, store.indices, strict=True))):
        return (f"it must update {acc.name}[row0 + {i.name}, {j.name}] (a constant row0) over its loops "
                f"({i.name}, {j.name}, {kk.name}) in that order")
    if len(a.indices) != 3 or len(b.indices) != 3:
        return "its operands must be stages of shared rings, read as ring[stage, row, k]"
    if not (_same(analyzer, a.indices[1], row0 + i) and _same(analyzer, a.indices[2], kk)):
        return (f"it must read its first operand K-major as {a.source.name}[stage, {row0} + {i.name}, {kk.name}], "
                f"not {_load_text(a)}")
    if not (_same(analyzer, b.indices[1], j) and _same(analyzer, b.indices[2], kk)):
        return (f"it must read its second operand K-major as {b.source.name}[stage, {j.name}, {kk.name}] (wgmma "
                f"reads B transposed, n x K), not {_load_text(b)}")
    if a.source.dtype != "float16" or b.source.dtype != "float16":
        return f"its operands must be float16, not {a.source.dtype} and {b.source.dtype}"
    if m % WGMMA_M or n % 8 or n > WGMMA_MAX_N or k * tvm.DataType(a.source.dtype).bits // 8 != TMA_ROW_BYTES:
        return (f"its loops must span a multiple of {WGMMA_M} rows, a multiple of 8 up to {WGMMA_MAX_N} columns "
                f"and {TMA_ROW_BYTES // 2} of K (one {TMA_ROW_BYTES}-byte row), not {m} x {n} x {k}")
    return WgmmaTile(task.name, a.source, b.source, a.indices[0], b.indices[0], acc, row0, m, n, k)


def _load_text(load: tvm.ir.TensorLoad) -> str:
    return f"{load.source.name}[{', '.join(str(index) for index in load.indices)}]"


def _fragment_task(task: TaskNode, analyzer: sym.Analyzer) -> FragmentTask | None:
    loops, store = _loop_nest(task.realize.block.body)
    if (len(loops) == 2 and isinstance(store, tirx.BufferStore) and store.buffer.dtype == "float32"
            and len(store.buffer.shape) == 2 and isinstance(store.value, tirx.FloatImm)):
        extents = _bands(loops)
        i, j = (loop.loop_var for loop in loops)
        row0 = _constant(analyzer.simplify(store.indices[0] - i))
        if (extents is None or float(store.value.value) != 0.0 or row0 is None
                or not _same(analyzer, store.indices[1], j) or extents[0] % WGMMA_M):
            return None
        return FragmentTask(task.name, store.buffer, row0, extents[0], extents[1], None)
    return _fragment_store(task, analyzer)


def _fragment_store(task: TaskNode, analyzer: sym.Analyzer) -> FragmentTask | None:
    """The store tree of `task` (see the module doc), or None."""
    body = task.realize.block.body
    leaves: list[tuple[tirx.Stmt, tuple[tirx.For, ...]]] = []  # each leaf with its enclosing loops

    def collect(stmt: tirx.Stmt, loops: tuple[tirx.For, ...]) -> bool:
        if isinstance(stmt, tirx.SeqStmt):
            return all(collect(s, loops) for s in stmt.seq)
        if isinstance(stmt, tirx.Bind):  # a band loop's end bound above the loops (TailSplit's symbolic ranges)
            return not loops
        if isinstance(stmt, tirx.For):
            return stmt.kind == tirx.ForKind.SERIAL and has_unit_step(stmt) and collect(stmt.body, (*loops, stmt))
        if isinstance(stmt, tirx.IfThenElse) and len(loops) < 2:
            return collect(stmt.then_case, loops) and (stmt.else_case is None or collect(stmt.else_case, loops))
        if len(loops) != 2:
            return False
        leaves.append((stmt, loops))
        return True

    if not collect(body, ()) or not leaves:
        return None
    accumulators = set()
    for leaf, _ in leaves:
        loads: list[tvm.ir.TensorLoad] = []
        stores: list[tirx.BufferStore] = []
        tvm_ffi.structural_walk(leaf, [(tvm.ir.TensorLoad, loads.append), (tirx.BufferStore, stores.append)])
        if (len(loads) != 1 or len(stores) != 1 or _loops_inside(leaf) or loads[0].source.dtype != "float32"
                or len(loads[0].source.shape) != 2):
            return None
        accumulators.add(loads[0].source)
    if len(accumulators) != 1:
        return None
    acc = accumulators.pop()
    band = [r for r in task.reads if r.buffer.same_as(acc)]
    if len(band) != 1:
        return None
    (row_min, row_extent), (col_min, col_extent) = band[0].bounds
    row0, m, col0, n = (_constant(e) for e in (row_min, row_extent, col_min, col_extent))
    if None in (row0, m, n) or col0 != 0 or m % WGMMA_M:
        return None
    if any(band_offsets(leaf, acc, row0, *loops) is None for leaf, loops in leaves):
        return None
    rows = frozenset(loops[0].loop_var for _, loops in leaves)
    cols = frozenset(loops[1].loop_var for _, loops in leaves)
    return FragmentTask(task.name, acc, row0, m, n, body, (rows, cols))


def band_offsets(leaf: tirx.Stmt, accumulator: tirx.Buffer, row0: int, row_loop: tirx.For,
                 col_loop: tirx.For) -> tuple[tirx.PrimExpr, tirx.PrimExpr] | None:
    """The offsets `(dr, dc)` of a store tree's leaf, which reads `acc[row0 + dr + i, dc + j]` for its band loops'
    variables `i` and `j` (TailSplit rebases a loop cut past the band's start to start at 0, moving the cut into
    the index); None unless the leaf reads the accumulator once, that way, with offsets free of `i` and `j`."""
    loads: list[tvm.ir.TensorLoad] = []
    tvm_ffi.structural_walk(leaf, (tvm.ir.TensorLoad, loads.append))
    reads = [load for load in loads if load.source.same_as(accumulator)]
    if len(reads) != 1:
        return None
    analyzer = sym.Analyzer()
    i, j = row_loop.loop_var, col_loop.loop_var
    offsets = (analyzer.simplify(reads[0].indices[0] - row0 - i), analyzer.simplify(reads[0].indices[1] - j))
    if any(uses_var(offset, var) for offset in offsets for var in (i, j)):
        return None
    return offsets


def pairs_columns(leaf: tirx.Stmt, col_loop: tirx.For, col_offset: tirx.PrimExpr = 0) -> bool:
    """Whether a store tree's leaf under the column loop `col_loop` (band column `col_offset + j`, see
    `band_offsets`) can write the two adjacent columns of a fragment register pair (wgmma's band columns `c` even,
    `c + 1`) with one 2-element vector store: the loop's ends in band columns are even (a pair is wholly inside
    its range or outside), the leaf is a plain store (no guard) whose last index is `base + j` (`j` nowhere else,
    `base - col_offset` even) into a buffer whose other strides are even, its element offset even and its data
    aligned to the pair. Then band columns `c, c + 1` are one aligned pair of addresses (`st.global.v2`: whole
    32-byte sectors for a warp's 8 rows of 4 pairs, where two scalar stores fill each sector's half). The buffer's
    `data_alignment` is TVM's promise (64 bytes unless declared otherwise; TVM 0.27 itself annotates every argument
    with it for LLVM without checking it at the call)."""
    if not isinstance(leaf, tirx.BufferStore) or not leaf.indices:
        return False
    analyzer = sym.Analyzer()
    col_var = col_loop.loop_var
    buffer, *outer, last = leaf.buffer, *leaf.indices
    base = analyzer.simplify(last - col_var)
    if uses_var(base, col_var) or any(uses_var(index, col_var) for index in outer):
        return False
    pair_bytes = 2 * tvm.DataType(buffer.dtype).bits // 8
    strides = list(buffer.strides) or [_product(buffer.shape[k + 1:]) for k in range(len(buffer.shape))]
    even = [base - col_offset, buffer.elem_offset, *strides[:-1], col_offset + col_loop.min,
            col_offset + col_loop.min + col_loop.extent]
    return (buffer.data_alignment % pair_bytes == 0 and (not buffer.strides or _constant(strides[-1]) == 1)
            and all(analyzer.can_prove_equal(tirx.floormod(e, 2), 0) for e in even))


def _product(extents) -> tirx.PrimExpr:
    result = tirx.IntImm("int32", 1)
    for extent in extents:
        result = result * extent
    return result




def _loops_inside(stmt: tirx.Stmt) -> bool:
    found: list = []
    tvm_ffi.structural_walk(stmt, [(tirx.For, found.append)])
    return bool(found)


def _names(regions: tuple[Region, ...]) -> set[str]:
    return {r.buffer.name for r in regions}


def _sources_overwritten(tasks: list[TaskNode], loads: dict[str, TmaLoad]) -> dict[str, str]:
    """The TMA loads whose source a task writes after them in program order (later in the sequence, or anywhere in a
    loop around both), with the reason: a TMA copy reads its source asynchronously, until its transaction
    completes, so the synchronization derived in program order would not keep the write after the read."""
    order = {task.name: n for n, task in enumerate(tasks)}
    found = {}
    for task in tasks:
        load = loads.get(task.name)
        if load is None:
            continue
        for writer in tasks:
            regions = [r for r in writer.writes if r.buffer.same_as(load.source)]
            shares_loop = any(a.same_as(b) for a in writer.loops for b in task.loops)
            if writer.name == task.name or not regions or not (order[writer.name] > order[task.name] or shares_loop):
                continue
            found[task.name] = (f"task '{writer.name}' (warp role {writer.role}) writes its source "
                                f"{region_text(regions[0])} after it in program order, but a TMA copy reads its source "
                                "asynchronously until its transaction completes, so the synchronization derived from "
                                "program order would not keep that write after the copy's reads")
            break
    return found


def tile_plan(tree: ScheduleTree) -> TilePlan:
    """The tile operations of `tree` (see the module doc); `WarpSpecializeInputError` names a task that touches a
    swizzled ring or a fragment without being a tile operation."""
    analyzer = sym.Analyzer()
    params = {p.name for p in tree.func.params if not isinstance(p.ty, tvm.ir.PrimType)}
    tasks = list(tree.tasks())
    loads, mmas, fragment_tasks = {}, {}, {}
    reasons: dict[str, str] = {}  # why a task shaped like a tile operation is none
    for task in tasks:
        load = _tma_load(task, params, analyzer)
        if isinstance(load, TmaLoad):
            loads[task.name] = load
            continue
        if load is not None:
            reasons[task.name] = f"'{task.name}' is no TMA load: {load}"
        mma = _wgmma_tile(task, analyzer)
        if isinstance(mma, WgmmaTile):
            mmas[task.name] = mma
            continue
        if mma is not None:
            reasons[task.name] = f"'{task.name}' is no wgmma tile: {mma}"
        fragment = _fragment_task(task, analyzer)
        if fragment is not None:
            fragment_tasks[task.name] = fragment
    for name, why in _sources_overwritten(tasks, loads).items():
        del loads[name]
        reasons[name] = f"'{name}' is no TMA load: {why}"
    rings = {load.ring.name for load in loads.values()}
    for mma in mmas.values():
        for operand in (mma.a, mma.b):
            if operand.name not in rings:
                why = [reasons[t.name] for t in tasks if t.name in reasons and operand.name in _names(t.writes)]
                raise WarpSpecializeInputError(
                    f"wgmma task '{mma.task}' reads '{operand.name}', which no TMA load task writes; the Hopper "
                    "lowering reads wgmma operands from TMA-swizzled shared rings"
                    + (f" ({'; '.join(why)})" if why else ""))
    accumulators = {m.accumulator.name for m in mmas.values()}
    fragments = set()
    widths: dict[tuple[str, int], int] = {}
    for acc in accumulators:
        users = [t for t in tasks if acc in _names(t.reads) | _names(t.writes)]
        for t in users:
            op = mmas.get(t.name) or fragment_tasks.get(t.name)
            if op is None or op.accumulator.name != acc:
                raise WarpSpecializeInputError(
                    f"task '{t.name}' touches the accumulator '{acc}' but is neither a fragment fill, a wgmma tile "
                    "nor a fragment store (acc[row0 + i, j] = 0 / += A x B / out[...] = acc[row0 + i, j])")
        for role, width in _fragment_widths(acc, users, mmas, fragment_tasks).items():
            widths[(acc, role)] = width
        fragments.add(acc)
    for t in tasks:
        if t.name in loads or t.name in mmas or t.name in fragment_tasks:
            continue
        touched = _names(t.reads) | _names(t.writes)
        if touched & (rings | fragments):
            raise WarpSpecializeInputError(
                f"task '{t.name}' touches {sorted(touched & (rings | fragments))}, which the Hopper lowering keeps "
                "TMA-swizzled in shared memory or in wgmma registers; only TMA loads, wgmma tiles and fragment "
                "fills/stores may" + (f" ({reasons[t.name]})" if t.name in reasons else ""))
    roles = {t.name: t.role for t in tasks}
    fragment_tasks = {name: dataclasses.replace(t, width=widths[(t.accumulator.name, roles[name])])
                      for name, t in fragment_tasks.items() if t.accumulator.name in fragments}
    return TilePlan(loads, mmas, fragment_tasks, frozenset(fragments), reasons)


def _fragment_widths(acc: str, users: list[TaskNode], mmas: dict[str, WgmmaTile],
                     fragment_tasks: dict[str, FragmentTask]) -> dict[int, int]:
    """The columns of each warp role's fragment of the accumulator `acc` (the `n` of the role's wgmma tiles),
    checking that the fragment can hold what the tasks of `users` (every task touching `acc`, each a tile
    operation) do: one band of rows per role, the bands of different roles apart (a fragment is one role's
    registers: another role's store would read registers no fill or wgmma of its own wrote), one wgmma width per
    role, and stores reading no column past it. Raises `WarpSpecializeInputError` naming the tasks otherwise."""
    bands: dict[int, dict[tuple[int, int], list[str]]] = {}
    mma_widths: dict[int, dict[int, list[str]]] = {}
    for t in users:
        op = mmas.get(t.name) or fragment_tasks[t.name]
        bands.setdefault(t.role, {}).setdefault((op.row0, op.m), []).append(t.name)
        if t.name in mmas:
            mma_widths.setdefault(t.role, {}).setdefault(op.n, []).append(t.name)
    for role, band in bands.items():
        if len(band) != 1:
            raise WarpSpecializeInputError(
                f"warp role {role} touches the accumulator '{acc}' in different row bands {sorted(band)}; a "
                "fragment is one band of rows per warp role")
    owners = sorted((row0, m, role, names) for role, band in bands.items() for (row0, m), names in band.items())
    for (row0, m, role, names), (other0, other_m, other, other_names) in itertools.pairwise(owners):
        if other0 < row0 + m:
            raise WarpSpecializeInputError(
                f"the accumulator '{acc}' rows {row0}:{row0 + m} (tasks {names}, warp role {role}) and rows "
                f"{other0}:{other0 + other_m} (tasks {other_names}, warp role {other}) overlap; the Hopper lowering "
                "keeps each role's band of an accumulator in that role's registers (a wgmma fragment), so its fill, "
                "wgmma tiles and stores must run on one warp role")
    widths = {}
    for role, band in bands.items():
        (names,) = band.values()
        by_width = mma_widths.get(role, {})
        if len(by_width) > 1:
            raise WarpSpecializeInputError(
                f"the wgmma tiles of warp role {role} update the accumulator '{acc}' with different widths "
                f"{ {n: tasks for n, tasks in sorted(by_width.items())} }; a fragment has one register layout")
        ops = [fragment_tasks[name] for name in names if name in fragment_tasks]
        width = next(iter(by_width), None)
        if width is None:  # a band only filled and stored: registers for the widest of them, whole column blocks
            width = -(-max(op.n for op in ops) // 8) * 8
        for op in ops:
            if op.store is not None and op.n > width:
                raise WarpSpecializeInputError(
                    f"fragment store '{op.task}' reads columns 0:{op.n} of the accumulator '{acc}', but the wgmma "
                    f"tiles {by_width[width]} of warp role {role} update only columns 0:{width} (its fragment's "
                    "registers)")
        widths[role] = width
    return widths
