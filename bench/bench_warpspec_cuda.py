"""Hopper GEMM benchmark (issue #14): the warp-specialized TMA + wgmma GEMM derived by WarpSpecialize against the
same tiles without warp specialization, TVM's dlight and cuBLAS.

``C[M, N] = A[M, K] @ B[N, K].T``, fp16 inputs (both K-major), fp32 sums and output, shapes ``SHAPES`` (the last
two with ragged outputs, split by ``TailSplit(strategy="partial")`` before WarpSpecialize). Columns:

- ``warp_specialized``: ``examples.hopper_gemm_kernel`` (128 x 256 x 64 tiles, 4 stages, a TMA producer warpgroup
  and two wgmma consumer warpgroups) through ``WarpSpecialize("cuda", hopper=True)``;
- ``persistent``: the same kernel in its persistent form (``hopper_gemm_kernel(..., ctas=...)``,
  ``examples.persistent_ctas`` CTAs, at most one per SM of the GPU (``cuda.DEFAULT_MULTIPROCESSORS`` in the dry
  run), each looping over its output tiles): the producer fills the next tile's stages while the consumers store
  the current one; its tiles in groups of ``tiling.hopper_group_rows`` rows (``group_rows``), so that a wave of
  CTAs reads a near-square block of A rows and B columns;
- ``persistent_row_major``: the persistent kernel with its tiles in row-major order (the ``persistent`` column of
  the H100 run of 2026-11-25), beside it to measure the grouped order;
- ``ablation``: ``unspecialized_hopper_kernel`` of the same kernel: same tiles, stages, TMA and wgmma, two
  warpgroups that both compute, thread 0 prefetching ``stages - 1`` iterations ahead;
- ``dlight``: TVM's ``s_tir.dlight`` ``gpu.Matmul`` rule on the same computation, scheduled and built for
  ``DLIGHT_ARCH`` (sm_90: the rule reads the architecture's number and takes its tensor-core path, wmma, only for
  one it can read; for sm_90a it falls back to a CUDA-core schedule);
- ``cuBLAS``: ``torch.mm(A, B.T)`` with fp32 output (``out_dtype`` where torch has it; else fp16, recorded).

Timing as ``bench.gpu`` says (side by side, medians of the rounds); TFLOP/s = 2·M·N·K / time. Every column's output
is checked against torch's fp32 product (TF32 off), the output poisoned with NaN first. Targets of the issue:
warp-specialized >= 0.8x cuBLAS at 4096^3 and 8192^3, >= 1.1x the ablation, no shape below 0.6x cuBLAS.

``--dry-run`` needs no GPU: it builds the four Hopper kernels of every shape (TVM + nvcc for sm_90a) and records
ptxas' figures. Run: ``make bench`` (without a GPU or torch it prints why and writes nothing) or
``python -m bench.bench_warpspec_cuda [--quick]``; results: bench/results/warpspec_cuda.json and .md.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable

import tvm

from bench import gpu
from tvm_tailsplit import TailSplit
from tvm_tailsplit.cuda import DEFAULT_MULTIPROCESSORS, cuda_source, cuda_target, multiprocessor_count
from tvm_tailsplit.split.mma_schedule import matmul_fp16_func
from tvm_tailsplit.warpspec import (
    WARP_SPECIALIZED_PIPELINE,
    WarpSpecialize,
    examples,
    unspecialized_hopper_kernel,
)
from tvm_tailsplit.warpspec.tiling import HOPPER_BLOCK_M, hopper_group_rows

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 4096, 1024), (8192, 8192, 2048),
          (4000, 4000, 4000), (1000, 4096, 4096)]  # the last two: ragged outputs (issue #15), through TailSplit
QUICK_SHAPES = [(1024, 1024, 1024)]
COLUMNS = ("warp_specialized", "persistent", "persistent_row_major", "ablation", "dlight", "cuBLAS")
RATIOS = ("vs_cublas", "vs_ablation", "vs_dlight", "persistent_vs_cublas", "persistent_vs_warp_specialized",
          "grouped_vs_row_major")
HOPPER_ARCH = "sm_90a"  # wgmma and setmaxnreg need the architecture-specific target
# dlight's Matmul rule parses the architecture as an integer ("sm_90a" is none: its tensor-core path is skipped)
DLIGHT_ARCH = "sm_90"
TOLERANCE = 1e-4  # ‖C − ref‖ / ‖ref‖ of fp32 sums of exact fp16 products
FP16_TOLERANCE = 2e-3  # cuBLAS where torch cannot write fp32 output


def hopper_modules(m: int, n: int, k: int, sms: int = DEFAULT_MULTIPROCESSORS) -> dict[str, Callable[[], tvm.IRModule]]:
    """Column -> builder of the four Hopper kernels of one shape (the persistent ones for `sms` SMs). A ragged
    output (m or n not a multiple of the 128 x 256 tile) goes through TailSplit first (main tiles store without a
    condition); K not a multiple of 64 is zero-filled by TMA."""
    tiles_m = -(-m // HOPPER_BLOCK_M)
    ctas = examples.persistent_ctas(tiles_m * -(-n // 256), sms)  # the example's 128 x 256 output tiles
    group_rows = hopper_group_rows(tiles_m, ctas)

    def kernel(**options) -> tvm.IRModule:
        return TailSplit(strategy="partial")(tvm.IRModule({"main": examples.hopper_gemm_kernel(
            m, n, k, zero_fill_k=k % 64 != 0, **options)}))

    return {"warp_specialized": lambda: WarpSpecialize("cuda", hopper=True)(kernel()),
            "persistent": lambda: WarpSpecialize("cuda", hopper=True)(kernel(ctas=ctas, group_rows=group_rows)),
            "persistent_row_major": lambda: WarpSpecialize("cuda", hopper=True)(kernel(ctas=ctas)),
            "ablation": lambda: tvm.IRModule({"main": unspecialized_hopper_kernel(kernel()["main"])})}


def dlight_module(m: int, n: int, k: int, arch: str = DLIGHT_ARCH) -> tvm.IRModule:
    """The dlight column's module: TVM's ``gpu.Matmul`` rule (``gpu.Fallback`` for what it leaves) for ``arch``."""
    import tvm.s_tir.tensor_intrin.cuda  # noqa: F401 - registers the intrinsics dlight tensorizes with
    from tvm.s_tir import dlight

    with tvm.target.Target({"kind": "cuda", "arch": arch}):
        return dlight.ApplyDefaultSchedule(dlight.gpu.Matmul(), dlight.gpu.Fallback())(
            tvm.IRModule({"main": matmul_fp16_func(m, n, k, b_transposed=True)}))


def compiled_columns(m: int, n: int, k: int, sms: int) -> dict[str, tuple[Callable[[], tvm.IRModule], str, str]]:
    """Column -> (module builder, architecture, TIR pipeline) of every TVM kernel a GPU run compiles for one shape:
    the Hopper kernels (``hopper_modules``) for ``HOPPER_ARCH`` and the dlight one for ``DLIGHT_ARCH``."""
    columns = {column: (build, HOPPER_ARCH, WARP_SPECIALIZED_PIPELINE)
               for column, build in hopper_modules(m, n, k, sms).items()}
    return {**columns, "dlight": (lambda: dlight_module(m, n, k), DLIGHT_ARCH, "default")}


def dry_run(quick: bool) -> dict:
    """The Hopper kernels of every shape built for sm_90a without a GPU."""
    rows = []
    for shape in QUICK_SHAPES if quick else SHAPES:
        for column, build in hopper_modules(*shape).items():
            built = gpu.nvcc_build(lambda build=build: cuda_source(build(), HOPPER_ARCH, WARP_SPECIALIZED_PIPELINE),
                                   HOPPER_ARCH)
            rows.append({"shape": list(shape), "column": column, **built})
            print(f"{shape} {column}: {gpu.build_outcome(built)}", flush=True)
    return {"arch": HOPPER_ARCH, "quick": quick, "date": gpu.now(), "rows": rows,
            "command": f"python -m bench.bench_warpspec_cuda --dry-run{' --quick' if quick else ''}"}


def dry_run_markdown(report: dict) -> str:
    lines = [*gpu.dry_run_heading("Hopper GEMM kernels", report),
             "| shape | column | compiled | TVM s | nvcc s | ptxas |", "|---|---|---|---|---|---|"]
    for row in report["rows"]:
        shape = "x".join(map(str, row["shape"]))
        if row["compiled"]:
            lines.append(f"| {shape} | {row['column']} | yes | {row['tvm_seconds']:.1f} | {row['nvcc_seconds']:.1f} "
                         f"| {'; '.join(row['ptxas'])} |")
        else:
            lines.append(f"| {shape} | {row['column']} | NO: {row['error']} | - | - | - |")
    return "\n".join(lines) + "\n"


def measure_shape(executables: dict, m: int, n: int, k: int, rounds: int, seed: int) -> dict:
    import torch
    import tvm_ffi

    generator = torch.Generator(device="cuda").manual_seed(seed)
    a, b = ((2 * torch.rand(rows, k, device="cuda", generator=generator) - 1).half() for rows in (m, n))
    reference = a.float() @ b.float().t()
    row: dict = {"shape": [m, n, k], "errors": {}, "all_written": {}}
    runners = {}
    for column in COLUMNS:
        if column == "cuBLAS":
            out = gpu.cublas_mm(a, b.t())
            row["cublas_output"] = str(out.dtype)
            runners[column] = lambda: gpu.cublas_mm(a, b.t())
            row["errors"][column], row["all_written"][column] = gpu.relative_error(out, reference), True
            continue
        function = executables[column]["main"]
        out = torch.full((m, n), math.nan, device="cuda")
        views = [tvm_ffi.from_dlpack(t) for t in (a, b, out)]
        function(*views)
        torch.cuda.synchronize()
        row["errors"][column] = gpu.relative_error(out, reference)
        row["all_written"][column] = bool(torch.isfinite(out).all().item())
        runners[column] = lambda function=function, views=views: function(*views)
    seconds = gpu.median_seconds(runners, rounds)
    row["us"] = {column: s * 1e6 for column, s in seconds.items()}
    row["tflops"] = {column: 2 * m * n * k / s / 1e12 for column, s in seconds.items()}
    specialized = seconds["warp_specialized"]
    persistent = seconds["persistent"]
    row["ratios"] = {"vs_cublas": seconds["cuBLAS"] / specialized, "vs_ablation": seconds["ablation"] / specialized,
                     "vs_dlight": seconds["dlight"] / specialized,
                     "persistent_vs_cublas": seconds["cuBLAS"] / persistent,
                     "persistent_vs_warp_specialized": specialized / persistent,
                     "grouped_vs_row_major": seconds["persistent_row_major"] / persistent}
    tolerance = {column: FP16_TOLERANCE if column == "cuBLAS" and row["cublas_output"] != "torch.float32"
                 else TOLERANCE for column in COLUMNS}
    row["ok"] = all(row["all_written"][c] and row["errors"][c] <= tolerance[c] for c in COLUMNS)
    return row


def run(quick: bool) -> dict:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    rounds = gpu.QUICK_ROUNDS if quick else gpu.ROUNDS
    info = gpu.gpu_machine()
    sms = multiprocessor_count()
    rows, compile_seconds = [], {}
    for seed, shape in enumerate(QUICK_SHAPES if quick else SHAPES):
        executables = {}
        for column, (build, arch, pipeline) in compiled_columns(*shape, sms).items():
            start = time.perf_counter()
            executables[column] = tvm.compile(build(), target=cuda_target(arch), tir_pipeline=pipeline)
            compile_seconds[f"{'x'.join(map(str, shape))} {column}"] = time.perf_counter() - start
        row = measure_shape(executables, *shape, rounds, seed)
        rows.append(row)
        print(f"{shape}: " + " ".join(f"{c} {row['tflops'][c]:.0f} TF" for c in COLUMNS)
              + f" {row['ratios']} ok={row['ok']}", flush=True)
    return {"machine": info, "sms": sms, "rounds": rounds, "quick": quick, "rows": rows,
            "compile_seconds": compile_seconds,
            "command": f"python -m bench.bench_warpspec_cuda{' --quick' if quick else ''}"}


def markdown(report: dict) -> str:
    info = report["machine"]
    lines = ["# Hopper GEMM: WarpSpecialize (TMA + wgmma) against its ablation, TVM dlight and cuBLAS", "",
             f"{gpu.machine_text(info)}. C = A @ B.T, fp16 in, fp32 out; medians of {report['rounds']} side-by-side "
             f"rounds; persistent kernels for {report['sms']} SMs. Command: `{report['command']}`.", "",
             "| shape | " + " | ".join(f"{c} TFLOP/s" for c in COLUMNS)
             + " | " + " | ".join(r.replace("_", " ") for r in RATIOS) + " | ok | max error |",
             "|" + "---|" * (len(COLUMNS) + len(RATIOS) + 3)]
    for row in report["rows"]:
        cells = " | ".join(f"{row['tflops'][c]:.1f}" for c in COLUMNS)
        ratios = " | ".join(f"{row['ratios'][r]:.2f}" for r in RATIOS)
        lines.append(f"| {'x'.join(map(str, row['shape']))} | {cells} | {ratios} | "
                     f"{'yes' if row['ok'] else 'NO'} | {max(row['errors'].values()):.1e} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark with the options ``argv`` (None: the full run, as ``bench.run_all`` calls it)."""
    args = gpu.parser("bench_warpspec_cuda", (__doc__ or "").split("\n\n")[0]).parse_args(
        [] if argv is None else argv)
    gpu.dispatch("warpspec_cuda", args, dry_run=lambda: dry_run(args.quick), dry_run_markdown=dry_run_markdown,
                 modules=("torch",), run=lambda: run(args.quick), markdown=markdown,
                 unsupported=lambda: None if gpu.device_arch() == "sm_90"
                 else f"the Hopper kernels need sm_90 (this GPU is {gpu.device_arch()})")


if __name__ == "__main__":
    main(sys.argv[1:])
