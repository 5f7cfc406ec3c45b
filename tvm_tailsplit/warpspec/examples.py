"""Example kernels in the form WarpSpecialize accepts (used by the tests, the tutorial and the benchmark).

* `seed_example()`: the seed's straight-line example. Producers p1..p7 on warp role 0 copy row `i` of `X` into
  the shared range they need (0-10, 10-20, 20-30, 15-30, 30-45, 45-60, 0-50 of a 60-element staging buffer);
  consumer ci on warp role 1 reads the range pi wrote and writes row `i` of `O`.
* `streaming_kernel(...)`: element-wise `Y = 2 X + 1` over tiles; a copy role loads tile `t` into stage `t % stages`
  of a shared ring, a compute role reads it.
* `symbolic_streaming_kernel(...)`: the same with a symbolic length `n` (a buffer dimension): the pipeline loop
  runs `n // tile` iterations, a trip count known only at run time (analyzed by `warpspec.symbolic`).
  `streaming_kernel` is this kernel specialized (`PrimFunc.specialize`) to a constant length.
* `scheduled_scale_kernel(...)`: `B = 3 A` from TE, scheduled the usual way (split, `cache_read` into shared,
  `compute_at`, `blockize`) and annotated with `sch.annotate(block, "warp_role", r)`: the input form as a
  schedule produces it, with blocks nested in the tasks.
* `gemm_kernel(...)`: tiled GEMM, fp16 inputs and fp32 accumulation. Per CTA (grid loops over output tiles bound to
  `blockIdx`), a copy role loads the A and B tiles of step `k` into stage `k % stages` of two shared rings; one or
  two compute roles (each owning a band of rows of the output tile) accumulate into a shared fp32 tile and store it.
* `symbolic_k_gemm_kernel(...)`: the same GEMM with a symbolic reduction length `K` (a buffer dimension, a
  multiple of `block_k`): `K // block_k` pipeline steps. `gemm_kernel` is this kernel specialized to a constant `K`.
  With `ctas`, its persistent form: `ctas` CTAs, each looping over the output tiles `bx, bx + ctas, ...` around
  the fill, the K loop and the stores, its rings indexed by the running step `tt * K_steps + ko` (a persistent
  nest, `warpspec.symbolic`).
* `hopper_gemm_kernel(...)`: the GEMM shaped for Hopper (TMA boxes, wgmma tiles, two consumer warpgroups), its
  tile width `block_n` one of 256, 128, 64, 32 (`tiling.hopper_block_n` is the rule for a shape);
  `ctas=persistent_ctas(tiles)` gives its persistent form with at most one CTA per multiprocessor.
* `hopper_gemm_dispatch(n, k, passes)`: a symbolic M with the rule's tile width for every M: one kernel per width,
  each built by `hopper_gemm_kernel` and run through `passes`, the host picking one by M (`ir_utils`'
  `dispatch_by_intervals`).

The GEMMs take any `m` and `n` (a *ragged* output): the grid covers `ceildiv(m, block_m) x ceildiv(n, block_n)`
tiles, the loads of the edge tiles are guarded by the operands' bounds (zeros outside, which TMA does in hardware
on Hopper) and the stores by the output's, under a mark (`tiles.FRAGMENT_STORE_MARK`) on their row loop, so that
TailSplit (`strategy="partial"`) decides the tiles above the mark: main tiles store without a condition, tail tiles
only their rows and columns inside the output. `m=None` makes the rows a symbolic `M` (a buffer dimension, at least
1: a CUDA grid has no empty dimension): one kernel for every M, its grid `ceildiv(M, block_m)` rows of tiles, its
loads and stores always guarded by M (TailSplit decides the tiles by a chain of tests on `blockIdx.y` and M).
"""

from __future__ import annotations

from collections.abc import Sequence

import tvm
from tvm import s_tir, te, tirx
from tvm.ir import Range
from tvm.s_tir import SBlock, SBlockRealize
from tvm.script import tirx as T

from ..cuda import DEFAULT_MULTIPROCESSORS
from ..ir_utils import (
    EMIT_INSN_PRAGMA,
    DispatchCase,
    conjunction,
    dispatch_by_intervals,
    require_sizes,
    runtime_assert,
    with_root_body,
)
from .tiles import FRAGMENT_STORE_MARK, TMA_MAX_BOX_ROWS, TMA_ROW_BYTES, WGMMA_M, WGMMA_MAX_N
from .tiling import hopper_block_n_intervals
from .tree import WARP_ROLE

__all__ = [
    "SEED_RANGES",
    "gemm_kernel",
    "hopper_gemm_dispatch",
    "hopper_gemm_kernel",
    "persistent_ctas",
    "scheduled_scale_kernel",
    "seed_example",
    "streaming_kernel",
    "symbolic_k_gemm_kernel",
    "symbolic_streaming_kernel",
]

SEED_RANGES = ((0, 10), (10, 20), (20, 30), (15, 30), (30, 45), (45, 60), (0, 50))


def _copy_block(name: str, role: int, dst: tirx.Buffer, src: tirx.Buffer, row: int, lo: int, hi: int,
                to_shared: bool) -> SBlockRealize:
    i = tirx.Var("i", "int32")
    if to_shared:
        store = tirx.BufferStore(dst, tirx.BufferLoad(src, [tirx.IntImm("int32", row), i]), [i])
        reads = [tirx.BufferRegion(src, [Range.from_min_extent(row, 1), Range.from_min_extent(lo, hi - lo)])]
        writes = [tirx.BufferRegion(dst, [Range.from_min_extent(lo, hi - lo)])]
    else:
        value = tirx.BufferLoad(src, [i]) + tirx.FloatImm("float32", 1.0)
        store = tirx.BufferStore(dst, value, [tirx.IntImm("int32", row), i])
        reads = [tirx.BufferRegion(src, [Range.from_min_extent(lo, hi - lo)])]
        writes = [tirx.BufferRegion(dst, [Range.from_min_extent(row, 1), Range.from_min_extent(lo, hi - lo)])]
    body = tirx.For(i, lo, hi - lo, tirx.ForKind.SERIAL, store)
    block = SBlock([], reads, writes, name, body, annotations={WARP_ROLE: role})
    return SBlockRealize([], True, block)


def seed_example(ranges: Sequence[tuple[int, int]] = SEED_RANGES) -> tirx.PrimFunc:
    """The seed's example: p1..p7 (warp role 0) and c1..c7 (warp role 1) over a 60-element shared buffer.

    Other `ranges` (half-open `(lo, hi)` pairs) give the same kind of straight-line producer/consumer program.
    """
    bad = next((r for r in ranges if not (len(r) == 2 and all(isinstance(v, int) and not isinstance(v, bool)
                                                                for v in r) and 0 <= r[0] < r[1])), None)
    if not ranges or bad is not None:
        raise ValueError("seed_example: ranges must be a non-empty sequence of (lo, hi) pairs with 0 <= lo < hi, got "
                         + (repr(tuple(bad)) if bad is not None else repr(ranges)))
    rows = len(ranges)
    width = max(hi for _, hi in ranges)
    x = tirx.decl_buffer((rows, width), "float32", "X")
    o = tirx.decl_buffer((rows, width), "float32", "O")
    staging = tirx.decl_buffer((width,), "float32", "S", scope="shared")
    body = []
    for n, (lo, hi) in enumerate(ranges):
        body.append(_copy_block(f"p{n + 1}", 0, staging, x, n, lo, hi, to_shared=True))
        body.append(_copy_block(f"c{n + 1}", 1, o, staging, n, lo, hi, to_shared=False))
    root = SBlock([], [], [], "root", tirx.SeqStmt(body), alloc_buffers=[staging])
    return tirx.PrimFunc([x, o], SBlockRealize([], True, root)).with_attrs(
        {"global_symbol": "seed_example", "tirx.noalias": True, "s_tir": True})


def _specialize_shape(func: tirx.PrimFunc, param: int, shape: tuple[int | None, ...]) -> tirx.PrimFunc:
    """`func` with the buffer parameter number `param` given the constant `shape` (binding its symbolic dims); a
    `None` in `shape` keeps that dimension symbolic."""
    buffer = func.params[param]
    shape = tuple(dim if value is None else value for dim, value in zip(buffer.shape, shape, strict=True))
    func = func.specialize({buffer: tirx.decl_buffer(shape, buffer.dtype, buffer.name)})
    body = func.body.block.body
    if (isinstance(body, tirx.SeqStmt) and isinstance(body.seq[0], tirx.AssertStmt)
            and isinstance(body.seq[0].condition, tirx.IntImm) and int(body.seq[0].condition)):
        rest = list(body.seq[1:])  # the size check of `_require_k_steps`, which the sizes given meet
        func = with_root_body(func, rest[0] if len(rest) == 1 else tirx.SeqStmt(rest))
    return func


def streaming_kernel(tiles: int = 8, tile: int = 16, stages: int = 2) -> tirx.PrimFunc:
    """`Y[t * tile + i] = 2 X[t * tile + i] + 1` with a copy role (0) and a compute role (1) over a shared ring of
    `stages` tiles: `symbolic_streaming_kernel` specialized to the length `tiles * tile`."""
    tile, stages = require_sizes("streaming_kernel", tile=tile, stages=stages)
    (tiles,) = require_sizes("streaming_kernel", least=0, tiles=tiles)
    return _specialize_shape(symbolic_streaming_kernel(tile, stages), 0, (tiles * tile,))


def symbolic_streaming_kernel(tile: int = 16, stages: int = 2) -> tirx.PrimFunc:
    """`streaming_kernel` over a symbolic length `n` (a multiple of `tile`): `n // tile` pipeline iterations, a
    ring of `stages` tiles."""
    tile, stages = require_sizes("symbolic_streaming_kernel", tile=tile, stages=stages)

    @T.prim_func(s_tir=True)
    def streaming(x: T.handle, y: T.handle):
        T.func_attr({"global_symbol": "streaming", "tirx.noalias": True})
        n = T.int32()
        X = T.match_buffer(x, (n,), "float32")
        Y = T.match_buffer(y, (n,), "float32")
        ring = T.sblock_alloc_buffer((stages, tile), "float32", scope="shared")
        for t in range(n // tile):
            with T.sblock("load"):
                T.reads(X[t * tile:t * tile + tile])
                T.writes(ring[t % stages, 0:tile])
                T.sblock_attr({"warp_role": 0})
                for i in range(tile):
                    ring[t % stages, i] = X[t * tile + i]
            with T.sblock("compute"):
                T.reads(ring[t % stages, 0:tile])
                T.writes(Y[t * tile:t * tile + tile])
                T.sblock_attr({"warp_role": 1})
                for i in range(tile):
                    Y[t * tile + i] = ring[t % stages, i] * T.float32(2) + T.float32(1)

    return streaming


def scheduled_scale_kernel(n: int = 256, tile: int = 32) -> tirx.PrimFunc:
    """`B = 3 A` over `n` elements scheduled into tiles of `tile` (a divisor of `n`): a shared-memory copy block
    (warp role 0) and a compute block (role 1)."""
    n, tile = require_sizes("scheduled_scale_kernel", n=n, tile=tile)
    if n % tile:
        raise ValueError(f"scheduled_scale_kernel: n must be a multiple of tile, got n={n}, tile={tile}")
    a = te.placeholder((n,), "float32", name="A")
    b = te.compute((n,), lambda i: a[i] * 3.0, name="B")
    sch = s_tir.Schedule(te.create_prim_func([a, b]).with_attr("global_symbol", "scale"))
    block = sch.get_sblock("B")
    outer, inner = sch.split(sch.get_loops(block)[0], [None, tile])
    shared = sch.cache_read(block, 0, "shared")
    sch.compute_at(shared, outer)
    sch.annotate(sch.blockize(sch.get_loops(shared)[-1]), WARP_ROLE, 0)
    sch.annotate(sch.blockize(inner), WARP_ROLE, 1)
    return sch.mod["main"]


def gemm_kernel(m: int | None = 64, n: int = 64, k: int = 128, block_m: int = 32, block_n: int = 32,
                block_k: int = 16, stages: int = 3, compute_roles: int = 1, b_transposed: bool = False
                ) -> tirx.PrimFunc:
    """`C = A @ B` (A: m x k, B: k x n, fp16; C fp32; any `m` and `n`; `m=None`: a symbolic `M`) with a copy role
    (0) and `compute_roles` compute roles: `symbolic_k_gemm_kernel` specialized to the reduction length `k` (a
    multiple of `block_k`). Tiles of `block_m` x `block_n` x `block_k`, rings of `stages` stages; `b_transposed`
    as there."""
    m, n, k, block_m, block_n, block_k, stages = require_sizes(
        "gemm_kernel", ("m",), m=m, n=n, k=k, block_m=block_m, block_n=block_n, block_k=block_k, stages=stages)
    if k % block_k:
        raise ValueError(f"gemm_kernel: k must be a multiple of block_k ({block_k}), got {k}")
    func = symbolic_k_gemm_kernel(m, n, block_m, block_n, block_k, stages, compute_roles, b_transposed)
    return _specialize_shape(func, 0, (m, k))


def hopper_gemm_kernel(m: int | None = 4096, n: int = 4096, k: int | None = None, block_m: int = 128,
                       block_n: int = 256, block_k: int = 64, stages: int = 4, zero_fill_k: bool = False,
                       ctas: int | None = None, group_rows: int | None = None) -> tirx.PrimFunc:
    """The GEMM shaped for Hopper's warp-specialized form: `C = A @ B.T` (A: m x K, B: n x K, both K-major as
    `wgmma` reads them; C fp32), 128 x `block_n` x 64 tiles (`block_n` 256 by default; `tiling.hopper_block_n`
    chooses one of `tiling.HOPPER_BLOCK_N` for a shape), 4 stages, two compute roles of 64 rows each; any `m` and
    `n` (a ragged output: see the module doc; run TailSplit before WarpSpecialize). `k=None` keeps the reduction
    length symbolic, `m=None` the rows (one kernel for every M, e.g. decode-like M of 1 to a few hundred rows; TMA's
    tensor map of A takes M at launch). `zero_fill_k`: any K (a multiple of 8, TMA's 16-byte stride rule), the last K
    tile's loads filled with zeros past K (what TMA does out of bounds). `ctas`: the persistent form (see
    `symbolic_k_gemm_kernel`; `persistent_ctas` gives the count for an H100), its tiles in groups of `group_rows`
    rows when given (`hopper_group_rows` is the rule). Lower it with
    `WarpSpecialize("cuda", hopper=True)`. Other tiles: `block_m` 128 or 256 (two consumer warpgroups' bands of
    64-row wgmma blocks, one TMA box of at most 256 rows), `block_n` a multiple of 8 up to 256 (wgmma's N),
    `block_k` 64 (a 128-byte swizzled row); any other is a `ValueError` naming the argument. With `block_m` 256 a
    consumer thread holds `block_n` accumulators: WarpSpecialize refuses `block_n` over 200 (they would spill,
    `hopper.FRAGMENT_HEADROOM_REGISTERS`)."""
    m, n, k, block_m, block_n, block_k, stages = require_sizes(
        "hopper_gemm_kernel", ("m", "k"), m=m, n=n, k=k, block_m=block_m, block_n=block_n, block_k=block_k,
        stages=stages)
    _require_hopper_tiles(block_m, block_n, block_k)
    func = symbolic_k_gemm_kernel(m, n, block_m, block_n, block_k, stages, 2, b_transposed=True,
                                  zero_fill_k=zero_fill_k, ctas=ctas, group_rows=group_rows)
    if k is None:
        return func
    if k % block_k and not zero_fill_k:
        raise ValueError(f"hopper_gemm_kernel: k must be a multiple of block_k ({block_k}) unless zero_fill_k=True, "
                         f"got {k}")
    return _specialize_shape(func, 0, (m, k))


def _require_hopper_tiles(block_m: int, block_n: int, block_k: int) -> None:
    """A `ValueError` naming the argument unless the tile has Hopper's form (`warpspec.tiles`): the others reach
    WarpSpecialize as tasks of no tile form, refused there without the reason."""
    rules = (
        ("block_m", block_m, block_m % (2 * WGMMA_M) == 0 and block_m <= TMA_MAX_BOX_ROWS,
         f"a multiple of {2 * WGMMA_M} up to {TMA_MAX_BOX_ROWS} (two consumer warpgroups, each a band of "
         f"{WGMMA_M}-row wgmma blocks; A's TMA box has at most {TMA_MAX_BOX_ROWS} rows)"),
        ("block_n", block_n, block_n % 8 == 0 and block_n <= WGMMA_MAX_N,
         f"a multiple of 8 up to {WGMMA_MAX_N} (a wgmma m64nNk16's N)"),
        ("block_k", block_k, block_k * 2 == TMA_ROW_BYTES,
         f"{TMA_ROW_BYTES // 2} (a TMA box row of {TMA_ROW_BYTES} bytes of fp16, the 128-byte swizzle wgmma reads)"),
    )
    for name, value, valid, rule in rules:
        if not valid:
            raise ValueError(f"hopper_gemm_kernel: {name} must be {rule}, got {value}")


def hopper_gemm_dispatch(n: int, k: int | None, passes: tvm.transform.Pass, zero_fill_k: bool = False,
                         sms: int = DEFAULT_MULTIPROCESSORS) -> tvm.IRModule:
    """The Hopper GEMM for a symbolic M with the tile width of `tiling.hopper_block_n` for every M: one
    `hopper_gemm_kernel(None, n, k, block_n=w, zero_fill_k=...)` per width of `tiling.hopper_block_n_intervals(n,
    sms)`, each run through `passes` (e.g. `Sequential([TailSplit(strategy="partial"), WarpSpecialize("cuda",
    hopper=True)])`: the passes see one kernel at a time), joined by `ir_utils.dispatch_by_intervals` into one
    function whose host code encodes the tensor maps of, and launches, the kernel of M's interval (at N = 4096:
    32-wide tiles up to M = 128, 64 to 384, 128 to 896, 256 above). Compile it with the pipeline the passes need
    (`WARP_SPECIALIZED_PIPELINE`)."""
    cases = []
    for first, last, block_n in hopper_block_n_intervals(n, sms):
        func = hopper_gemm_kernel(None, n, k, block_n=block_n, zero_fill_k=zero_fill_k)
        (specialized,) = passes(tvm.IRModule({"main": func})).functions.values()
        cases.append(DispatchCase(first, last, f"n{block_n}", specialized))
    first_case = cases[0].func
    return tvm.IRModule({"main": dispatch_by_intervals(first_case.params[0].shape[0], cases)})


def persistent_ctas(tiles: int, sms: int = DEFAULT_MULTIPROCESSORS) -> int:
    """The CTAs of a persistent kernel over `tiles` output tiles: as few as give the same number of waves as `sms`
    CTAs, `ceildiv(tiles, ceildiv(tiles, sms))`, so that the CTAs' tile counts differ by at most one. Rule: at most
    one CTA per multiprocessor (`sms`, `cuda.DEFAULT_MULTIPROCESSORS` by default): one CTA of the Hopper GEMM (4
    stages of 48 KiB) fills a multiprocessor's shared memory, so more would only queue."""
    tiles, sms = require_sizes("persistent_ctas", tiles=tiles, sms=sms)
    waves = -(-tiles // sms)
    return -(-tiles // waves)


def symbolic_k_gemm_kernel(m: int | None = 64, n: int = 64, block_m: int = 32, block_n: int = 32, block_k: int = 16,
                           stages: int = 3, compute_roles: int = 1, b_transposed: bool = False,
                           zero_fill_k: bool = False, ctas: int | None = None,
                           group_rows: int | None = None) -> tirx.PrimFunc:
    """The GEMM of `gemm_kernel` with a symbolic `K` (a multiple of `block_k`, asserted at the call): `K // block_k`
    steps. Any `m` and `n`: the edge tiles' loads and stores are guarded, the stores under a mark (module doc).
    `b_transposed`: B is given as n x K (`C = A @ B.T`), and its ring holds `block_n x block_k` tiles.
    `zero_fill_k`: any `K`, in `ceildiv(K, block_k)` steps whose loads store zeros past `K`.
    `m=None`: a symbolic row count `M` (A: M x K, C: M x n, a buffer dimension like `K`): the grid has
    `ceildiv(M, block_m)` rows of tiles (a symbolic `blockIdx.y` extent), and the loads and stores are always guarded
    by `M` (its stores marked), since any M may be ragged.

    `compute_roles` 1 or 2: one compute role (1) owns the whole output tile (blocks `init`, `mma`, `store`); with
    two, role 1 owns the top half of its rows (`init_top`, `mma_top`, `store_top`) and role 2 the bottom half
    (`init_bottom`, ...).

    `ctas`: the persistent form. The grid is `ctas` CTAs (`blockIdx.x`, at most the number of tiles); CTA `bx`
    runs the tiles `t = bx + tt * ctas` (row-major over the tile grid, or grouped: below) in a serial loop
    `for tt in range(ceildiv(tiles - bx, ctas))`, a trip count of its own, around the fill, the K loop and the
    stores of tile `t`. The rings are indexed by the running step `tt * K_steps + ko` (stage
    `(tt * K_steps + ko) % stages`), continuing from tile to tile: WarpSpecialize sees the nest as one pipeline
    over the running step (`warpspec.symbolic`, persistent nests), so the producer fills the next tile's first
    stages while the consumers store the current tile. With a symbolic `M` the tile count
    `ceildiv(M, block_m) * ceildiv(n, block_n)` is a run-time value and `ctas` a constant chosen for the largest M
    expected (any count >= 1): a CTA `bx` past the tiles of a smaller M runs no tile (its trip count is at most 0),
    producer and consumers alike.

    `group_rows` (persistent form only): the tiles in groups of `group_rows` rows of tiles (the last group the rows
    left), a group's tiles column by column: tile `t` of group `g = t // (group_rows * tiles_n)` is row
    `g * group_rows + r % rows`, column `r // rows` (`r`: `t`'s place in its group, `rows`: the group's rows). The
    CTAs run consecutive tiles at once, so one wave of them reads the A rows and B columns of a near-square block
    of the output instead of a few rows and every column of B (the grouped order of Triton's and CUTLASS's
    GEMMs); L2 then serves more of the wave's reads.
    """
    m, n, block_m, block_n, block_k, stages = require_sizes(
        "symbolic_k_gemm_kernel", ("m",), m=m, n=n, block_m=block_m, block_n=block_n, block_k=block_k,
        stages=stages)
    if compute_roles not in (1, 2) or isinstance(compute_roles, bool):
        raise ValueError(f"symbolic_k_gemm_kernel: compute_roles must be 1 or 2, got {compute_roles!r}")
    if block_m % compute_roles:
        raise ValueError(f"symbolic_k_gemm_kernel: block_m ({block_m}) must split into the rows of the "
                         f"{compute_roles} compute roles")
    band = block_m // compute_roles  # the output rows of one compute role
    two_roles = compute_roles == 2
    top = "_top" if two_roles else ""
    b_rows, b_cols = (block_n, block_k) if b_transposed else (block_k, block_n)
    b_ring_shape = (stages, b_rows, b_cols)
    tiles_n = -(-n // block_n)
    ragged_m, ragged_n = m is None or m % block_m != 0, n % block_n != 0
    # the stores of a ragged output are marked for TailSplit, which decides their tiles above the mark
    store_marks = {EMIT_INSN_PRAGMA: FRAGMENT_STORE_MARK} if ragged_m or ragged_n else None
    if ctas is not None and m is None and ctas < 1:
        raise ValueError(f"ctas must be at least 1, got {ctas}")
    if ctas is not None and m is not None and not 1 <= ctas <= -(-m // block_m) * tiles_n:
        raise ValueError(f"ctas must be between 1 and the {-(-m // block_m) * tiles_n} output tiles, got {ctas}")
    if group_rows is not None:
        (group_rows,) = require_sizes("symbolic_k_gemm_kernel", group_rows=group_rows)
        if ctas is None:
            raise ValueError("symbolic_k_gemm_kernel: group_rows orders the tiles of the persistent form; give ctas "
                             "too (the grid of the other form is ordered by the hardware)")

    def tiles_m(A):  # the rows of tiles: a constant, or ceildiv(M, block_m) at run time
        return tirx.ceildiv(A.shape[0], block_m) if m is None else -(-m // block_m)

    def tile_of(A, t):  # (row, column) of the t-th output tile of the persistent order
        if group_rows is None:
            return t // tiles_n, t % tiles_n
        span = group_rows * tiles_n  # the tiles of a whole group
        first = t // span * group_rows
        # (at least 1 for any t: analyses evaluate the nest past a CTA's tiles, where the band would be empty)
        rows = tirx.max(tirx.min(tiles_m(A) - first, group_rows), 1)
        return first + t % span % rows, t % span // rows

    def b_index(stage, kk, j):  # the B ring element multiplying A[., kk] into output column j
        return (stage, j, kk) if b_transposed else (stage, kk, j)

    def k_steps(length):
        return tirx.ceildiv(length, block_k) if zero_fill_k else length // block_k

    def in_bounds(row=None, rows=None, col=None, k_index=None, length=None):  # a ragged index's guard, or True
        bounds = [index < extent for index, extent, ragged in
                  ((row, rows, ragged_m), (col, n, ragged_n), (k_index, length, zero_fill_k))
                  if ragged and index is not None]
        return conjunction(bounds) if bounds else True

    def guarded(value, **indices):  # the loaded element, or zero outside the operand
        bounds = in_bounds(**indices)
        return value if bounds is True else tirx.if_then_else(bounds, value, tirx.const(0, "float16"))

    def stage(step0, ko):  # the ring stage of K step `ko` of a tile whose running steps start at `step0`
        return ko % stages if step0 is None else (step0 + ko) % stages

    @T.macro
    def output_tile(A, B, C, A_ring, B_ring, acc, K, by, bx, step0):
        with T.sblock("init" + top):
            T.reads()
            T.writes(acc[0:band, 0:block_n])
            T.sblock_attr({"warp_role": 1})
            for i, j in T.grid(band, block_n):
                acc[i, j] = T.float32(0)
        if two_roles:
            with T.sblock("init_bottom"):
                T.reads()
                T.writes(acc[band:block_m, 0:block_n])
                T.sblock_attr({"warp_role": 2})
                for i, j in T.grid(band, block_n):
                    acc[band + i, j] = T.float32(0)
        for ko in range(k_steps(K)):
            with T.sblock("load_A"):
                T.reads(A[by * block_m:by * block_m + block_m, ko * block_k:ko * block_k + block_k])
                T.writes(A_ring[stage(step0, ko), 0:block_m, 0:block_k])
                T.sblock_attr({"warp_role": 0})
                for i, j in T.grid(block_m, block_k):
                    A_ring[stage(step0, ko), i, j] = guarded(A[by * block_m + i, ko * block_k + j],
                                                             row=by * block_m + i, rows=A.shape[0],
                                                             k_index=ko * block_k + j,
                                                             length=K)
            if b_transposed:
                with T.sblock("load_B"):
                    T.reads(B[bx * block_n:bx * block_n + block_n, ko * block_k:ko * block_k + block_k])
                    T.writes(B_ring[stage(step0, ko), 0:block_n, 0:block_k])
                    T.sblock_attr({"warp_role": 0})
                    for i, j in T.grid(block_n, block_k):
                        B_ring[stage(step0, ko), i, j] = guarded(B[bx * block_n + i, ko * block_k + j],
                                                                 col=bx * block_n + i, k_index=ko * block_k + j,
                                                                 length=K)
            else:
                with T.sblock("load_B"):
                    T.reads(B[ko * block_k:ko * block_k + block_k, bx * block_n:bx * block_n + block_n])
                    T.writes(B_ring[stage(step0, ko), 0:block_k, 0:block_n])
                    T.sblock_attr({"warp_role": 0})
                    for i, j in T.grid(block_k, block_n):
                        B_ring[stage(step0, ko), i, j] = guarded(B[ko * block_k + i, bx * block_n + j],
                                                                 col=bx * block_n + j, k_index=ko * block_k + i,
                                                                 length=K)
            with T.sblock("mma" + top):
                T.reads(A_ring[stage(step0, ko), 0:band, 0:block_k],
                        B_ring[stage(step0, ko), 0:b_rows, 0:b_cols], acc[0:band, 0:block_n])
                T.writes(acc[0:band, 0:block_n])
                T.sblock_attr({"warp_role": 1})
                for i, j, kk in T.grid(band, block_n, block_k):
                    acc[i, j] = acc[i, j] + T.Cast("float32", A_ring[stage(step0, ko), i, kk]) * T.Cast(
                        "float32", B_ring[b_index(stage(step0, ko), kk, j)])
            if two_roles:
                with T.sblock("mma_bottom"):
                    T.reads(A_ring[stage(step0, ko), band:block_m, 0:block_k],
                            B_ring[stage(step0, ko), 0:b_rows, 0:b_cols], acc[band:block_m, 0:block_n])
                    T.writes(acc[band:block_m, 0:block_n])
                    T.sblock_attr({"warp_role": 2})
                    for i, j, kk in T.grid(band, block_n, block_k):
                        acc[band + i, j] = acc[band + i, j] + T.Cast(
                            "float32", A_ring[stage(step0, ko), band + i, kk]) * T.Cast(
                            "float32", B_ring[b_index(stage(step0, ko), kk, j)])
        with T.sblock("store" + top):
            T.reads(acc[0:band, 0:block_n])
            T.writes(C[by * block_m:by * block_m + band, bx * block_n:bx * block_n + block_n])
            T.sblock_attr({"warp_role": 1})
            for i in T.serial(band, annotations=store_marks):
                for j in range(block_n):
                    if in_bounds(row=by * block_m + i, rows=C.shape[0], col=bx * block_n + j):
                        C[by * block_m + i, bx * block_n + j] = acc[i, j]
        if two_roles:
            with T.sblock("store_bottom"):
                T.reads(acc[band:block_m, 0:block_n])
                T.writes(C[by * block_m + band:by * block_m + block_m, bx * block_n:bx * block_n + block_n])
                T.sblock_attr({"warp_role": 2})
                for i in T.serial(band, annotations=store_marks):
                    for j in range(block_n):
                        if in_bounds(row=by * block_m + band + i, rows=C.shape[0], col=bx * block_n + j):
                            C[by * block_m + band + i, bx * block_n + j] = acc[band + i, j]

    @T.prim_func(s_tir=True)
    def gemm(a: T.handle, b: T.handle, c: T.handle):
        T.func_attr({"global_symbol": "gemm", "tirx.noalias": True})
        K = T.int32()
        M = T.int32()
        A = T.match_buffer(a, (M if m is None else m, K), "float16")
        B = T.match_buffer(b, (n, K) if b_transposed else (K, n), "float16")
        C = T.match_buffer(c, (M if m is None else m, n), "float32")
        A_ring = T.sblock_alloc_buffer((stages, block_m, block_k), "float16", scope="shared")
        B_ring = T.sblock_alloc_buffer(b_ring_shape, "float16", scope="shared")
        acc = T.sblock_alloc_buffer((block_m, block_n), "float32", scope="shared")
        if ctas is None:
            for by in T.thread_binding(tiles_m(A), thread="blockIdx.y"):
                for bx in T.thread_binding(tiles_n, thread="blockIdx.x"):
                    output_tile(A, B, C, A_ring, B_ring, acc, K, by, bx, None)
        else:
            for cta in T.thread_binding(ctas, thread="blockIdx.x"):
                for tt in range(tirx.ceildiv(tiles_m(A) * tiles_n - cta, ctas)):
                    output_tile(A, B, C, A_ring, B_ring, acc, K, *tile_of(A, cta + tt * ctas), tt * k_steps(K))

    return gemm if zero_fill_k else _require_k_steps(gemm, block_k)


def _require_k_steps(func: tirx.PrimFunc, block_k: int) -> tirx.PrimFunc:
    """`func` (a GEMM whose K loop runs `K // block_k` steps) checking first that `K` is a multiple of `block_k`:
    the columns past the last whole step would be dropped from the sum, a wrong result without a word."""
    k = func.params[0].shape[1]
    check = runtime_assert(tirx.floormod(k, block_k) == 0, f"gemm: K must be a multiple of block_k = {block_k} (the "
                           f"kernel's K loop runs K // {block_k} steps; build it with zero_fill_k=True for any K)")
    return with_root_body(func, tirx.SeqStmt([check, func.body.block.body]))
