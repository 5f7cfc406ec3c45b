"""CUDA tail benchmark: the tensor-core matmul through TailSplit against what TVM and cuBLAS offer for shapes that
are not multiples of the tile.

``C[M, N] = A[M, K] @ B[K, N]``, fp16 inputs, fp32 products, sums and output (``mma_schedule.matmul_fp16_func``),
on the shapes 4000^3, 1000 x 4096 x 4096, 127 x 255 x 129 and M in ``SYMBOLIC_MS`` x 4096 x 4096, the last with
``M`` symbolic: ONE compiled function per column serves every M ((b), (c) and (d) pick, by M, the tiling rule's kernel
for it: ``mma_schedule.matmul_mma_cuda_dispatch``, one kernel per interval of ``tiling_intervals``). Columns (the CPU
tail benchmark's letters):

- (a) ``guarded``: TVM's tiled schedule without tensor cores (``simt_matmul``: ``SIMT_TILE`` thread-block tiles,
  ``SIMT_THREAD_TILE`` outputs per thread, shared-memory slices of A and B, fp32 accumulators in registers),
  with the ``T.where`` guards of its non-dividing splits; TVM's default pipeline;
- (b) ``pad_einsum``: ``mma_schedule.matmul_mma_cuda(pad_to_blocks=True, padded_output=True)``: ``sch.pad_einsum``
  to whole thread-block tiles (``block_tile`` x ``block_k`` of the shape's tiling), so no mark carries a guard,
  the marked tensor-core schedule (mma.sync, ldmatrix, cp.async) tensorized, the result through the padded
  ``C_pad`` and a copy back; compiled by the ``"tailsplit_mma"`` pipeline, whose TailSplit finds no guard to
  split: it is ``tensorize_marked`` + TVM's default pipeline with the warp-memory lowering;
- (c) ``guard_chains``: ``matmul_mma_cuda(pad_to_blocks=False)``: padding to whole 16 x 16 instruction tiles only,
  so the partial thread blocks' fragment loads and mma tiles are guarded, TailSplit's guard chains inside the
  pipelined loop (the (d) kernel before 2026-11-25: 1.4x the divisible kernel's time at 4000^3 on an H100);
- (d) ``tailsplit``: ``matmul_mma_cuda`` (the iteration space padded to whole thread-block tiles, operands
  zero-filled in shared memory, no padded global buffer) through the ``"tailsplit_mma"`` pipeline (TailSplit splits
  the copies' and the accumulator store's tails, merges equal cases, tensorizes);
- (e) ``divisible``: the (d) kernel on the nearest divisible shape (``divisible_shape``), its time multiplied by
  the useful work (points of the shape / points of the divisible shape); with M symbolic, the same kernel as (d);
- (f) ``dlight``: TVM's ``s_tir.dlight`` ``gpu.Matmul`` rule (its tensor-core path: wmma) on the irregular shape;
- (g) ``cuBLAS``: ``torch.mm`` with fp32 output (``out_dtype``, where torch has it; else fp16 output, recorded);
- (h) ``hopper``: the Hopper GEMM ``warpspec.examples.hopper_gemm_kernel`` (128 x ``block_n`` x 64 tiles,
  ``block_n`` the rule's ``warpspec.tiling.hopper_block_n`` for the shape (recorded in the row), 4 stages, a TMA
  producer warpgroup and two wgmma consumer warpgroups; K not a multiple of 64 zero-filled by TMA) through
  ``TailSplit(strategy="partial")`` and ``WarpSpecialize("cuda", hopper=True)`` for sm_90a; with M symbolic one
  compiled function for every M that launches the kernel of the rule's width for it (``hopper_gemm_dispatch``:
  one ``hopper_gemm_kernel(m=None, block_n=...)`` per width). It computes ``A @ B.T`` with B given n x K
  (K-major, as wgmma reads it): the transposed copy of the table's B is built once per row, outside the timing.
  Only on sm_90 GPUs (elsewhere the column is absent, with the reason), and only for K a multiple of
  ``HOPPER_K_MULTIPLE`` (TMA's 16-byte row stride; 127 x 255 x 129 has no (h) entry, its row says why).

(b) to (e) use the same ``MmaTiling``: the rule's choice for the shape (``mma_schedule.choose_tiling``, with
the GPU's multiprocessor count; ``--dry-run``: ``cuda.DEFAULT_MULTIPROCESSORS``; with M symbolic the tiling the
dispatch runs for the row's M), recorded in each row. ``--tilings``
also times (d) with every tiling of ``mma_schedule.candidate_tiles`` (``tile_tiling`` of each block tile) side by
side, each checked like the columns, and records them per row (``sweep``) with the fastest, so a GPU run confirms
or corrects the rule; likewise (h) with every ``warpspec.tiling.HOPPER_BLOCK_N`` (``hopper_sweep``); with
``--dry-run`` it builds them (rows marked sweep).

Timing as ``bench.gpu`` says (side by side, medians of the rounds). TFLOP/s = 2·M·N·K / time. Every column's
output is checked on fresh random inputs against torch's fp32 product of the fp16 inputs (TF32 off), the output
poisoned with NaN before: ``‖C − ref‖ / ‖ref‖ <= TOLERANCE`` (fp16 output of cuBLAS: ``FP16_TOLERANCE``) and every
element written. Ratios as in the CPU benchmark: d/a = time(a) / time(d), d/b, d/c, d/f, d/g, d/h likewise (above 1: (d)
is faster), d/e = time(d) / time(e) (1: the tails cost nothing).

``--dry-run`` needs no GPU: it builds every kernel (TVM's CUDA source compiled by nvcc for ``--arch``) and
records compile time and kernel count. Run: ``make bench`` (without a GPU or torch this one prints why and writes
nothing) or ``python -m bench.bench_tails_cuda [--quick]``; results: bench/results/tails_cuda.json and .md
(quick: bench/results/quick/); ``--dry-run``: tails_cuda_dry_run.json and .md.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import tvm
from tvm import s_tir

from bench import gpu
from tvm_tailsplit import TailSplit
from tvm_tailsplit.cuda import DEFAULT_MULTIPROCESSORS, SYMBOLIC_M, cuda_target, multiprocessor_count
from tvm_tailsplit.split import mma_schedule as ms
from tvm_tailsplit.split.mma_pipeline import MMA_PIPELINE
from tvm_tailsplit.warpspec import WARP_SPECIALIZED_PIPELINE, WarpSpecialize, examples
from tvm_tailsplit.warpspec.tiling import HOPPER_BLOCK_M, HOPPER_BLOCK_N, hopper_block_n, hopper_block_n_intervals

if TYPE_CHECKING:
    import torch

STATIC_SHAPES = [(4000, 4000, 4000), (1000, 4096, 4096), (127, 255, 129)]
SYMBOLIC_NK = (4096, 4096)  # N and K of the shapes with M symbolic
SYMBOLIC_MS = (1, 16, 33, 127, 1000)
QUICK_STATIC_SHAPES = [(127, 255, 129)]
QUICK_SYMBOLIC_MS = (33,)
COLUMNS = ("guarded", "pad_einsum", "guard_chains", "tailsplit", "divisible", "dlight", "cuBLAS")
HOPPER = "hopper"  # (h), where the GPU and K allow it (hopper_unsupported)
LETTERS = {**dict(zip(COLUMNS, "abcdefg", strict=True)), HOPPER: "h"}
# (h) is built for this architecture (wgmma and setmaxnreg need the architecture-specific target) on sm_90 GPUs
HOPPER_ARCH = "sm_90a"
# (h): TMA's row stride (K fp16 elements of A and B) must be a multiple of 16 bytes, so K a multiple of 8
HOPPER_K_MULTIPLE = 8
# (a): thread-block tile (M, N, K slice) and outputs per thread (M, N): 16 x 16 threads of 4 x 4 fp32 sums each
SIMT_TILE = (64, 64, 32)
SIMT_THREAD_TILE = (4, 4)
# a column passes with ‖C − ref‖ / ‖ref‖ at most this (fp32 sums of exact fp16 products: rounding only) ...
TOLERANCE = 1e-4
# ... or this for cuBLAS where torch cannot write fp32 output (the fp16 result: 2^-11 relative rounding)
FP16_TOLERANCE = 2e-3


def simt_matmul(m: int | None, n: int, k: int) -> tvm.IRModule:
    """(a): the matmul tiled for CUDA cores (see the module docstring), guards of its non-dividing splits kept.
    The allocations are compacted before the pipeline with ``is_strict=False`` (TVM's pipeline runs the same
    passes again, with no further effect): the strict compaction clips the register tile to ``min(4, m - i)``
    rows for a symbolic ``m``, a size CUDA code generation refuses (constant-size local allocations only)."""
    sch = s_tir.Schedule(ms.matmul_fp16_func(m, n, k))
    block = sch.get_sblock("C")
    i, j, r = sch.get_loops(block)
    threads = (SIMT_TILE[0] // SIMT_THREAD_TILE[0], SIMT_TILE[1] // SIMT_THREAD_TILE[1])
    i_block, i_thread, i_inner = sch.split(i, [None, threads[0], SIMT_THREAD_TILE[0]])
    j_block, j_thread, j_inner = sch.split(j, [None, threads[1], SIMT_THREAD_TILE[1]])
    r_outer, r_inner = sch.split(r, [None, SIMT_TILE[2]])
    sch.reorder(i_block, j_block, i_thread, j_thread, r_outer, r_inner, i_inner, j_inner)
    for loop, axis in ((i_block, "blockIdx.y"), (j_block, "blockIdx.x"), (i_thread, "threadIdx.y"),
                       (j_thread, "threadIdx.x")):
        sch.bind(loop, axis)
    sch.reverse_compute_at(sch.cache_write(block, 0, "local"), j_thread, preserve_unit_loops=True)
    for index in (0, 1):
        shared = sch.cache_read(block, index, "shared")
        sch.compute_at(shared, r_outer)
        _, t_y, t_x = sch.split(sch.fuse(*sch.get_loops(shared)[-2:]), [None, *threads])
        sch.bind(t_y, "threadIdx.y")
        sch.bind(t_x, "threadIdx.x")
    sch.decompose_reduction(block, r_outer)
    return tvm.transform.Sequential([
        s_tir.transform.LowerInitBlock(), s_tir.transform.PlanAndUpdateBufferAllocationLocation(),
        s_tir.transform.ConvertBlocksToOpaque(), s_tir.transform.CompactBufferAllocation(is_strict=False),
    ])(sch.mod)


def dlight_matmul(m: int | None, n: int, k: int, arch: str) -> tvm.IRModule:
    """(f): TVM's dlight ``gpu.Matmul`` rule (``gpu.Fallback`` for what it leaves) for ``arch``."""
    import tvm.s_tir.tensor_intrin.cuda  # noqa: F401 - registers the wmma intrinsics dlight tensorizes with
    from tvm.s_tir import dlight

    with tvm.target.Target({"kind": "cuda", "arch": arch}):
        return dlight.ApplyDefaultSchedule(dlight.gpu.Matmul(), dlight.gpu.Fallback())(
            tvm.IRModule({"main": ms.matmul_fp16_func(m, n, k)}))


def divisible_shape(m: int, n: int, k: int, tiling: ms.MmaTiling) -> tuple[int, int, int]:
    """The nearest shape of whole thread-block tiles of the tensor-core kernel with ``tiling`` (M and N multiples of
    its ``block_tile``, K of its ``block_k``; ties round up, at least one tile)."""
    tiles = (*tiling.block_tile, tiling.block_k)
    return tuple(max(t, t * math.floor(x / t + 0.5)) for x, t in zip((m, n, k), tiles, strict=True))


def kernels(m: int | None, n: int, k: int, arch: str, tiling: ms.MmaTiling,
            sm_count: int = DEFAULT_MULTIPROCESSORS) -> dict[str, tuple[Callable[[], tvm.IRModule], str]]:
    """Column -> (module builder, TIR pipeline) of every TVM kernel of one shape, (b) to (e) with ``tiling``
    (``m=None``: M symbolic; (b), (c) and (d) then dispatch by M to the rule's tiling for ``sm_count`` SMs, and (e) is
    the (d) kernel and has no entry)."""
    guarded = (lambda: simt_matmul(m, n, k), "default")
    dlight = (lambda: dlight_matmul(m, n, k, arch), "default")
    if m is None:
        return {"guarded": guarded,
                "pad_einsum": (lambda: ms.matmul_mma_cuda_dispatch(n, k, pad_to_blocks=True, padded_output=True,
                                                                   sm_count=sm_count), MMA_PIPELINE),
                "guard_chains": (lambda: ms.matmul_mma_cuda_dispatch(n, k, pad_to_blocks=False, sm_count=sm_count),
                                 MMA_PIPELINE),
                "tailsplit": (lambda: ms.matmul_mma_cuda_dispatch(n, k, sm_count=sm_count), MMA_PIPELINE),
                "dlight": dlight}
    return {"guarded": guarded,
            "pad_einsum": (lambda: ms.matmul_mma_cuda(m, n, k, pad_to_blocks=True, padded_output=True,
                                                      tiling=tiling), MMA_PIPELINE),
            "guard_chains": (lambda: ms.matmul_mma_cuda(m, n, k, pad_to_blocks=False, tiling=tiling), MMA_PIPELINE),
            "tailsplit": (lambda: ms.matmul_mma_cuda(m, n, k, tiling=tiling), MMA_PIPELINE),
            "divisible": (lambda: ms.matmul_mma_cuda(*divisible_shape(m, n, k, tiling), tiling=tiling), MMA_PIPELINE),
            "dlight": dlight}


def hopper_unsupported(k: int | None, arch: str) -> str | None:
    """Why (h) has no kernel for the reduction length ``k`` (None: on no shape) on ``arch``, or None."""
    if not arch.startswith("sm_90"):
        return f"the Hopper GEMM needs an sm_90 GPU (TMA, wgmma), not {arch}"
    if k is not None and k % HOPPER_K_MULTIPLE:
        return (f"K = {k} is not a multiple of {HOPPER_K_MULTIPLE}: TMA needs a 16-byte row stride of A and B "
                "(K fp16 elements)")
    return None


HOPPER_PASSES = tvm.transform.Sequential([TailSplit(strategy="partial"), WarpSpecialize("cuda", hopper=True)])
"""(h)'s passes: TailSplit (main tiles store without conditions), then WarpSpecialize's Hopper lowering."""


def hopper_module(m: int | None, n: int, k: int, block_n: int) -> tvm.IRModule:
    """(h): ``examples.hopper_gemm_kernel`` (``C = A @ B.T``, B n x K; ``m=None``: M symbolic, one kernel; tiles
    ``block_n`` wide) through ``HOPPER_PASSES``; K zero-filled past a multiple of 64."""
    func = examples.hopper_gemm_kernel(m, n, k, block_n=block_n, zero_fill_k=k % 64 != 0)
    return HOPPER_PASSES(tvm.IRModule({"main": func}))


def hopper_dispatch_module(n: int, k: int, sm_count: int) -> tvm.IRModule:
    """(h) with M symbolic: ``examples.hopper_gemm_dispatch``, the kernel of the rule's tile width for each M (one
    per interval of ``hopper_block_n_intervals``) through ``HOPPER_PASSES``, picked by M at launch."""
    return examples.hopper_gemm_dispatch(n, k, HOPPER_PASSES, zero_fill_k=k % 64 != 0, sms=sm_count)


def sweep_tilings(m: int | None, k: int) -> list[ms.MmaTiling]:
    """The tilings ``--tilings`` times (d) with: ``tile_tiling`` of each of the rule's ``candidate_tiles`` (they
    depend on M, and their K slices on K)."""
    return [ms.tile_tiling(rows, cols, k) for rows, cols in ms.candidate_tiles(m)]


def hopper_tiling_name(block_n: int) -> str:
    """The (h) tile as the rows name it: block rows x columns x K tile."""
    return f"{HOPPER_BLOCK_M}x{block_n}x64"


def dispatched_tiling(m: int, n: int, k: int, sm_count: int) -> ms.MmaTiling:
    """The tiling ``matmul_mma_cuda_dispatch(n, k, sm_count=sm_count)`` runs for ``M = m``: the rule's for ``m``
    up to ``SYMBOLIC_M``, the open interval's above (``tiling_intervals``)."""
    return ms.choose_tiling(min(m, SYMBOLIC_M), n, k, sm_count)


def intervals_name(intervals: list[tuple[int, int | None, object]], name: Callable[[object], str]) -> str:
    """A dispatch's choices by M as the rows name them, e.g. ``M<=16: 16x32x128/4 ..., M>=385: 128x128x32/3 ...``."""
    return ", ".join(f"M<={last}: {name(choice)}" if last is not None else f"M>={first}: {name(choice)}"
                     for first, last, choice in intervals)


def hopper_dispatch_name(n: int, sm_count: int) -> str:
    """The (h) tiles of the dispatch of ``n`` columns by M, e.g. ``M<=128: 128x32x64, ..., M>=897: 128x256x64``."""
    return intervals_name(hopper_block_n_intervals(n, sm_count), hopper_tiling_name)


def dispatch_name(n: int, k: int, sm_count: int) -> str:
    """The tilings of the (b), (c), (d) dispatch of ``n x k`` by M."""
    return intervals_name(ms.tiling_intervals(n, k, sm_count), ms.MmaTiling.name)


def tiling_record(tiling: ms.MmaTiling) -> dict:
    """The tiling as the JSON records it: its fields, block tile, slice depth and name."""
    return {**dataclasses.asdict(tiling), "block_tile": list(tiling.block_tile), "block_k": tiling.block_k,
            "name": tiling.name()}


def cases(quick: bool) -> list[tuple[int | None, int, int]]:
    """The compiled shapes: the static ones, then N x K with M symbolic."""
    return [*(QUICK_STATIC_SHAPES if quick else STATIC_SHAPES), (None, *SYMBOLIC_NK)]


def shape_text(m: int | None, n: int, k: int) -> str:
    return f"{'M' if m is None else m}x{n}x{k}"


# ------------------------------------------------------------------------------------------------ dry run


TILED_COLUMNS = ("pad_einsum", "guard_chains", "tailsplit", "divisible")  # the columns built with the shape's MmaTiling


def command(quick: bool, tilings: bool, dry_run_arch: str | None = None) -> str:
    """The command line of a run with these options."""
    return ("python -m bench.bench_tails_cuda" + (" --dry-run" if dry_run_arch else "") + (" --quick" if quick else "")
            + (" --tilings" if tilings else "") + (f" --arch {dry_run_arch}" if dry_run_arch else ""))


def dry_run(quick: bool, arch: str, tilings: bool) -> dict:
    """Every TVM kernel of the shapes built for ``arch`` (TVM source + nvcc), no GPU; ``tilings``: also (d) with
    every tiling of ``sweep_tilings`` (rows marked ``sweep``)."""
    from tvm_tailsplit.cuda import cuda_source

    rows = []

    def build_row(shape, column, build, pipeline, tiling, sweep=False, build_arch=arch, name=None):
        built = gpu.nvcc_build(lambda: cuda_source(build(), build_arch, pipeline), build_arch)
        if column in TILED_COLUMNS:
            name = dispatch_name(*shape[1:], DEFAULT_MULTIPROCESSORS) if shape[0] is None and not sweep \
                else tiling.name()
        rows.append({"shape": shape_text(*shape), "column": column, "pipeline": pipeline, "sweep": sweep,
                     "tiling": name, **built})
        print(f"{shape_text(*shape)} ({LETTERS[column]}) {column}{f' [{name}]' if name else ''}: "
              f"{gpu.build_outcome(built)}", flush=True)

    for shape in cases(quick):
        tiling = ms.choose_tiling(*shape)
        for column, (build, pipeline) in kernels(*shape, arch, tiling).items():
            build_row(shape, column, build, pipeline, tiling)
        if (absent := hopper_unsupported(shape[2], arch)) is None and shape[0] is None:
            build_row(shape, HOPPER, lambda shape=shape: hopper_dispatch_module(*shape[1:], DEFAULT_MULTIPROCESSORS),
                      WARP_SPECIALIZED_PIPELINE, tiling, build_arch=HOPPER_ARCH,
                      name=hopper_dispatch_name(shape[1], DEFAULT_MULTIPROCESSORS))
            for width in HOPPER_BLOCK_N if tilings else ():
                build_row(shape, HOPPER, lambda shape=shape, width=width: hopper_module(*shape, width),
                          WARP_SPECIALIZED_PIPELINE, tiling, sweep=True, build_arch=HOPPER_ARCH,
                          name=hopper_tiling_name(width))
        elif absent is None:
            block_n = hopper_block_n(shape[0], shape[1])
            for width in (HOPPER_BLOCK_N if tilings else (block_n,)):
                build_row(shape, HOPPER, lambda shape=shape, width=width: hopper_module(*shape, width),
                          WARP_SPECIALIZED_PIPELINE, tiling, sweep=width != block_n, build_arch=HOPPER_ARCH,
                          name=hopper_tiling_name(width))
        else:
            rows.append({"shape": shape_text(*shape), "column": HOPPER, "pipeline": WARP_SPECIALIZED_PIPELINE,
                         "sweep": False, "tiling": None, "compiled": False, "absent": absent})
            print(f"{shape_text(*shape)} (h) {HOPPER}: no entry: {absent}", flush=True)
        for other in sweep_tilings(shape[0], shape[2]) if tilings else ():
            if other != tiling:
                build_row(shape, "tailsplit", lambda shape=shape, other=other: ms.matmul_mma_cuda(*shape,
                                                                                                  tiling=other),
                          MMA_PIPELINE, other, sweep=True)
    return {"arch": arch, "quick": quick, "tilings": tilings, "sm_count": DEFAULT_MULTIPROCESSORS, "date": gpu.now(),
            "rows": rows, "command": command(quick, tilings, arch)}


def dry_run_markdown(report: dict) -> str:
    lines = [*gpu.dry_run_heading("CUDA tail-benchmark kernels", report),
             f"Tilings of (b) to (e): the rule's (`choose_tiling`, {report['sm_count']} SMs); rows marked sweep: "
             "(d) with another candidate tiling, (h) with another tile width (`--tilings`). (h) hopper: TailSplit + "
             f"WarpSpecialize Hopper GEMM, built for {HOPPER_ARCH} (`C = A @ B.T`, B n x K; tile: the rule's "
             "`hopper_block_n`).", "",
             "| shape | column | tiling | pipeline | compiled | kernels | TVM s | nvcc s | ptxas |", "|" + "---|" * 9]
    for row in report["rows"]:
        tiling = f"{row['tiling']}{' (sweep)' if row['sweep'] else ''}" if row["tiling"] else "-"
        head = f"| {row['shape']} | ({LETTERS[row['column']]}) {row['column']} | {tiling} | {row['pipeline']} |"
        if "absent" in row:
            lines.append(f"{head} no entry: {row['absent']} | - | - | - | - |")
        elif row["compiled"]:
            lines.append(f"{head} yes | {row['kernels']} | {row['tvm_seconds']:.1f} | {row['nvcc_seconds']:.1f} | "
                         f"{'; '.join(row['ptxas'])} |")
        else:
            lines.append(f"{head} NO: {row['error']} | - | - | - | - |")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------ on the GPU


def operands(m: int, n: int, k: int, seed: int) -> tuple:
    """Fresh random fp16 A and B on the device (uniform in [-1, 1])."""
    import torch

    generator = torch.Generator(device="cuda").manual_seed(seed)
    return tuple((2 * torch.rand(rows, cols, device="cuda", generator=generator) - 1).half()
                 for rows, cols in ((m, k), (k, n)))


def checked_runner(function: Callable[..., object], left: torch.Tensor, right: torch.Tensor,
                   want: torch.Tensor) -> tuple[Callable[[], object], float, bool]:
    """A TVM kernel ``function(A, B, C)`` on ``left`` and ``right``, run once into a NaN-poisoned ``C``: the
    runner timing it, ``C``'s relative error against ``want`` and whether every element was written."""
    import torch
    import tvm_ffi

    out = torch.full(tuple(want.shape), math.nan, device="cuda")
    views = [tvm_ffi.from_dlpack(t) for t in (left, right, out)]
    function(*views)
    torch.cuda.synchronize()
    return (lambda: function(*views)), gpu.relative_error(out, want), bool(torch.isfinite(out).all().item())


def measure_shape(executables: dict, m: int, n: int, k: int, rounds: int, seed: int, symbolic: bool,
                  tiling: ms.MmaTiling, sweep: dict[str, object], hopper_absent: str | None,
                  hopper_width: int | None, hopper_sweep: dict[str, object]) -> dict:
    """Every column on one shape (``tiling``: that of (b) to (e)): checked against torch's fp32 product, then
    timed side by side; then the (d) kernels of ``sweep`` (tiling name -> executable), if any, side by side, and
    the (h) kernels of ``hopper_sweep`` likewise. (h) (tiles ``hopper_width`` wide) runs unless ``hopper_absent``
    says why not, on B transposed once here (n x K), outside the timing."""
    a, b = operands(m, n, k, seed)
    reference = a.float() @ b.float()
    divisible = divisible_shape(m, n, k, tiling)
    a_div, b_div = operands(*divisible, seed + 1)
    row: dict = {"shape": [m, n, k], "m_symbolic": symbolic, "tiling": tiling_record(tiling),
                 "divisible_shape": list(divisible), "useful_work": m * n * k / math.prod(divisible), "errors": {},
                 "all_written": {}}
    columns = COLUMNS if hopper_absent else (*COLUMNS, HOPPER)
    if hopper_absent:
        row["hopper_absent"] = hopper_absent
    else:
        row["hopper_block_n"], row["hopper_tiling"] = hopper_width, hopper_tiling_name(hopper_width)
    b_transposed = None if hopper_absent else b.t().contiguous()
    runners = {}
    for column in columns:
        if column == "cuBLAS":
            out = gpu.cublas_mm(a, b)
            row["cublas_output"] = str(out.dtype)
            runners[column] = lambda a=a, b=b: gpu.cublas_mm(a, b)
            row["errors"][column], row["all_written"][column] = gpu.relative_error(out, reference), True
            continue
        function = executables["tailsplit" if column == "divisible" and symbolic else column]["main"]
        if column == HOPPER:
            checked = checked_runner(function, a, b_transposed, reference)
        elif column == "divisible":
            checked = checked_runner(function, a_div, b_div, a_div.float() @ b_div.float())
        else:
            checked = checked_runner(function, a, b, reference)
        runners[column], row["errors"][column], row["all_written"][column] = checked
    seconds = gpu.median_seconds(runners, rounds)
    seconds["divisible"] *= row["useful_work"]
    row["us"] = {column: s * 1e6 for column, s in seconds.items()}
    row["tflops"] = {column: 2 * m * n * k / s / 1e12 for column, s in seconds.items()}
    d = seconds["tailsplit"]
    row["ratios"] = {"d/a": seconds["guarded"] / d, "d/b": seconds["pad_einsum"] / d,
                     "d/c": seconds["guard_chains"] / d,
                     "d/e": d / seconds["divisible"], "d/f": seconds["dlight"] / d, "d/g": seconds["cuBLAS"] / d}
    if HOPPER in seconds:
        row["ratios"]["d/h"] = seconds[HOPPER] / d
    tolerance = {column: FP16_TOLERANCE if column == "cuBLAS" and row["cublas_output"] != "torch.float32"
                 else TOLERANCE for column in columns}
    row["ok"] = all(row["all_written"][c] and row["errors"][c] <= tolerance[c] for c in columns)
    for key, kernels_swept, right in (("sweep", sweep, b), ("hopper_sweep", hopper_sweep, b_transposed)):
        if not kernels_swept:
            continue
        swept = {name: checked_runner(executable["main"], a, right, reference)
                 for name, executable in kernels_swept.items()}
        sweep_seconds = gpu.median_seconds({name: runner for name, (runner, _, _) in swept.items()}, rounds)
        row[key] = {name: {"us": sweep_seconds[name] * 1e6, "tflops": 2 * m * n * k / sweep_seconds[name] / 1e12,
                           "ok": written and error <= TOLERANCE, "error": error}
                    for name, (_, error, written) in swept.items()}
        row[f"{key}_best"] = min((name for name in row[key] if row[key][name]["ok"]),
                                 key=lambda name: row[key][name]["us"], default=None)
    return row


def run(quick: bool, tilings: bool) -> dict:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False  # the reference: fp32 products and sums
    rounds = gpu.QUICK_ROUNDS if quick else gpu.ROUNDS
    arch = gpu.device_arch()
    target = tvm.target.Target({"kind": "cuda", "arch": arch})
    sm_count = multiprocessor_count()
    info = gpu.gpu_machine()
    print(f"machine: {info}, {sm_count} SMs", flush=True)
    rows, compile_seconds = [], {}

    def report(complete: bool) -> dict:
        return {"machine": info, "sm_count": sm_count, "rounds": rounds, "quick": quick, "tilings": tilings,
                "hopper_absent": hopper_unsupported(None, arch), "rows": rows, "compile_seconds": compile_seconds,
                "command": command(quick, tilings), "complete": complete}

    def compiled(name: str, module: tvm.IRModule, pipeline: str, on=target):
        start = time.perf_counter()
        executable = tvm.compile(module, target=on, tir_pipeline=pipeline)
        compile_seconds[name] = time.perf_counter() - start
        return executable

    for seed, shape in enumerate(cases(quick)):
        tiling = ms.choose_tiling(*shape, sm_count=sm_count)
        executables = {column: compiled(f"{shape_text(*shape)} {column}", build(), pipeline)
                       for column, (build, pipeline) in kernels(*shape, arch, tiling, sm_count).items()}
        hopper_absent = hopper_unsupported(shape[2], arch)
        hopper_sweep, block_n = {}, None
        if hopper_absent is None:
            block_n = hopper_block_n(shape[0], shape[1], sm_count)
            name, module = ((hopper_dispatch_name(shape[1], sm_count), hopper_dispatch_module(*shape[1:], sm_count))
                            if shape[0] is None else (hopper_tiling_name(block_n), hopper_module(*shape, block_n)))
            executables[HOPPER] = compiled(f"{shape_text(*shape)} {HOPPER} [{name}]", module,
                                           WARP_SPECIALIZED_PIPELINE, cuda_target(HOPPER_ARCH))
            hopper_sweep = {hopper_tiling_name(width): compiled(
                                f"{shape_text(*shape)} {HOPPER} [{hopper_tiling_name(width)}]",
                                hopper_module(*shape, width), WARP_SPECIALIZED_PIPELINE, cuda_target(HOPPER_ARCH))
                            for width in (HOPPER_BLOCK_N if tilings else ())}
        sweep = {other.name(): compiled(f"{shape_text(*shape)} tailsplit [{other.name()}]",
                                        ms.matmul_mma_cuda(*shape, tiling=other), MMA_PIPELINE)
                 for other in (sweep_tilings(shape[0], shape[2]) if tilings else ())}
        m, n, k = shape
        for m_value in ((QUICK_SYMBOLIC_MS if quick else SYMBOLIC_MS) if m is None else (m,)):
            row_tiling = tiling if m is not None else dispatched_tiling(m_value, n, k, sm_count)
            row_width = block_n if m is not None or block_n is None else hopper_block_n(min(m_value, SYMBOLIC_M), n,
                                                                                        sm_count)
            row = measure_shape(executables, m_value, n, k, rounds, seed=100 * seed + m_value, symbolic=m is None,
                                tiling=row_tiling, sweep=sweep, hopper_absent=hopper_absent,
                                hopper_width=row_width, hopper_sweep=hopper_sweep)
            rows.append(row)
            print(f"{shape_text(*shape)} M={m_value} [{row_tiling.name()}]: " + " ".join(
                  f"({LETTERS[c]}) {row['us'][c]:.1f}us {row['tflops'][c]:.1f}TF" for c in row["us"])
                  + f" ratios {row['ratios']} ok={row['ok']}"
                  + (f" sweep best {row['sweep_best']}" if sweep else "")
                  + (f" (h) sweep best {row['hopper_sweep_best']}" if hopper_sweep else ""), flush=True)
            # the rows so far written after each one: a run stopped by its time limit keeps what it measured
            partial = report(complete=False)
            gpu.write_results("tails_cuda", quick, partial, markdown(partial))
    return report(complete=True)


def markdown(report: dict) -> str:
    info = report["machine"]
    hopper = report["hopper_absent"] is None  # the (h) column: on sm_90 GPUs
    columns = (*COLUMNS, HOPPER) if hopper else COLUMNS
    ratio_names = ("d/a", "d/b", "d/c", "d/e", "d/f", "d/g", *(("d/h",) if hopper else ()))
    hopper_text = ("(h) TailSplit + WarpSpecialize Hopper GEMM (TMA + wgmma, examples.hopper_gemm_kernel; it takes B "
                   "as n x K, the transposed copy built once per row outside the timing); " if hopper else "")
    lines = [
        "# CUDA tail benchmark: TailSplit + tensor cores against TVM's guarded, padded and dlight kernels and cuBLAS",
        "", f"{gpu.machine_text(info, 'tvm')}. fp16 A and B, fp32 C; every time is the median of {report['rounds']} "
        "rounds timing the columns side by side. (a) guarded: tiled CUDA-core schedule with guards; (b) pad_einsum "
        "to whole thread-block tiles + the tensor-core schedule, C through a padded copy; (c) guard chains: tiles "
        "padded to 16 x 16 only, the partial blocks' loads and mma guarded in the pipelined loop; (d) TailSplit + "
        "tensorize on the iteration space padded to whole blocks, no padded copy (tailsplit_mma); (e) "
        "the (d) kernel on the nearest divisible shape, time x useful work; (f) dlight gpu.Matmul; (g) cuBLAS "
        f"(torch.mm); {hopper_text}Rows `M=..` with M symbolic: one compiled function per column for every M; (b) "
        "to (d) run, by M, the kernel of the rule's tiling for it (`matmul_mma_cuda_dispatch`). (b) to (e) use the "
        f"tiling `choose_tiling` gives the shape or M ({report['sm_count']} SMs; block tile x K slice / stages, warps, "
        "warp tiles). Ratios: d/x = time(x) / "
        f"time(d), d/e = time(d) / time(e). Command: `{report['command']}`.", "",
        "| shape | tiling | " + " | ".join(f"({LETTERS[c]}) {c} µs / TFLOP/s" for c in columns)
        + f" | {' | '.join(ratio_names)} | ok | max error |", "|" + "---|" * (len(columns) + len(ratio_names) + 4)]
    for row in report["rows"]:
        m, n, k = row["shape"]
        shape = f"{'M=' if row['m_symbolic'] else ''}{m}x{n}x{k}"
        cells = " | ".join(f"{row['us'][c]:.1f} / {row['tflops'][c]:.1f}" if c in row["us"]
                           else f"no entry: {row['hopper_absent']}" for c in columns)
        ratios = " | ".join(f"{row['ratios'][r]:.2f}" if r in row["ratios"] else "-" for r in ratio_names)
        tile = row["tiling"]["name"] + (f"; (h) {row['hopper_tiling']}" if "hopper_tiling" in row else "")
        lines.append(f"| {shape} | {tile} | {cells} | {ratios} | {'yes' if row['ok'] else 'NO'} | "
                     f"{max(row['errors'].values()):.1e} |")
    if report["tilings"]:
        lines += ["", "(d) with every candidate tiling and (h) with every tile width (`--tilings`), timed side by "
                  "side per shape and column, each checked like the columns.", "",
                  "| shape | column | tiling | µs | TFLOP/s | ok | |", "|" + "---|" * 7]
        for row in report["rows"]:
            m, n, k = row["shape"]
            for column, key, rule in (("(d)", "sweep", row["tiling"]["name"]),
                                      ("(h)", "hopper_sweep", row.get("hopper_tiling"))):
                for name, result in row.get(key, {}).items():
                    notes = [note for note, holds in (("rule", name == rule), ("fastest", name == row[f"{key}_best"]))
                             if holds]
                    lines.append(f"| {'M=' if row['m_symbolic'] else ''}{m}x{n}x{k} | {column} | {name} | "
                                 f"{result['us']:.1f} | {result['tflops']:.1f} | {'yes' if result['ok'] else 'NO'} | "
                                 f"{', '.join(notes)} |")
    outputs = sorted({row["cublas_output"] for row in report["rows"]})
    if not hopper:
        lines += ["", f"(h) hopper: absent on this GPU: {report['hopper_absent']}."]
    if not report.get("complete", True):
        lines += ["", "**Partial run**: it stopped (its time limit) before every shape was measured; the rows above "
                  "are the ones it finished."]
    lines += ["", f"cuBLAS output dtype: {', '.join(outputs)}. Compile seconds (tvm.compile on the GPU machine): "
              + ", ".join(f"{name} {s:.1f}" for name, s in report["compile_seconds"].items()) + "."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark with the options ``argv`` (None: none, the full run, as ``bench.run_all`` calls it)."""
    parser = gpu.parser("bench_tails_cuda", (__doc__ or "").split("\n\n")[0])
    parser.add_argument("--tilings", action="store_true",
                        help="also time (d) with every candidate tiling of each shape (build them with --dry-run)")
    args = parser.parse_args([] if argv is None else argv)
    gpu.dispatch("tails_cuda", args, dry_run=lambda: dry_run(args.quick, args.arch, args.tilings),
                 dry_run_markdown=dry_run_markdown, modules=("torch",), run=lambda: run(args.quick, args.tilings),
                 markdown=markdown)


if __name__ == "__main__":
    main(sys.argv[1:])
