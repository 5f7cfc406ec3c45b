"""End-to-end TailSplit workloads a TVM user recognizes, on shapes that are not multiples of the tile.

Each workload builds a scheduled TensorIR module whose instruction-sized loop carries the mark
(``MARK_KEY`` naming a registered ``TensorIntrin``):

- ``dense_int8_vnni``: an int8 dense layer (uint8 activations x int8 weights packed ``[N/16, K/4, 16, 4]``
  -> int32) tiled in 8 x 16 tiles of ``C`` for the register-blocked AVX-512 VNNI kernel
  (``intrinsics.VNNI_DENSE_8x16_ANY_DEPTH``: 8 accumulators over the whole reduction, one ``vpdpbusd`` per row
  and 4-step group; its masked tail form covers fewer rows and fewer than 16 outputs), with a static or a
  symbolic ``M``;
- ``matmul_fp32``: an fp32 matmul tiled in 8 x 16 tiles of ``C`` for the any-depth micro-kernel
  (``intrinsics.MATMUL_8x16_ANY_DEPTH``: accumulators in registers over the whole reduction), ``B`` packed per
  16-column panel where enough row tiles read each panel (``MATMUL_PACK_MIN_ROW_TILES``), with a static or a
  symbolic ``M`` (a symbolic one holds both kernels, dispatched on ``M``);
- ``elementwise_nc1hwc0``: a 5-D ``C = A * B`` over ``N, C1, H, W, C0`` with an irregular ``h`` tiling and
  the 16-lane vector multiply on ``c0``;
- ``matmul_wmma_cuda``: the fp16 matmul (fp32 accumulate) scheduled for CUDA tensor cores (wmma 16x16x16:
  ``blockIdx``/``threadIdx`` binding, shared-memory and wmma-fragment stages), the mark on the mma loop;
- ``matmul_mma_cuda`` (module ``mma_schedule``): the same matmul through ``mma.sync`` m16n8k16, ``ldmatrix`` and a
  ``cp.async`` software pipeline, thread-block tiles by ``MmaTiling`` (128 x 128 x 32 by default; the rule
  ``choose_tiling`` thins them for a small ``M``), ``M`` static or symbolic; compiled with the
  ``"tailsplit_mma"`` pipeline (``mma_pipeline``).

``WORKLOADS`` describes the CPU workloads as data (``Workload``): the tiled axes and the tile, the computation,
the schedule (marked, or vectorized the way TVM users tile without the instruction), the block that carries the
update, how to pad it to whole tiles, and its numpy oracle. The tail benchmark (``bench/tail_variants.py``) builds
its variants from these fields alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import tvm
import tvm_ffi
from tvm import s_tir, te, tirx
from tvm.s_tir import SBlock

from ..ir_utils import DispatchCase, dispatch_by_intervals, require_sizes
from . import intrinsics
from .conditions import MARK_KEY
from .intrinsics import MATMUL_PANEL_TILE, llvm_target
from .mma_schedule import bind_padded_copy_out, matmul_fp16_func, matmul_mma_cuda
from .tensorize import tensorize_marked

__all__ = [
    "DENSE_TILE",
    "ELEMENTWISE_LANES",
    "MATMUL_INTRINSIC",
    "MATMUL_PACK_MIN_ROW_TILES",
    "VECTOR_MUL_INTRINSIC",
    "VNNI_INTRINSIC",
    "WMMA_INTRINSIC",
    "WMMA_MARKS",
    "WMMA_TILE",
    "WMMA_WARPS",
    "WORKLOADS",
    "Workload",
    "dense_int8_vnni",
    "elementwise_nc1hwc0",
    "llvm_target",
    "matmul_fp32",
    "matmul_mma_cuda",
    "matmul_packs_panels",
    "matmul_wmma_cuda",
    "reference",
    "register_workload_intrinsics",
    "vectorize_if_allowed",
]

# The marks of the workloads: the package's intrinsics (``intrinsics.register_intrinsics`` registers them with
# their tail forms).
VNNI_INTRINSIC = intrinsics.VNNI_DENSE_8x16_ANY_DEPTH
MATMUL_INTRINSIC = intrinsics.MATMUL_8x16_ANY_DEPTH
VECTOR_MUL_INTRINSIC = intrinsics.MUL_16
WMMA_INTRINSIC = "wmma_sync_16x16x16_f16f16f32"
# tile of each workload over its tiled axes
DENSE_TILE = intrinsics.VNNI_PANEL_TILE  # (m, n) of the VNNI kernel; its k loop is the whole reduction
ELEMENTWISE_LANES = 16
WMMA_TILE = (16, 16, 16)


# ---------------------------------------------------------------------------------------------- intrinsics


def register_workload_intrinsics() -> None:
    """Register the intrinsics of the workloads (idempotent): the package's, with their tail forms
    (``intrinsics.register_intrinsics``); TVM's built-ins such as WMMA are registered on demand by
    ``tensorize_marked``."""
    intrinsics.register_intrinsics()


# ---------------------------------------------------------------------------------------------- computations


def _dense_int8_func(m: int | None, n: int, k: int) -> tirx.PrimFunc:
    """``C[i, j] = sum_r int32(A[i, r]) * int32(W[j // 16, r // 4, j % 16, r % 4])`` for ``j < n``, ``r < k``;
    the packed weight is allocated for whole 16 x 4 tiles (packing pads with zeros, as weights are packed
    once, offline). ``m=None`` makes ``M`` a symbolic variable named ``m``."""
    rows = tirx.Var("m", "int32") if m is None else m
    a = te.placeholder((rows, k), "uint8", name="A")
    w = te.placeholder((-(-n // 16), -(-k // 4), 16, 4), "int8", name="W")
    r = te.reduce_axis((0, k), name="r")
    c = te.compute(
        (rows, n),
        lambda i, j: te.sum(a[i, r].astype("int32") * w[j // 16, r // 4, j % 16, r % 4].astype("int32"), axis=r),
        name="C",
    )
    return te.create_prim_func([a, w, c]).with_attr("global_symbol", "main")


def _matmul_func(m: int | None, n: int, k: int) -> tirx.PrimFunc:
    """``C = A @ B`` in fp32; ``m=None`` makes ``M`` a symbolic variable named ``m``."""
    rows = tirx.Var("m", "int32") if m is None else m
    a = te.placeholder((rows, k), "float32", name="A")
    b = te.placeholder((k, n), "float32", name="B")
    r = te.reduce_axis((0, k), name="r")
    c = te.compute((rows, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return te.create_prim_func([a, b, c]).with_attr("global_symbol", "main")


def _elementwise_func(n: int, c1: int, h: int, w: int, c0: int) -> tirx.PrimFunc:
    shape = (n, c1, h, w, c0)
    a = te.placeholder(shape, "float32", name="A")
    b = te.placeholder(shape, "float32", name="B")
    c = te.compute(shape, lambda *idx: a[idx] * b[idx], name="C")
    return te.create_prim_func([a, b, c]).with_attr("global_symbol", "main")


# ------------------------------------------------------------------------------------------------- schedules


def vectorize_if_allowed(sch: s_tir.Schedule, loop: s_tir.LoopRV) -> bool:
    """``sch.vectorize`` where TVM accepts it; a loop a guard depends on is refused (it stays serial, and
    LLVM's own vectorizer may still handle it)."""
    try:
        sch.vectorize(loop)
    except s_tir.ScheduleError:
        return False
    return True


def _schedule_dense(sch: s_tir.Schedule, mark: bool, vectorize: bool, block_name: str = "C") -> s_tir.LoopRV:
    """Loops ``j_0, i_0, i_1, j_1, r`` (the VNNI kernel's ``i, j, k``: per 16-output column panel ``j_0`` (its
    packed weights stay in L1), tiles of 8 x 16 of ``C``, each over the whole reduction, the block's init kept:
    the kernel starts from zero and stores ``C`` once). Returns the loop carrying the instruction (``i_1``).

    The vectorized baseline is what TVM gives without the instruction: loops ``j_0, r_0, i, r_1, j_1``, the init
    split out above ``r_0`` (``decompose_reduction``), the 16 outputs as the vector lanes, every row's 16 outputs
    updated in ``C`` at each 4-step group; it returns the outer tile loop."""
    block = sch.get_sblock(block_name)
    i, j, r = sch.get_loops(block)
    j_0, j_1 = sch.split(j, [None, DENSE_TILE[1]])
    if vectorize:
        r_0, r_1 = sch.split(r, [None, 4])
        sch.reorder(j_0, r_0, i, r_1, j_1)
        sch.decompose_reduction(block, r_0)
        vectorize_if_allowed(sch, j_1)
        return j_0
    i_0, i_1 = sch.split(i, [None, DENSE_TILE[0]])
    sch.reorder(j_0, i_0, i_1, j_1, r)
    if mark:
        sch.annotate(i_1, MARK_KEY, VNNI_INTRINSIC)
    return i_1


def _schedule_matmul(sch: s_tir.Schedule, mark: bool, vectorize: bool, pack: bool = False) -> s_tir.LoopRV:
    """Loops ``i_0, j_0, i_1, j_1, r`` (the micro-kernel's ``i, j, k``: tiles of 8 x 16 of ``C``, each over the
    whole reduction, the block's init kept: the kernel starts from zero). The vectorized baseline splits the init
    out above ``r`` instead (``decompose_reduction``), its 16 columns as vector lanes.

    ``pack`` (the tensorized kernel of TailSplit and of the divisible shape): the classic GEMM panel layout. Loops
    ``j_0, i_0, ...``; per 16-column panel ``j_0`` the columns of ``B`` are first copied (``sch.cache_read``, laid
    out by ``sch.transform_layout`` as ``[N/16, K, 16]``) into a panel of whole 64-byte rows, which every row tile
    then reads from L1. Without it the rows of ``B`` start off a cache line whenever ``N`` is not a multiple of 16
    and every 16-float load straddles two lines. The copy of the last, partial panel pads with zeros; the
    computation reads only the columns inside ``N``."""
    if pack and vectorize:
        raise ValueError("the panel packing belongs to the tensorized kernel, not to the vectorized baseline")
    block = sch.get_sblock("C")
    panel = None
    if pack:
        panel = sch.cache_read(block, 1, "global")
        sch.transform_layout(block, ("read", 1), lambda r, j: (j // MATMUL_PANEL_TILE[1], r, j % MATMUL_PANEL_TILE[1]),
                             pad_value=0.0)
    i, j, r = sch.get_loops(block)
    i_0, i_1 = sch.split(i, [None, MATMUL_PANEL_TILE[0]])
    j_0, j_1 = sch.split(j, [None, MATMUL_PANEL_TILE[1]])
    if vectorize:  # the same tiling, the 16 columns as vector lanes, the row loop unrolled
        sch.reorder(i_0, j_0, r, i_1, j_1)
        sch.decompose_reduction(block, r)
        sch.unroll(i_1)
        vectorize_if_allowed(sch, j_1)
        return i_0
    if panel is not None:
        sch.reorder(j_0, i_0, i_1, j_1, r)
        sch.compute_at(panel, j_0)
        sch.vectorize(sch.get_loops(panel)[-1])
    else:
        sch.reorder(i_0, j_0, i_1, j_1, r)
    if mark:
        sch.annotate(i_1, MARK_KEY, MATMUL_INTRINSIC)
    return i_1


def _schedule_elementwise(sch: s_tir.Schedule, mark: bool, vectorize: bool, h_tile: int) -> s_tir.LoopRV:
    """Loops ``n, c1, h_o, h_i, w, c0`` with ``h`` cut into tiles of ``h_tile``; the 16 lanes on ``c0``."""
    block = sch.get_sblock("C")
    n, c1, h, w, c0 = sch.get_loops(block)
    h_o, h_i = sch.split(h, [None, h_tile])
    if vectorize:
        vectorize_if_allowed(sch, c0)
        return h_o
    if mark:
        sch.annotate(c0, MARK_KEY, VECTOR_MUL_INTRINSIC)
    return c0


# ------------------------------------------------------------------------------------------- public builders


def dense_int8_vnni(m: int | None = 127, n: int = 1000, k: int = 255) -> tvm.IRModule:
    """An int8 dense layer ``C[m, n] = A[m, k] (uint8) x W[n, k] (int8, packed [N/16, K/4, 16, 4]) -> int32``,
    tiled for the register-blocked VNNI kernel (loops ``j_0, i_0, i_1, j_1, r``: 8 x 16 tiles of ``C`` over the
    whole reduction, the block's init kept), marked on ``i_1``. ``m=None``: ``M`` is symbolic."""
    m, n, k = require_sizes("dense_int8_vnni", ("m",), m=m, n=n, k=k)
    sch = s_tir.Schedule(_dense_int8_func(m, n, k))
    _schedule_dense(sch, mark=True, vectorize=False)
    return sch.mod


MATMUL_PACK_MIN_ROW_TILES = 3
"""Rule: ``matmul_fp32`` packs ``B``'s 16-column panels when at least this many 8-row tiles of ``C`` read each
panel (``M > 16``). The copy reads ``B`` once and writes one panel that stays in cache, and it pays where the row
tiles then read their panel from cache instead of ``B``'s rows (at a power-of-two pitch such as N = 4096 those
rows fall in a few cache sets); a thin ``M`` (decode-like rows: one or two row tiles) reads ``B`` in place.
Measured side by side in ``bench/results/tails.md`` (the packing table: in place 1.3-2.3x faster at M <= 8 and
1.07-1.24x at M = 16; packed 1.2-1.6x faster from M = 17 to 64 at N = 4096; at N = 1000 the two meet at M = 24-32)."""


def matmul_packs_panels(m: int) -> bool:
    """Whether ``matmul_fp32`` packs ``B`` for ``m`` rows (``MATMUL_PACK_MIN_ROW_TILES``; ``m`` a non-negative int:
    0 rows read nothing, as the symbolic function's in-place case runs them)."""
    (m,) = require_sizes("matmul_packs_panels", least=0, m=m)
    return -(-m // MATMUL_PANEL_TILE[0]) >= MATMUL_PACK_MIN_ROW_TILES


def _marked_matmul(m: int | None, n: int, k: int, pack: bool) -> tirx.PrimFunc:
    sch = s_tir.Schedule(_matmul_func(m, n, k))
    _schedule_matmul(sch, mark=True, vectorize=False, pack=pack)
    return sch.mod["main"]


def matmul_fp32(m: int | None = 127, n: int = 255, k: int = 129, pack: bool | None = None) -> tvm.IRModule:
    """An fp32 matmul ``C[M, N] = A[M, K] @ B[K, N]`` (``m``, ``n``, ``k``) tiled for the any-depth 8 x 16
    micro-kernel (the block's init kept, the mark on ``i_1``), ``B`` packed per 16-column panel at ``j_0``
    (``pack=True``: loops ``j_0, i_0, i_1, j_1, r``, the panel copied at the top of ``j_0``) or read in place
    (``False``: loops ``i_0, j_0, i_1, j_1, r``); ``pack=None`` applies the rule
    ``matmul_packs_panels``. ``m=None``: ``M`` is symbolic; with ``pack=None`` the function then holds both
    kernels, each run for the rows the rule gives it (``ir_utils.dispatch_by_intervals`` on ``M``; block names
    suffixed ``_in_place`` and ``_packed``)."""
    m, n, k = require_sizes("matmul_fp32", ("m",), m=m, n=n, k=k)
    if pack is not None and not isinstance(pack, bool):
        raise TypeError(f"matmul_fp32: pack must be True, False or None (the rule), got {pack!r}")
    if m is not None or pack is not None:
        return tvm.IRModule({"main": _marked_matmul(m, n, k, matmul_packs_panels(m) if pack is None else pack)})
    in_place_rows = MATMUL_PANEL_TILE[0] * (MATMUL_PACK_MIN_ROW_TILES - 1)
    in_place, packed = _marked_matmul(None, n, k, False), _marked_matmul(None, n, k, True)
    cases = [DispatchCase(0, in_place_rows, "in_place", in_place),
             DispatchCase(in_place_rows + 1, None, "packed", packed)]
    return tvm.IRModule({"main": dispatch_by_intervals(in_place.params[0].shape[0], cases)})


def elementwise_nc1hwc0(n: int = 2, c1: int = 3, h: int = 30, w: int = 28, c0: int = ELEMENTWISE_LANES,
                        h_tile: int = 8) -> tvm.IRModule:
    """``C = A * B`` over an ``N, C1, H, W, C0`` tensor (sizes ``n``, ``c1``, ``h``, ``w``, ``c0``), ``h`` cut
    into tiles of ``h_tile`` (30 = 3 x 8 + a tail of 6), the 16-lane vector multiply marked on ``c0``."""
    n, c1, h, w, c0, h_tile = require_sizes("elementwise_nc1hwc0", n=n, c1=c1, h=h, w=w, c0=c0, h_tile=h_tile)
    sch = s_tir.Schedule(_elementwise_func(n, c1, h, w, c0))
    _schedule_elementwise(sch, mark=True, vectorize=False, h_tile=h_tile)
    return sch.mod


def matmul_wmma_cuda(m: int = 1000, n: int = 1000, k: int = 1000) -> tvm.IRModule:
    """The fp16 matmul ``C[m, n] = A[m, k] @ B[k, n]`` (fp32 accumulate) for CUDA tensor cores, scheduled as TVM's
    own wmma schedules do.

    The iteration space is padded to whole 16 x 16 x 16 wmma tiles (``sch.pad_einsum``, the padding inlined into
    the shared-memory copies, so out-of-range elements load as zeros); ``blockIdx.y/x`` cover 64 x 32 blocks of
    ``C`` and ``threadIdx.z/y`` 4 x 2 warps of one 16 x 16 tile each; per 16-wide ``k`` step ``A`` and ``B`` are
    copied to shared memory by all threads and loaded into ``wmma.matrix_a/b`` fragments; the accumulator lives in
    ``wmma.accumulator``. 1008 (the padded 1000) is not a multiple of the 64 x 32 block, so every stage of the
    last blocks is guarded. Marks: the mma loop (``wmma_sync_16x16x16_f16f16f32``) and the fill, the two fragment
    loads and the store, each on the outermost loop of its 16 x 16 tile."""
    m, n, k = require_sizes("matmul_wmma_cuda", m=m, n=n, k=k)
    return _schedule_wmma(matmul_fp16_func(m, n, k))


# -------------------------------------------------------------------------------------------------- the CUDA


WMMA_WARPS = (4, 2)  # warps per thread block in (i, j), one 16 x 16 tile of C each
WMMA_MARKS = {
    "fill": "wmma_fill_16x16x16_f32",
    "load_a": "wmma_load_16x16x16_f16_a_shared",
    "load_b": "wmma_load_16x16x16_f16_b_shared",
    "mma": WMMA_INTRINSIC,
    "store": "wmma_store_16x16x16_f32_global",
}


def _mark_tile(sch: s_tir.Schedule, block: s_tir.SBlockRV, intrinsic: str) -> None:
    """Cut the last two loops of ``block`` into 16 x 16 tiles and mark the tile's outer loop."""
    rows, cols = sch.get_loops(block)[-2:]
    rows_o, rows_i = sch.split(rows, [None, WMMA_TILE[0]])
    cols_o, cols_i = sch.split(cols, [None, WMMA_TILE[1]])
    sch.reorder(rows_o, cols_o, rows_i, cols_i)
    sch.annotate(rows_i, MARK_KEY, intrinsic)


def _schedule_wmma(func: tirx.PrimFunc) -> tvm.IRModule:
    sch = s_tir.Schedule(func)
    block = sch.get_sblock("C")
    shape = [int(extent) for extent in func.params[2].shape] + [int(func.params[0].shape[1])]
    padded = any(extent % tile for extent, tile in zip(shape, WMMA_TILE, strict=True))
    if padded:
        sch.pad_einsum(block, list(WMMA_TILE))
    i, j, r = sch.get_loops(block)
    # one wmma tile per warp: a warp's tiles must be contiguous for blockize once TailSplit has cut the grid
    i_b, i_w, i_i = sch.split(i, [None, WMMA_WARPS[0], WMMA_TILE[0]])
    j_b, j_w, j_i = sch.split(j, [None, WMMA_WARPS[1], WMMA_TILE[1]])
    r_o, r_i = sch.split(r, [None, WMMA_TILE[2]])
    sch.reorder(i_b, j_b, i_w, j_w, r_o, i_i, j_i, r_i)
    sch.bind(i_b, "blockIdx.y")
    sch.bind(j_b, "blockIdx.x")
    sch.bind(i_w, "threadIdx.z")
    sch.bind(j_w, "threadIdx.y")
    accumulator = sch.cache_write(block, 0, "wmma.accumulator")
    sch.reverse_compute_at(accumulator, j_w)
    stages = [(sch.cache_read(block, index, "shared"), sch.cache_read(block, index, scope), mark)
              for index, scope, mark in ((0, "wmma.matrix_a", "load_a"), (1, "wmma.matrix_b", "load_b"))]
    for shared, fragment, _ in stages:
        sch.compute_at(fragment, r_o)
        sch.compute_at(shared, r_o)
    if padded:
        sch.compute_inline(sch.get_sblock("A_pad"))
        sch.compute_inline(sch.get_sblock("B_pad"))
    for shared, fragment, mark in stages:
        fused = sch.fuse(*sch.get_loops(shared)[-2:])
        _, t_z, t_y, t_x = sch.split(fused, [None, WMMA_WARPS[0], WMMA_WARPS[1], 32])
        sch.bind(t_z, "threadIdx.z")
        sch.bind(t_y, "threadIdx.y")
        sch.bind(t_x, "threadIdx.x")
        _mark_tile(sch, fragment, WMMA_MARKS[mark])
    init = sch.decompose_reduction(block, r_o)
    sch.annotate(sch.get_loops(init)[-2], MARK_KEY, WMMA_MARKS["fill"])
    _mark_tile(sch, accumulator, WMMA_MARKS["store"])
    sch.annotate(i_i, MARK_KEY, WMMA_MARKS["mma"])
    if padded:
        bind_padded_copy_out(sch)
    return sch.mod


# ---------------------------------------------------------------------------------------- padding helpers


def _dense_padded_by_hand(m: int, n: int, k: int) -> tvm.IRModule:
    """The padded dense a user writes when the kernel needs whole tiles: the activations padded with zero rows to
    ``M`` a multiple of 8, ``C`` computed for ``N`` a multiple of 16 into a padded buffer, then cropped (the
    kernel takes any depth: ``K`` needs no padding); the copies exist only where the shape needs them."""
    m_pad, n_pad = -(-m // DENSE_TILE[0]) * DENSE_TILE[0], -(-n // DENSE_TILE[1]) * DENSE_TILE[1]
    a = te.placeholder((m, k), "uint8", name="A")
    w = te.placeholder((n_pad // 16, -(-k // 4), 16, 4), "int8", name="W")
    a_pad = a if m_pad == m else te.compute(
        (m_pad, k), lambda i, r: tvm.tirx.if_then_else(i < m, a[i, r], tvm.tirx.const(0, "uint8")), name="A_pad")
    r = te.reduce_axis((0, k), name="r")
    cropped = (m_pad, n_pad) != (m, n)
    c_pad = te.compute(
        (m_pad, n_pad),
        lambda i, j: te.sum(a_pad[i, r].astype("int32") * w[j // 16, r // 4, j % 16, r % 4].astype("int32"),
                            axis=r),
        name="C_pad" if cropped else "C",
    )
    c = te.compute((m, n), lambda i, j: c_pad[i, j], name="C") if cropped else c_pad
    sch = s_tir.Schedule(te.create_prim_func([a, w, c]).with_attr("global_symbol", "main"))
    _schedule_dense(sch, mark=True, vectorize=False, block_name="C_pad" if cropped else "C")
    vectorize_copies(sch, ("A_pad", "C") if cropped else ("A_pad",))
    return tensorize_marked(sch.mod)


def vectorize_copies(sch: s_tir.Schedule, names: tuple[str, ...]) -> None:
    """Vectorize the padding copies (16 lanes of their innermost loop) where TVM accepts it; a shape that needs no
    padding has no copies."""
    existing = set()
    tvm_ffi.structural_walk(sch.mod["main"].body, (SBlock, lambda block: existing.add(block.name_hint)))
    for name in names:
        if name not in existing:
            continue
        inner = sch.get_loops(sch.get_sblock(name))[-1]
        _, lanes = sch.split(inner, [None, 16])
        vectorize_if_allowed(sch, lanes)


# ------------------------------------------------------------------------------------------- the workloads


def _reference_dense(inputs: list[np.ndarray], shape: dict[str, int]) -> np.ndarray:
    a, w = inputs[:2]
    n, k = shape["n"], shape["k"]
    unpacked = w.transpose(0, 2, 1, 3).reshape(w.shape[0] * 16, w.shape[1] * 4)[:n, :k]
    return a.astype(np.int32) @ unpacked.astype(np.int32).T


def _reference_matmul(inputs: list[np.ndarray], shape: dict[str, int]) -> np.ndarray:
    a, b = inputs[:2]
    return a.astype(np.float32) @ b.astype(np.float32)


def _reference_elementwise(inputs: list[np.ndarray], shape: dict[str, int]) -> np.ndarray:
    return inputs[0] * inputs[1]


@dataclass(frozen=True)
class Workload:
    """One CPU workload as data.

    ``tiled`` names the shape parameters the tile covers (``tile``, in the same order); ``build(**shape)`` is the
    marked module; ``compute(**shape)`` the unscheduled PrimFunc and ``schedule(sch, mark, vectorize)`` its tiling
    (marked for the instruction, or with the lanes vectorized the way a user tiles without it); ``update_block``
    is the block that carries the computation once scheduled (``C_update`` after ``decompose_reduction``);
    ``pad_tile`` is the tile ``sch.pad_einsum`` pads the block's iteration space to (1 on axes that need no
    padding), or ``None`` for a block that is not an einsum, padded by ``pad_by_hand(**shape)`` instead;
    ``reference(inputs, shape)`` is the numpy result (inputs in the order of the function's buffer parameters);
    ``marked_block`` is the block under the mark in ``build``'s module (``matmul_fp32`` with a symbolic ``M`` holds
    two kernels, whose blocks are named ``marked_block`` suffixed ``_in_place`` and ``_packed``); ``symbolic_axis``
    names the shape parameter ``build`` also takes as ``None`` (symbolic: one compiled function for every
    extent)."""

    name: str
    tiled: tuple[str, ...]
    tile: tuple[int, ...]
    build: Callable[..., tvm.IRModule]
    compute: Callable[..., tirx.PrimFunc]
    schedule: Callable[..., s_tir.LoopRV]
    update_block: str
    reference: Callable[[list[np.ndarray], dict[str, int]], np.ndarray]
    marked_block: str
    pad_tile: tuple[int, ...] | None = None
    pad_by_hand: Callable[..., tvm.IRModule] | None = None
    symbolic_axis: str | None = None


def _elementwise_schedule(h_tile: int) -> Callable[..., s_tir.LoopRV]:
    def schedule(sch: s_tir.Schedule, mark: bool, vectorize: bool) -> s_tir.LoopRV:
        return _schedule_elementwise(sch, mark, vectorize, h_tile)

    return schedule


WORKLOADS: dict[str, Workload] = {
    # the reduction is not tiled (the kernel takes any depth); the packed weights' j // 16 is not an einsum index
    "dense_int8_vnni": Workload("dense_int8_vnni", ("m", "n"), DENSE_TILE, dense_int8_vnni, _dense_int8_func,
                                _schedule_dense, "C_update", _reference_dense, "C",
                                pad_by_hand=_dense_padded_by_hand, symbolic_axis="m"),
    "matmul_fp32": Workload("matmul_fp32", ("m", "n"), MATMUL_PANEL_TILE, matmul_fp32, _matmul_func,
                            _schedule_matmul, "C_update", _reference_matmul, "C",
                            # whole tiles of M and N; the reduction is not tiled (the kernel takes any depth)
                            pad_tile=(*MATMUL_PANEL_TILE, 1), symbolic_axis="m"),
    "elementwise_nc1hwc0": Workload("elementwise_nc1hwc0", ("h",), (8,), elementwise_nc1hwc0, _elementwise_func,
                                    _elementwise_schedule(8), "C", _reference_elementwise, "C",
                                    pad_tile=(1, 1, 8, 1, 1)),
}


def reference(workload: str, inputs: list[np.ndarray], shape: dict[str, int]) -> np.ndarray:
    """The numpy result of a workload on its inputs (in the order of the function's buffer parameters), with
    ``shape`` its sizes by name (e.g. ``{"m": 127, "n": 255, "k": 129}``); also ``matmul_wmma_cuda`` and
    ``matmul_mma_cuda``, whose result is the fp32 matmul's."""
    if workload in ("matmul_wmma_cuda", "matmul_mma_cuda"):
        return _reference_matmul(inputs, shape)
    if workload not in WORKLOADS:
        raise ValueError(f"unknown workload {workload!r}; known: {sorted(WORKLOADS)}, 'matmul_wmma_cuda' and "
                         "'matmul_mma_cuda'")
    return WORKLOADS[workload].reference(inputs, shape)
