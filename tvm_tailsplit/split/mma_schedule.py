"""The fp16 matmul (fp32 accumulate) on CUDA tensor cores through ``mma.sync``, marked for TailSplit.

``C[M, N] = A[M, K] @ B[K, N]`` with ``A`` and ``B`` row-major fp16 (``B`` is *not* transposed: TVM's
``mma_ldmatrix_f16_b`` loads it with ``ldmatrix.trans``, and ``mma_f16f16f32`` is the row.col m16n8k16 pair
that TVM's ``tvm.testing.tir.mma_schedule`` uses for the same layout), ``C`` fp32. ``m=None``: ``M`` is a
symbolic variable named ``m`` (one kernel for every ``M``; ``M = 0`` launches none: see ``_launched_for_rows``).

Algorithm (the schedule of TVM's ``mma_schedule`` test helper, with marks instead of ``sch.tensorize`` and the
``software_pipeline_*`` annotations of TVM's tensor-core rules):

1. The iteration space is padded (``sch.pad_einsum``) to whole thread-block tiles in ``M`` and ``N`` and to whole
   ``block_k`` slices in ``K`` (``pad_to_blocks=False``: to whole 16 x 16 instruction tiles in ``M`` and ``N``),
   but nothing padded is stored in global memory: the padding is inlined
   into the global -> shared copies, so elements outside ``A`` and ``B`` load as zeros (``cp.async`` zero fill,
   see ``mma_tails``), and the copy of the padded result back to ``C`` is folded into the accumulator store
   (``reverse_compute_inline``), which writes ``C`` under ``T.where(i < M and j < N)``. Padding ``K`` to the
   block's slice keeps the reduction loops condition-free, so the pipelined loops never change shape.
   ``padded_output=True`` keeps the earlier form: the result goes through the padded global ``C_pad``, copied
   back to ``C`` by a second kernel, one element per thread.
2. Grid: ``blockIdx.y/x`` cover the ``MmaTiling``'s ``block_tile`` = (``warps`` x ``warp_tiles`` x 16) tiles of
   ``C``; ceil-div many, so the last thread blocks are partial. ``threadIdx.z/y`` are the ``warps`` (not fused: a
   fused warp index would put ``//`` and ``%`` into the guards, which TailSplit cannot split on), each owning
   ``warp_tiles`` 16 x 16 accumulator tiles (``warp`` scope, laid out by ``shared_16x16_to_ldmatrix_32x8_layout``
   as TVM's intrinsics expect).
3. Per ``block_k`` slice (loop ``k0``) all threads copy the ``A`` and ``B`` slices to ``SHARED_SCOPE`` memory,
   ``copy_lanes`` elements per thread and copy (``cp.async`` once lowered with ``MMA_PASS_CONFIG``, as the
   ``"tailsplit_mma"`` pipeline of ``mma_pipeline`` does); rows are
   padded by ``SHARED_ROW_PAD`` halves against bank conflicts (``storage_align``). Per 16-wide step (loop
   ``k1``) each warp loads its ``A`` and ``B`` fragments with ``ldmatrix`` and issues the ``mma.sync`` pairs.
4. Software pipeline: ``k1`` double-buffers the fragments (loads one step ahead); ``k0`` runs
   ``stages`` deep (the copies in stage 0, asynchronous; the pipelined ``k1`` in the last two), the
   annotations of TVM's ``MultiLevelTilingTensorCore`` for mma with asynchronous copies; at most one stage more
   than there are slices (``pipeline_stages``: a deeper pipeline over fewer slices leaves TVM 0.27's
   ``cp.async.wait_group`` count an expression, which CUDA code generation refuses). Two stages (asked for, or
   one slice) put all of ``k1`` in stage 1 (``k0_pipeline``): its first loads in stage 0 would read the copies
   before their ``cp.async`` group is committed.
5. Marks (``MARK_KEY``, on the outer loop of each 16 x 16 tile): ``MMA_MARKS`` names the TVM intrinsic of the
   fill, the two ``ldmatrix`` loads, the ``mma.sync`` and the accumulator store.

Tiling rule (``choose_tiling``, tunables in "the rules" below): the block tiles are 16 to 128 rows by 32 to 128
columns; a static ``M`` gets the largest tile whose grid still fills ``sm_count`` SMs, or else the tile with the
most thread blocks; a symbolic ``M`` the tile of ``M = cuda.SYMBOLIC_M``. ``DEFAULT_TILING`` (128 x 128 x 32, 2 x 2
warps of 4 x 4 tiles, 3 stages) is thus the tiling of a large ``M``, and a decode-like ``M`` gets thin tiles
(16 x 32 at ``N = 4096``: 128 thread blocks, not 32): narrower ``N`` tiles rather than split-K, so every block
still owns whole outputs and the store stays the predicated accumulator store. Thin tiles stream ``B`` for few
rows: deeper ``K`` slices (about ``STAGE_HALVES`` per stage) and ``THIN_STAGES`` stages keep more bytes in flight.

Dispatch by ``M`` (``matmul_mma_cuda_dispatch``): a symbolic ``M`` need not take one tiling. The rule is
piecewise constant in ``M`` (``tiling_intervals``: the intervals of ``M`` up to ``SYMBOLIC_M`` on which
``choose_tiling`` is one tiling, the last open); the schedule is applied once per tiling to one PrimFunc, and
``ir_utils.dispatch_by_intervals`` joins the results into one function whose host code launches the kernel of
``M``'s interval.

Padded to whole thread blocks, the fragment loads and mma tiles carry no guard: a partial thread block computes
its whole tile on zero-filled operands (the copies' guards become ``cp.async``'s source size), and only the
accumulator store is guarded. ``TailSplit(strategy="partial")`` decides that guard by a guard chain above the
store's mark, so every main tile stores unguarded and a tail tile (the part of a tile inside ``C``) gets the
predicated store of ``mma_tails``; tiles wholly outside ``C`` store nothing. The pipelined loop is then the
divisible kernel's. With ``pad_to_blocks=False`` (16 x 16 tiles) a partial thread block carries guards at every
marked stage, and the chains that drop its tiles outside the padded extents sit inside the pipelined loop, around
each fragment load and mma: on an H100 that kernel took 1.4x the divisible kernel's time at 4000^3 and 1.6x at a
symbolic M of 1000 (``bench/results/tails_cuda.md``, 2026-11-25, its column (d) then). The full
split is not used here: it cuts the per-warp tile loop (``range(3)`` of 4), and ``sch.tensorize`` then refuses
("bindings ... can not be blockized": the warp index and a partial tile loop do not form a surjective iterator
map), while TVM's mma implementations use pointers (``access_ptr``, ``.data``), which
``tensorize.instantiate`` does not handle. The pipelined loops ``k0`` and ``k1`` keep their children (copies,
loads, compute), as the annotations need: every guard chain sits inside a child.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import s_tir, sym, te, tirx
from tvm.ir import Range
from tvm.s_tir import SBlock, SBlockRealize

from ..cuda import (
    DEFAULT_ARCH,
    DEFAULT_MULTIPROCESSORS,
    FILL_FRACTION,
    MAX_REGISTERS_PER_THREAD,
    MAX_THREADS_PER_BLOCK,
    SYMBOLIC_M,
    rule_intervals,
    shared_memory_per_block,
)
from ..ir_utils import (
    DispatchCase,
    dispatch_by_intervals,
    host_if,
    require_bools,
    require_sizes,
    runtime_assert,
    with_root_body,
)
from .conditions import MARK_KEY

__all__ = [
    "DEFAULT_TILING",
    "INDEX_LIMIT",
    "MMA_MARKS",
    "MMA_PASS_CONFIG",
    "MMA_TILE",
    "SHARED_ROW_ALIGN",
    "SHARED_ROW_PAD",
    "SHARED_SCOPE",
    "TAILSPLIT_STRATEGY",
    "MmaTiling",
    "bind_padded_copy_out",
    "candidate_tiles",
    "choose_tiling",
    "copy_lanes",
    "k0_pipeline",
    "matmul_fp16_func",
    "matmul_mma_cuda",
    "matmul_mma_cuda_dispatch",
    "max_rows",
    "pipeline_stages",
    "shared_row",
    "tile_tiling",
    "tiling_intervals",
]

# --------------------------------------------------------------------------------------------- the rules
MMA_TILE = 16  # the intrinsics' tile: 16 x 16 of C, 16 deep (two m16n8k16 mma.sync per tile)
WARP_SIZE = 32
FRAGMENT_ELEMENTS = MMA_TILE * MMA_TILE // WARP_SIZE  # elements of a 16 x 16 tile per lane (8 fp32 accumulators)
FRAGMENT_REGISTERS = FRAGMENT_ELEMENTS // 2  # 32-bit registers of a lane's 8 halves of a 16 x 16 fp16 fragment
# a tiling's shared memory fits one thread block of the oldest architecture the schedule targets (sm_80)
SHARED_BYTES_LIMIT = shared_memory_per_block(DEFAULT_ARCH)
# The tiling rule (``choose_tiling``, ``tile_tiling``) takes the multiprocessor count as an argument,
# ``cuda.DEFAULT_MULTIPROCESSORS`` by default; the benchmark passes the GPU's own (``cuda.multiprocessor_count``)
M_TILES = (16, 32, 64, 128)  # block tile rows: at most the smallest of these that covers M
N_TILES = (32, 64, 128)  # block tile columns (a warp's N tile stays a whole 16-column mma tile)
BLOCK_WARPS = 4  # warps per thread block where the tile has room: 2 in M (1 for odd 16-row tile counts), rest in N
STAGE_HALVES = 8192  # one pipeline stage copies about this many halves of A and B (the default's 128x32 + 32x128)
THIN_ROWS = 64  # tiles of at most this many rows stream B for few rows (memory-bound): THIN_STAGES deep
THIN_STAGES = 4
SHARED_SCOPE = "shared.dyn"  # over 48 KB: dynamic shared memory (TVM's runtime raises the kernel's limit)
SHARED_ROW_PAD = 8  # halves added to every shared row (16 bytes: ldmatrix rows fall in different banks)
SHARED_ROW_ALIGN = 32  # storage_align's factor: a shared row is SHARED_ROW_PAD halves past a multiple of this
COPY_LANES = (8, 4, 2, 1)  # candidate vector widths of a global -> shared copy, widest first (8 halves = 16 B)
TAILSPLIT_STRATEGY = "partial"  # see the module docstring
STORE_BLOCK = "C_pad_warp"  # the accumulator store (cache_write of the padded einsum)
# The PassContext config the kernel compiles under (``mma_pipeline`` sets it): the copies become cp.async; no
# common-subexpression elimination, which would hide the ``tx * 8`` of the ldmatrix offsets in a let variable where
# ``LowerWarpMemory`` cannot find it (it then fails: "require positive constant coefficient on warp index").
MMA_PASS_CONFIG = {"tirx.use_async_copy": True, "tirx.disable_cse_tir": True}

MMA_MARKS = {
    "fill": "mma_fill_16x16_f32",
    "load_a": "mma_ldmatrix_f16_a_dyn",
    "load_b": "mma_ldmatrix_f16_b_dyn",
    "mma": "mma_f16f16f32",
    "store": "mma_store_16x16_f32_global_",
}


def copy_lanes(row_length: int, per_thread: int = COPY_LANES[0]) -> int:
    """The vector width of a copy from a row-major matrix whose rows hold ``row_length`` halves, each thread
    copying ``per_thread`` halves of the slice: the widest of ``COPY_LANES`` that divides both, so every vector is
    aligned to its own size and lies wholly inside or wholly outside the matrix, and the threads split the slice
    without a remainder (cp.async moves 4, 8 or 16 bytes; a width of 1 stays a synchronous copy)."""
    return next(lanes for lanes in COPY_LANES if row_length % lanes == 0 and per_thread % lanes == 0)


def shared_row(length: int) -> int:
    """Halves per shared-memory row of a slice whose rows hold ``length`` halves: ``storage_align`` rounds the row up
    to ``SHARED_ROW_PAD`` past a multiple of ``SHARED_ROW_ALIGN`` (``length + SHARED_ROW_PAD`` only where ``length``
    is a multiple of ``SHARED_ROW_ALIGN``: a 48-deep slice's rows take 72 halves, not 56)."""
    return length + (SHARED_ROW_PAD - length) % SHARED_ROW_ALIGN


@dataclass(frozen=True)
class MmaTiling:
    """The thread-block tiling of the tensor-core matmul: ``warps`` (M, N) per thread block, each owning
    ``warp_tiles`` (M, N) 16 x 16 accumulator tiles, so the block tile of ``C`` is ``warps * warp_tiles * 16``;
    ``block_k_steps`` 16-deep mma steps per shared-memory slice (``block_k`` deep); ``stages`` slices in flight
    in the ``cp.async`` software pipeline. Checked on construction (``ValueError`` naming the field)."""

    warps: tuple[int, int] = (2, 2)  # 128 threads
    warp_tiles: tuple[int, int] = (4, 4)  # a 64 x 64 warp tile: 128 fp32 accumulators per thread
    block_k_steps: int = 2  # a 32-deep slice: A 128 x 32 and B 32 x 128 per stage
    stages: int = 3  # 3 x 18944 bytes of shared memory with the row padding

    def __post_init__(self) -> None:
        for name in ("warps", "warp_tiles"):
            value = getattr(self, name)
            if not (isinstance(value, tuple) and len(value) == 2
                    and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value)):
                raise ValueError(f"MmaTiling.{name} must be a pair of positive ints (M, N), got {value!r}")
        for name, least in (("block_k_steps", 2), ("stages", 2)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ValueError(f"MmaTiling.{name} must be an int >= {least} (the software pipeline needs it), "
                                 f"got {value!r}")
        if self.threads > MAX_THREADS_PER_BLOCK:
            raise ValueError(f"MmaTiling.warps {self.warps}: {self.threads} threads, more than {MAX_THREADS_PER_BLOCK}")
        accumulators, fragments = self.registers_at_mma
        if accumulators + fragments > MAX_REGISTERS_PER_THREAD:
            raise ValueError(f"MmaTiling.warp_tiles {self.warp_tiles}: {accumulators} fp32 accumulators and "
                             f"{fragments} fragment registers live per thread at each mma step, more than the "
                             f"{MAX_REGISTERS_PER_THREAD} registers a thread has (ptxas would spill them to local "
                             "memory)")
        for operand, elements in (("A", self.block_tile[0] * self.block_k), ("B", self.block_k * self.block_tile[1])):
            if elements % self.threads:
                raise ValueError(f"MmaTiling.warps {self.warps}: the {self.threads} threads do not split the "
                                 f"{elements}-element slice of {operand} evenly (block tile {self.block_tile}, "
                                 f"block_k {self.block_k})")
        if self.shared_bytes > SHARED_BYTES_LIMIT:
            raise ValueError(f"MmaTiling.stages {self.stages}: {self.shared_bytes} bytes of shared memory, more "
                             f"than {SHARED_BYTES_LIMIT}")

    @property
    def block_tile(self) -> tuple[int, int]:
        """Rows and columns of ``C`` per thread block."""
        return (self.warps[0] * self.warp_tiles[0] * MMA_TILE, self.warps[1] * self.warp_tiles[1] * MMA_TILE)

    @property
    def block_k(self) -> int:
        """Depth of one shared-memory slice."""
        return self.block_k_steps * MMA_TILE

    @property
    def threads(self) -> int:
        return self.warps[0] * self.warps[1] * WARP_SIZE

    @property
    def registers_at_mma(self) -> tuple[int, int]:
        """32-bit registers per thread that the warp tile keeps live at each 16-deep mma step, at least: its
        accumulators (8 fp32 per 16 x 16 tile) and one step's ``A`` and ``B`` fragments (8 halves, 4 registers, per
        tile row and tile column)."""
        rows, cols = self.warp_tiles
        return FRAGMENT_ELEMENTS * rows * cols, FRAGMENT_REGISTERS * (rows + cols)

    @property
    def shared_bytes(self) -> int:
        """Shared memory of the pipeline: ``stages`` slices of ``A`` and ``B``, rows as ``shared_row`` lays them out."""
        rows, cols = self.block_tile
        return self.stages * 2 * (rows * shared_row(self.block_k) + self.block_k * shared_row(cols))

    def name(self) -> str:
        """``BMxBNxBK/s`` with the warps and warp tiles, e.g. ``128x128x32/3 w2x2 t4x4``."""
        return (f"{self.block_tile[0]}x{self.block_tile[1]}x{self.block_k}/{self.stages} "
                f"w{self.warps[0]}x{self.warps[1]} t{self.warp_tiles[0]}x{self.warp_tiles[1]}")


DEFAULT_TILING = MmaTiling()  # 128 x 128 x 32, 2 x 2 warps of 64 x 64, 3 stages: the tiling for a large M


def pipeline_stages(tiling: MmaTiling, k: int) -> int:
    """The pipeline depth of ``tiling`` for a reduction of ``k``: its ``stages``, at most one more than the number
    of ``block_k`` slices (see the module docstring)."""
    return min(tiling.stages, -(-k // tiling.block_k) + 1)


INDEX_LIMIT = 2**31  # the kernel indexes A, B and C with 32-bit ints: every element index stays below this


def max_rows(n: int, k: int, tiling: MmaTiling) -> int:
    """The largest ``M`` whose kernel tiled by ``tiling`` keeps every element index it computes below
    ``INDEX_LIMIT`` (0 if none does): the copies and stores address whole thread-block tiles of ``A``, ``B`` and
    ``C`` (rows up to ``M`` rounded up to ``block_tile[0]``, the last slice up to ``K`` rounded up to ``block_k``,
    columns up to ``N`` rounded up to ``block_tile[1]``), beyond the matrices where predicated, and TVM's index
    arithmetic is 32-bit (``blockIdx.y * rows * K`` in ``int``), so a larger ``M`` wraps around."""
    rows, cols = tiling.block_tile
    depth = -(-k // tiling.block_k) * tiling.block_k
    width = -(-n // cols) * cols
    if (depth - 1) * n + width > INDEX_LIMIT - 1:  # B alone
        return 0
    row_length, tail = max(k, n), max(depth, width)  # A's and C's rows
    padded_rows = (INDEX_LIMIT - tail) // row_length + 1  # (padded_rows - 1) * row_length + tail <= INDEX_LIMIT - 1
    return padded_rows // rows * rows


def k0_pipeline(stages: int) -> tuple[list[int], list[int]]:
    """The ``software_pipeline_stage`` and ``software_pipeline_order`` of ``k0``'s five children (the ``A`` copy, the
    ``B`` copy, ``k1``'s prologue, steady loop and epilogue) in a pipeline ``stages`` deep: the copies in stage 0
    (asynchronous) and the consumers in the last two, the first loads one stage ahead of the mma. Two stages have
    no stage between the copies and the mma: every consumer then goes to stage 1, in program order. (With
    ``k1``'s prologue in stage 0, beside the asynchronous copies it reads, TVM 0.27's ``InjectSoftwarePipeline``
    emits ``cp.async.wait_group`` before the ``cp.async.commit_group`` of those copies, and a wait does not cover
    uncommitted copies: the first ``ldmatrix`` raced the copies of the first slice.)"""
    last = stages - 1
    if last >= 2:
        return [0, 0, last - 1, last, last], [0, 1, 3, 2, 4]
    return [0, 0, 1, 1, 1], [0, 1, 2, 3, 4]


def tile_tiling(rows: int, cols: int, k: int) -> MmaTiling:
    """The ``MmaTiling`` of a ``rows x cols`` block tile (multiples of 16) for a reduction of ``k``, by the rules:
    ``BLOCK_WARPS`` warps where the tile has room (2 in M where its 16-row tiles are even in number, else 1; in N
    the most, up to the rest, that splits its 16-column tiles evenly: a power of two, so the threads split every
    slice evenly); the slice depth ``STAGE_HALVES / (rows + cols)`` rounded down to a power-of-two number of 16-deep
    steps, at least 2, at most what divides ``k`` rounded up to whole 32-deep slices (a deeper slice then adds no
    padding); ``THIN_STAGES`` stages for a tile of at most ``THIN_ROWS`` rows, else the default's. A tile no tiling
    can run (warp tiles beyond a thread's registers) raises a ``ValueError`` naming it and the reason."""
    for name, value, unit in (("rows", rows, MMA_TILE), ("cols", cols, MMA_TILE), ("k", k, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < unit or value % unit:
            what = "a positive int" if unit == 1 else f"a positive multiple of {unit}"
            raise ValueError(f"tile_tiling: {name} must be {what}, got {value!r}")

    def warps(tiles: int, most: int) -> int:  # the most warps, a power of two up to ``most``, dividing ``tiles``
        count = 1
        while 2 * count <= most and tiles % (2 * count) == 0:
            count *= 2
        return count

    warps_m = warps(rows // MMA_TILE, 2)
    warps_n = warps(cols // MMA_TILE, BLOCK_WARPS // warps_m)
    padded_k = -(-k // (2 * MMA_TILE)) * 2 * MMA_TILE
    steps = 2
    while 2 * steps * MMA_TILE * (rows + cols) <= STAGE_HALVES and padded_k % (2 * steps * MMA_TILE) == 0:
        steps *= 2
    try:
        return MmaTiling(warps=(warps_m, warps_n),
                         warp_tiles=(rows // (warps_m * MMA_TILE), cols // (warps_n * MMA_TILE)),
                         block_k_steps=steps, stages=THIN_STAGES if rows <= THIN_ROWS else DEFAULT_TILING.stages)
    except ValueError as error:
        raise ValueError(f"tile_tiling: no tiling of a {rows} x {cols} block tile: {error}") from None


def candidate_tiles(m: int | None) -> list[tuple[int, int]]:
    """The block tiles ``(rows, cols)`` the rule chooses among: ``rows`` from ``M_TILES`` up to the smallest that
    covers ``M`` (every one for a symbolic ``M``), ``cols`` from ``N_TILES``."""
    covering = M_TILES[-1] if m is None else next((rows for rows in M_TILES if rows >= m), M_TILES[-1])
    return [(rows, cols) for rows in M_TILES if rows <= covering for cols in N_TILES]


def choose_tiling(m: int | None, n: int, k: int, sm_count: int = DEFAULT_MULTIPROCESSORS) -> MmaTiling:
    """The tiling rule. ``M`` symbolic: the tiling of ``M = SYMBOLIC_M`` (one kernel serves every ``M``, and the
    large ones carry the work and need the 128 x 128 tile's reuse: ``DEFAULT_TILING`` for ``N = 4096``; TVM's dlight
    pads a symbolic ``M`` to its 128 x 128 tile too; a decode-like ``M`` then runs ``N / 128`` thread blocks). Of the
    ``candidate_tiles`` whose grid fills the GPU (at least ``FILL_FRACTION x sm_count`` thread blocks) the largest
    tile (most reuse of each loaded element; ties: the squarer, then the one with more rows, so that ``B`` is
    streamed by fewer block rows), else the one with the most thread blocks (ties: the least padded). A decode-like
    ``M <= 16`` with ``N = 4096`` thus gets 16 x 32 tiles (128 blocks) instead of 32 blocks of 128 x 128, where
    three quarters of an H100 would idle, and ``M = 33`` one row of 64 x 32 tiles; ``tile_tiling`` sets the warps,
    slice depth and stages of the tile."""
    m, n, k, sm_count = require_sizes("choose_tiling", ("m",), m=m, n=n, k=k, sm_count=sm_count)
    if m is None:
        return choose_tiling(SYMBOLIC_M, n, k, sm_count)

    def blocks(tile: tuple[int, int]) -> int:
        return -(-m // tile[0]) * -(-n // tile[1])

    tiles = candidate_tiles(m)
    filling = [tile for tile in tiles if blocks(tile) >= FILL_FRACTION * sm_count]
    if filling:
        rows, cols = max(filling, key=lambda tile: (tile[0] * tile[1], -tile[0] - tile[1], tile[0]))
    else:
        rows, cols = max(tiles, key=lambda tile: (blocks(tile), -blocks(tile) * tile[0] * tile[1]))
    return tile_tiling(rows, cols, k)


def tiling_intervals(n: int, k: int,
                     sm_count: int = DEFAULT_MULTIPROCESSORS) -> list[tuple[int, int | None, MmaTiling]]:
    """The tiling rule over every ``M`` as ``(first, last, tiling)`` intervals (``cuda.rule_intervals``):
    ``choose_tiling(m, n, k, sm_count)`` is ``tiling`` for ``first <= m <= last``; the last interval, the one
    holding ``SYMBOLIC_M``, is open: a symbolic ``M`` above it keeps the large-``M`` tiling, as
    ``choose_tiling(None, ...)`` does. ``matmul_mma_cuda_dispatch`` builds one kernel per distinct tiling (the
    intervals of one tiling run the same kernel)."""
    return rule_intervals(lambda m: choose_tiling(m, n, k, sm_count))


# ------------------------------------------------------------------------------------------ the computation


def matmul_fp16_func(m: int | None, n: int, k: int, b_transposed: bool = False) -> tirx.PrimFunc:
    """``C = A @ B``: fp16 inputs, fp32 products and sums; ``m=None`` makes ``M`` a symbolic variable ``m``.
    ``b_transposed``: ``B`` is given as ``N x K`` and ``C = A @ B.T``."""
    rows = tirx.Var("m", "int32") if m is None else m
    a = te.placeholder((rows, k), "float16", name="A")
    b = te.placeholder((n, k) if b_transposed else (k, n), "float16", name="B")
    r = te.reduce_axis((0, k), name="r")

    def b_element(reduction, column):
        return b[column, reduction] if b_transposed else b[reduction, column]

    c = te.compute((rows, n), lambda i, j: te.sum(a[i, r].astype("float32") * b_element(r, j).astype("float32"),
                                                  axis=r), name="C")
    return te.create_prim_func([a, b, c]).with_attr("global_symbol", "main")


def _tile_layout(i, j):
    """A 2-D warp buffer as TVM's mma intrinsics see it: ``[i // 16, j // 16, thread, register]``."""
    from tvm.s_tir.tensor_intrin.cuda import shared_16x16_to_ldmatrix_32x8_layout

    return (i // MMA_TILE, j // MMA_TILE, *shared_16x16_to_ldmatrix_32x8_layout(i % MMA_TILE, j % MMA_TILE))


# --------------------------------------------------------------------------------------------- the schedule


def _has_block(sch: s_tir.Schedule, name: str) -> bool:
    names: list = []
    tvm_ffi.structural_walk(sch.mod["main"].body, (SBlock, lambda block: names.append(block.name_hint)))
    return name in names


def matmul_mma_cuda(m: int | None = 1000, n: int = 1000, k: int = 1000, pipeline: bool = True,
                    pad_to_blocks: bool = True, padded_output: bool = False,
                    tiling: MmaTiling = DEFAULT_TILING) -> tvm.IRModule:
    """The marked tensor-core matmul (see the module docstring) tiled by ``tiling`` (``choose_tiling(m, n, k)``
    is the rule's choice for the shape); ``pipeline=False`` leaves out the ``software_pipeline_*`` annotations
    (same meaning, one stage); ``padded_output=True`` writes the result through the padded global ``C_pad`` and a
    copy-back kernel instead of the predicated accumulator store. ``pad_to_blocks`` (the default):
    ``sch.pad_einsum`` pads ``M`` and ``N`` to whole ``tiling.block_tile`` thread-block tiles, so no thread block is
    partial in its compute and only the store carries a guard (with ``padded_output``, TVM's way to a tail-free
    kernel: the tail benchmark's (b)); ``False`` pads to whole instruction tiles, the partial blocks' loads and mma
    tiles guarded (the tail benchmark's (c))."""
    m, n, k = require_sizes("matmul_mma_cuda", ("m",), m=m, n=n, k=k)
    require_bools("matmul_mma_cuda", pipeline=pipeline, pad_to_blocks=pad_to_blocks, padded_output=padded_output)
    if not isinstance(tiling, MmaTiling):
        raise TypeError(f"matmul_mma_cuda: tiling must be an MmaTiling (e.g. choose_tiling(m, n, k)), got "
                        f"{tiling!r}")
    limit = _rows_within_index_limit("matmul_mma_cuda", m, n, k, [tiling])
    func = matmul_fp16_func(m, n, k)
    mod = _schedule(func, m, n, k, pipeline, pad_to_blocks, padded_output, tiling)
    return mod if m is not None else _launched_for_rows(mod, func.params[0].shape[0], limit)


def _rows_within_index_limit(caller: str, m: int | None, n: int, k: int, tilings: list[MmaTiling]) -> int:
    """The largest ``M`` every one of ``tilings`` indexes within ``INDEX_LIMIT`` (``max_rows``); a ``ValueError``
    naming ``caller`` and the sizes where no ``M`` (or the static ``m``) is within it."""
    limit = min(max_rows(n, k, tiling) for tiling in tilings)
    if limit == 0:
        raise ValueError(f"{caller}: n = {n}, k = {k}: the kernel's 32-bit element indices of B pass {INDEX_LIMIT}")
    if m is not None and m > limit:
        raise ValueError(f"{caller}: m = {m} with n = {n}, k = {k}: the kernel's 32-bit element indices of A, B and "
                         f"C would pass {INDEX_LIMIT} (the largest m is {limit})")
    return limit


def matmul_mma_cuda_dispatch(n: int = 4096, k: int = 4096, pipeline: bool = True, pad_to_blocks: bool = True,
                             padded_output: bool = False, sm_count: int = DEFAULT_MULTIPROCESSORS) -> tvm.IRModule:
    """The marked tensor-core matmul for a symbolic ``M`` with the tiling rule's choice for every ``M``: one
    PrimFunc whose host code picks, by ``m``, one kernel per interval of ``tiling_intervals(n, k, sm_count)``
    (``ir_utils.dispatch_by_intervals``), each ``matmul_mma_cuda(None, n, k, ..., tiling=...)`` with its own
    grid, so a decode-like ``M`` runs thin tiles over the whole GPU and a large ``M`` the 128 x 128 tile. The
    other arguments are ``matmul_mma_cuda``'s; ``TailSplit`` and the ``"tailsplit_mma"`` pipeline treat the
    cases' marks as they treat one kernel's. ``M = 0`` runs no kernel."""
    n, k, sm_count = require_sizes("matmul_mma_cuda_dispatch", n=n, k=k, sm_count=sm_count)
    require_bools("matmul_mma_cuda_dispatch", pipeline=pipeline, pad_to_blocks=pad_to_blocks,
                  padded_output=padded_output)
    intervals = tiling_intervals(n, k, sm_count)
    limit = _rows_within_index_limit("matmul_mma_cuda_dispatch", None, n, k, [tiling for _, _, tiling in intervals])
    func = matmul_fp16_func(None, n, k)
    m = func.params[0].shape[0]
    scheduled: dict[MmaTiling, tirx.PrimFunc] = {}
    cases = []
    for first, last, tiling in intervals:
        if tiling not in scheduled:
            scheduled[tiling] = _schedule(func, None, n, k, pipeline, pad_to_blocks, padded_output, tiling)["main"]
        cases.append(DispatchCase(first, last, "t{}x{}".format(*tiling.block_tile), scheduled[tiling]))
    dispatched = dispatch_by_intervals(m, cases)
    checked = tirx.SeqStmt([_row_check(m, limit), dispatched.body.block.body])
    return tvm.IRModule({"main": with_root_body(dispatched, checked)})


def _schedule(func: tirx.PrimFunc, m: int | None, n: int, k: int, pipeline: bool, pad_to_blocks: bool,
              padded_output: bool, tiling: MmaTiling) -> tvm.IRModule:
    """``matmul_mma_cuda`` on the matmul ``func`` (``matmul_fp16_func(m, n, k)``): the result keeps ``func``'s
    parameters."""
    import tvm.s_tir.tensor_intrin.cuda  # noqa: F401 - registers the mma intrinsics the marks name

    sch = s_tir.Schedule(func)
    block = sch.get_sblock("C")
    pad = [*tiling.block_tile, tiling.block_k] if pad_to_blocks else [MMA_TILE, MMA_TILE, tiling.block_k]
    for axis, extent in enumerate((m, n)):
        if extent is not None and extent <= MMA_TILE < tiling.block_tile[axis]:
            # an operand of one 16-wide tile in a block tile of several is padded to two: TVM's transform_layout
            # simplifies the fragment index of a one-tile buffer (i // 16 -> 0, i % 16 -> i), which folds the warp
            # tile loop into the register index and fails LowerMatchBuffer's offset_factor check; the block
            # covers both tiles, so the grid does not change
            pad[axis] = 2 * MMA_TILE
    padded = m is None or m % pad[0] != 0 or n % pad[1] != 0 or k % pad[2] != 0
    if padded:
        sch.pad_einsum(block, pad)
    i, j, r = sch.get_loops(block)
    i, i_tile = sch.split(i, [None, MMA_TILE])
    j, j_tile = sch.split(j, [None, MMA_TILE])
    r, r_tile = sch.split(r, [None, MMA_TILE])
    i_block, i_warp, i_warp_tile = sch.split(i, [None, tiling.warps[0], tiling.warp_tiles[0]])
    j_block, j_warp, j_warp_tile = sch.split(j, [None, tiling.warps[1], tiling.warp_tiles[1]])
    k0, k1 = sch.split(r, [None, tiling.block_k_steps])
    sch.reorder(i_block, j_block, i_warp, j_warp, k0, k1, i_warp_tile, j_warp_tile, i_tile, j_tile, r_tile)
    sch.bind(i_block, "blockIdx.y")
    sch.bind(j_block, "blockIdx.x")
    sch.bind(i_warp, "threadIdx.z")
    sch.bind(j_warp, "threadIdx.y")

    shared = [sch.cache_read(block, index, SHARED_SCOPE) for index in (0, 1)]
    for stage in shared:
        sch.compute_at(stage, k0)
    fragments = [sch.cache_read(block, index, "warp") for index in (0, 1)]
    for fragment in fragments:
        sch.compute_at(fragment, k1)
    accumulator = sch.cache_write(block, 0, "warp")
    sch.reverse_compute_at(accumulator, j_warp)
    for pad in ("A_pad", "B_pad") if padded else ():  # an operand whose extents are whole tiles has no padding
        if _has_block(sch, pad):
            sch.compute_inline(sch.get_sblock(pad))

    slices = (tiling.block_tile[0] * tiling.block_k, tiling.block_k * tiling.block_tile[1])  # elements of A, B
    for stage, row_length, elements in zip(shared, (k, n), slices, strict=True):
        lanes = copy_lanes(row_length, elements // tiling.threads)
        fused = sch.fuse(*sch.get_loops(stage)[-2:])
        _, t_z, t_y, t_x, vector = sch.split(fused, [None, *tiling.warps, WARP_SIZE, lanes])
        sch.bind(t_z, "threadIdx.z")
        sch.bind(t_y, "threadIdx.y")
        sch.bind(t_x, "threadIdx.x")
        if lanes > 1:
            sch.vectorize(vector)
        sch.storage_align(stage, 0, axis=-2, factor=SHARED_ROW_ALIGN, offset=SHARED_ROW_PAD)

    def tile(stage: s_tir.SBlockRV) -> tuple[s_tir.LoopRV, s_tir.LoopRV, s_tir.LoopRV]:
        rows, cols = sch.get_loops(stage)[-2:]
        rows_o, rows_i = sch.split(rows, [None, MMA_TILE])
        cols_o, cols_i = sch.split(cols, [None, MMA_TILE])
        sch.reorder(rows_o, cols_o, rows_i, cols_i)
        return rows_o, cols_o, rows_i

    load_a, load_b, store = tile(fragments[0]), tile(fragments[1]), tile(accumulator)
    init = sch.decompose_reduction(block, k0)
    sch.transform_layout(fragments[0], ("write", 0), _tile_layout)
    sch.transform_layout(fragments[1], ("write", 0), _tile_layout)
    sch.transform_layout(accumulator, ("read", 0), _tile_layout)

    init_loops = sch.get_loops(init)
    marked = [(load_a, "load_a"), (load_b, "load_b"), (store, "store"),
              ((init_loops[-4], init_loops[-3], init_loops[-2]), "fill"), ((i_warp_tile, j_warp_tile, i_tile), "mma")]
    for (rows_o, cols_o, tile_loop), stage in marked:
        sch.unroll(rows_o)  # the warp's tiles: unrolled, so the fragments and accumulators index registers
        sch.unroll(cols_o)
        sch.annotate(tile_loop, MARK_KEY, MMA_MARKS[stage])

    if pipeline:
        # k1's body: the A load, the B load, the mma tiles (the loads one step ahead). k1 is pipelined first; k0's
        # body then holds the A copy, the B copy and k1's prologue (first loads), steady loop and epilogue (last
        # mma): the annotations of TVM's MultiLevelTilingTensorCore for mma with async copies.
        sch.annotate(k1, "software_pipeline_stage", [0, 0, 1])
        sch.annotate(k1, "software_pipeline_order", [0, 1, 2])
        stage, order = k0_pipeline(pipeline_stages(tiling, k))
        sch.annotate(k0, "software_pipeline_stage", stage)
        sch.annotate(k0, "software_pipeline_order", order)
        sch.annotate(k0, "software_pipeline_async_stages", [0])

    if not _has_block(sch, "C_pad"):  # M and N whole tiles (only K padded): the store writes C itself
        return sch.mod
    if padded_output:
        bind_padded_copy_out(sch)
        return sch.mod
    sch.reverse_compute_inline(sch.get_sblock("C_pad"))  # the copy back folded into the store: T.where(i < M, j < N)
    return _bindings_inside_domains(sch.mod, STORE_BLOCK)


def _launched_for_rows(mod: tvm.IRModule, m: tirx.Var, limit: int) -> tvm.IRModule:
    """``mod`` (a symbolic ``M``) with its root block's body under ``if tvm_thread_invariant(m > 0)``: host code,
    so ``M = 0`` launches no kernel. Without it TVM's CUDA runtime would launch the grid extent 0 as one block
    (``ir_utils.launched_extent``), which TailSplit's guard chains keep from storing anything, but which still
    costs a launch (``ir_utils.host_if``, as ``dispatch_by_intervals`` wraps its cases). Before it, a run-time
    check that ``m <= limit`` (``max_rows``: a larger ``M`` would wrap the kernel's 32-bit indices around)."""
    func = mod["main"]
    body = tirx.SeqStmt([_row_check(m, limit), host_if(m > 0, func.body.block.body)])
    return tvm.IRModule({"main": with_root_body(func, body)}, attrs=mod.attrs)


def _row_check(m: tirx.Var, limit: int) -> tirx.Stmt:
    """A host-side run-time check ``m <= limit`` (``RuntimeError`` naming the limit)."""
    return runtime_assert(m <= limit, f"matmul_mma_cuda: m must be at most {limit}: a larger M would pass "
                                      f"{INDEX_LIMIT} in the kernel's 32-bit element indices of A, B or C")


def _bindings_inside_domains(mod: tvm.IRModule, block_name: str) -> tvm.IRModule:
    """``mod`` with the predicate of block ``block_name`` strengthened by ``binding < min + extent`` for each iter
    var whose binding neither the enclosing loop ranges nor a conjunct ``binding < bound`` of the predicate keep
    inside its domain. TVM 0.27's ``reverse_compute_inline``
    rebuilds the accumulator store's predicate from the consumer's bounds only, so where ``C`` is as wide as the
    padded tile range (``N = 16``: one tile, the warps' loops cover 128 columns) it drops the producer's
    ``j < 16`` and the store would write past ``C``."""
    analyzer = sym.Analyzer()

    def on_for(node: tirx.For, mutator):
        if isinstance(node.min, tirx.IntImm) and isinstance(node.extent, tirx.IntImm):
            analyzer.bind(node.loop_var, Range.from_min_extent(node.min, node.extent), allow_override=True)
        return mutator.default_mutate(node)

    def on_realize(node: SBlockRealize, mutator):
        if node.block.name_hint != block_name:
            return mutator.default_mutate(node)
        predicate = node.predicate
        atoms = _conjuncts(predicate)
        for iter_var, value in zip(node.block.iter_vars, node.iter_values, strict=True):
            end = iter_var.dom.min + iter_var.dom.extent
            bounded = any(isinstance(atom, tirx.LT) and analyzer.can_prove_equal(atom.a, value)
                          and analyzer.can_prove(atom.b <= end) for atom in atoms)
            if not bounded and not analyzer.can_prove(value < end):
                predicate = tirx.And(predicate, value < end)
        return SBlockRealize(node.iter_values, predicate, node.block)

    func = mod["main"]
    body = tvm_ffi.structural_mutate(func.body, [(tirx.For, on_for), (SBlockRealize, on_realize)])
    return tvm.IRModule({"main": func.with_body(body)}, attrs=mod.attrs)


def _conjuncts(expr: tvm.ir.PrimExpr) -> list:
    return [*_conjuncts(expr.a), *_conjuncts(expr.b)] if isinstance(expr, tirx.And) else [expr]


def bind_padded_copy_out(sch: s_tir.Schedule) -> None:
    """The copy of the padded result (block ``C_pad``) back to C: one element per thread, 256 per block."""
    copy_out = sch.get_sblock("C_pad")
    thread_block, thread = sch.split(sch.fuse(*sch.get_loops(copy_out)), [None, 256])
    sch.bind(thread_block, "blockIdx.x")
    sch.bind(thread, "threadIdx.x")
