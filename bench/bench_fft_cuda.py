"""CUDA FFT benchmark: the generated operator against cuFFT (through torch.fft and cupy.fft) and the memory limit.

Every row is a batch of 2^23 / n transforms (64 MiB of complex64) resident on the device; in one process, side by
side (``bench.gpu``: warm-up, then each of the rounds times every implementation in turn, calls enqueued back to
back and the device synchronized once; medians over the rounds):

- ``generated``: the plan of ``tvm_tailsplit.fft.plan(n, batch, kind, target=<this GPU's arch>)`` (effort
  "estimate", the rules of ``tuning``) called on TVM tensors that alias torch's device memory (DLPack), no copy;
- ``torch.fft`` (cuFFT, into a preallocated ``out=``) and ``cupy.fft`` (cuFFT, cupy's plan cache; it allocates
  its output from cupy's memory pool);
- ``limit``: the time of one read of the input and one write of the output at the device-to-device copy speed
  measured in the same run (a torch copy of one batch, 64 MiB; a 1 GiB copy is reported as the DRAM speed).

Ratios are times: generated / cuFFT (the faster of torch.fft and cupy.fft, ``cufft_seconds``; below 1 the
generated operator is faster) and generated / limit (1 is the memory bound). Both routes call cuFFT; on an H100
torch.fft into ``out=`` took about twice cupy's time where both are memory-bound (c2c n <= 4096), so the ratio
against torch.fft alone flattered the generated operator. Each row's outputs are checked on fresh random inputs,
outputs poisoned with NaN before: the error of the generated operator against torch.fft in the same precision
(``error vs cuFFT``) and, with a complex128 / float64 torch.fft as the reference, the generated and cuFFT errors; a
row passes when the generated error is at most ``ERROR_FACTOR`` x cuFFT's (or ``ERROR_FLOOR``) and every output
element was written.

A fused-convolution row (``irfft(rfft(x) * h_hat)``, circular, ``CONVOLUTION_TAPS`` taps) times
``tvm_tailsplit.fft.plan_convolve`` (one pipeline, the product fused into the passes around it, output written in
place) against torch's rfft -> multiply -> irfft and the generated r2c plan -> torch multiply -> generated c2r
plan.

A fused-consumer row times the TE graph ``|FFT(x / 2)|^2`` (``CONSUMER_N``-point transforms): ``te_fft`` with
the halving inlined into its first pass and the power spectrum computed in the stores of its last
(``fft.fuse_consumers``; one kernel), the same graph with the power spectrum its own kernel, and torch's
``torch.fft.fft(x * 0.5).abs().square()``.

``--sanitize`` also runs compute-sanitizer (memcheck, racecheck) on one small plan of each breakdown (single
codelet, Cooley-Tukey, Rader, Bluestein, multi-kernel), each in a subprocess that runs the plan once against
numpy, and records the sanitizer's summary lines. ``--dry-run`` needs no GPU: it builds every plan of the rows
for ``--arch`` (TVM's CUDA source compiled by nvcc) and records compile time, passes over memory, kernel count,
threads per block and the shared memory per block of each kernel over columns (``multikernel``). Every plan is made
for the architecture it runs on (the GPU's, ``bench.gpu.device_arch``; ``--arch`` for the dry run), whose shared
memory per block (``cuda.CudaLimits``) decides one kernel or several.

Run: ``make bench`` (all benchmarks; without a GPU, torch or cupy this one prints why and writes nothing),
``python -m bench.bench_fft_cuda [--quick] [--sanitize]``; results: bench/results/fft_cuda.json and .md
(quick: bench/results/quick/); ``--dry-run``: fft_cuda_dry_run.json and .md.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import math
import pathlib
import statistics
import subprocess
import sys
import time

from bench import gpu

# (kind, n, dtype) of every row; batch = BATCH_POINTS // n
# 12000: 187.5 KiB of scratch per transform, one kernel on sm_90 (227 KiB per block), two on sm_80 (163 KiB)
ROWS = ([("c2c", n, "complex64") for n in (16, 64, 256, 1024, 4096, 16384, 65536, 2 ** 18, 2 ** 20,
                                            1000, 1009, 4099, 12000, 17, 97)]
        + [(kind, n, "complex64") for kind in ("r2c", "c2r") for n in (1024, 4096)]
        + [("c2c", n, "complex128") for n in (1024, 65536)])
QUICK_ROWS = ("c2c:64", "c2c:1024", "c2c:97", "c2c:4099", "c2c:65536", "r2c:1024", "c2c:1024:complex128")
BATCH_POINTS = 2 ** 23  # points per row: 64 MiB of complex64, beyond the 50 MiB L2 of an H100
CONVOLUTION_N = 4096  # the fused-convolution row: batch BATCH_POINTS // n real signals of this length,
CONVOLUTION_TAPS = 1024  # convolved (circularly) with one real filter of this many taps
CONSUMER_N = 1024  # the fused-consumer row: |FFT(x / 2)|^2 of batch BATCH_POINTS // n complex signals
# a row passes when error(generated) <= ERROR_FACTOR * error(cuFFT) (both against a float64 cuFFT), or
# <= ERROR_FLOOR for its precision (cuFFT can be exact where the generated operator rounds once; for complex128
# the reference is cuFFT itself, so the floor decides: 5x the unit tests' bound at n = 2^20)
ERROR_FACTOR = 10.0
ERROR_FLOOR = {"complex64": 1e-6, "complex128": 1e-13}
# the pass rule of a row in the words of the results files
OK_RULE = (f"error against a float64 cuFFT <= {ERROR_FACTOR:g} x cuFFT's (or {ERROR_FLOOR['complex64']:g} / "
           f"{ERROR_FLOOR['complex128']:g} for complex64 / complex128) and every element written")
# compute-sanitizer: one small plan per breakdown, (kind, n, dtype, batch); each child must end in this time
SANITIZE_PLANS = {"single codelet": ("c2c", 16, "complex64", 64), "Cooley-Tukey": ("c2c", 1024, "complex64", 8),
                  "Rader": ("c2c", 97, "complex64", 8), "Bluestein": ("c2c", 4099, "complex64", 4),
                  "multi-kernel": ("c2c", 65536, "complex64", 2)}
SANITIZE_TOOLS = ("memcheck", "racecheck")
SANITIZE_TIMEOUT = 120
SANITIZE_WORKERS = 5  # children at a time (the GPU machine has 16 cores)
ROOT = pathlib.Path(__file__).parent.parent


def row_name(kind: str, n: int, dtype: str) -> str:
    return f"{kind}:{n}" + ("" if dtype == "complex64" else f":{dtype}")


def selected_rows(quick: bool) -> list[tuple[str, int, str]]:
    return [row for row in ROWS if not quick or row_name(*row) in QUICK_ROWS]


def batch_of(n: int) -> int:
    return max(1, BATCH_POINTS // n)


def make_plan(kind: str, n: int, dtype: str, batch: int, arch: str, effort: str = "estimate"):
    from tvm_tailsplit import fft as tfft

    direction = "backward" if kind == "c2r" else "forward"
    return tfft.plan(n, batch, kind=kind, direction=direction, dtype=dtype, target={"kind": "cuda", "arch": arch},
                     effort=effort)


def flops(kind: str, n: int, batch: int) -> float:
    """5·n·log2(n)·batch for c2c, half of it for r2c / c2r (the FFT benchmark's convention)."""
    nominal = 5.0 * n * math.log2(n) * batch
    return nominal if kind == "c2c" else nominal / 2


def consumer_graph(arch: str, fused: bool):
    """The TE graph x -> x * 0.5 -> te_fft -> |.|^2 (``CONSUMER_N`` points, batch ``batch_of``) scheduled for
    ``arch``: the halving inlined into the first pass; with ``fused`` the power spectrum computed in the stores of
    the last pass (``fft.fuse_consumers``, one kernel), else its own kernel. The module and the constants."""
    import tvm
    from tvm import s_tir, te

    from tvm_tailsplit import fft as tfft

    n, batch = CONSUMER_N, batch_of(CONSUMER_N)
    x = te.placeholder((batch, n, 2), "float32", name="x")
    halved = te.compute(x.shape, lambda *i: x[i] * 0.5, name="halved")
    y = tfft.te_fft(halved, target={"kind": "cuda", "arch": arch})
    power = te.compute(y.shape[:-1], lambda b, k: y[b, k, 0] * y[b, k, 0] + y[b, k, 1] * y[b, k, 1], name="power")
    constants = tfft.te_fft_constants(power)
    func = te.create_prim_func([x, *[c for c, _ in constants], power]).with_attr("global_symbol", "main")
    report: list = []
    if fused:
        func = tfft.fuse_consumers(func, report)
        if "fused into the stores of the last pass" not in "".join(report):
            raise AssertionError(f"the power spectrum was not fused: {report}")
    sch = s_tir.Schedule(tvm.IRModule({"main": func}))
    sch.compute_inline(sch.get_sblock("halved"))
    if not fused:
        blocks, threads = sch.split(sch.fuse(*sch.get_loops(sch.get_sblock("power"))), [None, 256])
        sch.bind(blocks, "blockIdx.x")
        sch.bind(threads, "threadIdx.x")
    return sch.mod, constants


def compile_graph(mod, arch: str):
    """``mod`` (a scheduled te_fft graph) compiled for ``arch`` as ``te_fft``'s docstring says."""
    import tvm

    from tvm_tailsplit.fft.planner import CUDA_PIPELINE

    with tvm.transform.PassContext(opt_level=3, config={"tirx.disable_cse_tir": True}):
        return tvm.compile(mod, target=tvm.target.Target({"kind": "cuda", "arch": arch}), tir_pipeline=CUDA_PIPELINE)


# ------------------------------------------------------------------------------------------------ dry run


def dry_run(quick: bool, arch: str) -> dict:
    """Every plan of the rows built for ``arch`` (TVM source + nvcc), no GPU: compile time and kernels."""
    from tvm_tailsplit.cuda import CudaLimits, cuda_source, cuda_target
    from tvm_tailsplit.fft.multikernel import shared_bytes
    from tvm_tailsplit.fft.planner import CUDA_PIPELINE

    rows = []
    for kind, n, dtype in selected_rows(quick):
        batch = batch_of(n)
        start = time.perf_counter()
        plan = make_plan(kind, n, dtype, batch, arch)
        plan_seconds = time.perf_counter() - start
        built = gpu.nvcc_build(lambda plan=plan: plan.cuda_source(arch), arch)
        row = {"row": row_name(kind, n, dtype), "batch": batch, "breakdown": str(plan.tree),
               "plan_kernels": plan.kernels, "staged": list(plan.staged), "lanes": plan.lanes,
               "passes": len(plan.passes.passes), "plan_seconds": plan_seconds,
               "threads": [g.threads for g in plan.kernel_groups or []] or [plan.variant.cuda_threads],
               "group_shared_bytes": [shared_bytes(plan.passes, g, plan.real_dtype) for g in plan.kernel_groups]
               if plan.kernel_groups else [plan.workspace_bytes] if plan.kernels == 1 else [],
               **built}
        rows.append(row)
        print(f"{row['row']} batch {batch}: {gpu.build_outcome(built)}", flush=True)
    consumer = {}
    for label, fused in (("fused", True), ("unfused", False)):
        consumer[label] = gpu.nvcc_build(lambda fused=fused: cuda_source(consumer_graph(arch, fused)[0], arch,
                                                                         tir_pipeline=CUDA_PIPELINE), arch)
        print(f"consumer graph {label}: {gpu.build_outcome(consumer[label])}", flush=True)
    return {"arch": arch, "shared_limit_bytes": CudaLimits.of(cuda_target(arch)).shared, "quick": quick,
            "date": gpu.now(), "rows": rows, "consumer_graph": consumer,
            "command": f"python -m bench.bench_fft_cuda --dry-run{' --quick' if quick else ''} --arch {arch}"}


def dry_run_markdown(report: dict) -> str:
    lines = [*gpu.dry_run_heading("CUDA FFT plans", report),
             "Transforms per block (`lanes`) and which rows the block stages through shared memory (coalesced "
             "vector copies, `tuning.CUDA_STAGE_*`: input and output for blocks of several transforms, the input "
             "alone for blocks of one); passes: passes over memory (the kernels of a plan of one kernel per pass); "
             "shared KiB: each kernel's shared memory per block (a one-kernel plan's scratch and staged rows, each "
             "kernel's in a plan of kernels over columns, `multikernel`; dynamic shared memory above 48 KiB, which "
             "ptxas does not count); registers and ptxas "
             "shared bytes: the largest of the plan's kernels; threads: threads per block of each kernel (`schedule`, "
             f"`multikernel`). Shared memory per block on {report['arch']}: at most "
             f"{report['shared_limit_bytes'] / 1024:g} KiB (`cuda.SHARED_MEMORY_PER_BLOCK`).", "",
             "| row | batch | breakdown | lanes | staged | compiled | passes | kernels | threads | shared KiB | TVM s "
             "| nvcc s | spill bytes | registers | ptxas shared bytes |", "|" + "---|" * 15]
    for row in report["rows"]:
        shared = ", ".join(f"{round(b / 1024, 1):g}" for b in row.get("group_shared_bytes", [])) or "-"
        if row["compiled"]:
            threads = ", ".join(map(str, row["threads"]))
            cells = (f"yes | {row['passes']} | {row['kernels']} | {threads} | {shared} | {row['tvm_seconds']:.1f} | "
                     f"{row['nvcc_seconds']:.1f} | {row['spills']} | {row['registers']} | {row['shared_bytes']}")
        else:
            cells = f"NO: {row['error']} | - | - | - | - | - | - | - | - | -"
        lines.append(f"| {row['row']} | {row['batch']} | {row['breakdown'][:60]} | {row['lanes']} | "
                     f"{' + '.join(row['staged']) or 'no'} | {cells} |")
    if "consumer_graph" in report:
        lines += ["", f"The fused-consumer row's TE graph |FFT(x / 2)|^2 (n = {CONSUMER_N}, batch "
                  f"{batch_of(CONSUMER_N)}): the power spectrum fused into the last pass (`fft.fuse_consumers`) or "
                  "its own kernel.", ""]
        lines += [f"- {label}: {gpu.build_outcome(built)}" for label, built in report["consumer_graph"].items()]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------ on the GPU


def torch_dtypes(dtype: str) -> tuple:
    import torch

    return (torch.complex64, torch.float32) if dtype == "complex64" else (torch.complex128, torch.float64)


def random_input(kind: str, n: int, dtype: str, batch: int, seed: int):
    """A fresh random device input of the row (c2r: the rfft of a random real signal, Hermitian as c2r needs)."""
    import torch

    complex_dtype, real_dtype = torch_dtypes(dtype)
    generator = torch.Generator(device="cuda").manual_seed(seed)
    if kind == "c2c":
        return torch.randn(batch, n, dtype=complex_dtype, device="cuda", generator=generator)
    real = torch.randn(batch, n, dtype=real_dtype, device="cuda", generator=generator)
    return real if kind == "r2c" else torch.fft.rfft(real)


def cufft(kind: str, n: int, x):
    """torch.fft's transform of the row (cuFFT) as a function of the input."""
    import torch

    return {"c2c": torch.fft.fft, "r2c": torch.fft.rfft, "c2r": lambda a: torch.fft.irfft(a, n=n)}[kind](x)


def as_floats(tensor):
    """A complex torch tensor as its float view with a trailing 2 (the plans' layout); a real one unchanged."""
    import torch

    return torch.view_as_real(tensor) if tensor.is_complex() else tensor


def tvm_view(tensor):
    """A TVM tensor aliasing the torch tensor's device memory (the plans' float layout)."""
    import tvm_ffi

    return tvm_ffi.from_dlpack(as_floats(tensor))


def check_row(plan, kind: str, n: int, dtype: str, batch: int) -> dict:
    """Errors of the generated operator on a fresh input: against torch.fft in the same precision and, with cuFFT,
    against a float64 torch.fft; every output element written (the output is poisoned with NaN first)."""
    import torch

    x = random_input(kind, n, dtype, batch, seed=1)
    want = cufft(kind, n, x)
    got = torch.full_like(want, math.nan)
    source = x.clone()  # kept alive until the device is synchronized
    plan(tvm_view(source), tvm_view(got))
    torch.cuda.synchronize()
    reference = cufft(kind, n, x.to(torch.complex128 if x.is_complex() else torch.float64))
    written = bool(torch.isfinite(as_floats(got)).all().item())
    result = {"error_vs_cufft": gpu.relative_error(got, want),
              "error_vs_float64": gpu.relative_error(got, reference),
              "cufft_error_vs_float64": gpu.relative_error(want, reference), "all_written": written}
    bound = max(ERROR_FACTOR * result["cufft_error_vs_float64"], ERROR_FLOOR[dtype])
    result["ok"] = written and result["error_vs_float64"] <= bound
    return result


def copy_bandwidth(nbytes: int, rounds: int) -> float:
    """Device-to-device copy speed in GB/s (bytes read + bytes written) of a torch copy of ``nbytes``."""
    import torch

    source = torch.randn(nbytes // 4, device="cuda")
    target = torch.empty_like(source)
    seconds = statistics.median(gpu.timed_rounds({"copy": lambda: target.copy_(source)}, rounds)["copy"])
    return 2 * nbytes / seconds / 1e9


def measure_row(kind: str, n: int, dtype: str, rounds: int, arch: str, bandwidth: float) -> dict:
    import torch

    batch = batch_of(n)
    start = time.perf_counter()
    plan = make_plan(kind, n, dtype, batch, arch)
    x = random_input(kind, n, dtype, batch, seed=0)
    out = cufft(kind, n, x)
    plan(tvm_view(x), tvm_view(out))  # compiles the CUDA module (on first call)
    torch.cuda.synchronize()
    compile_seconds = time.perf_counter() - start
    if tuple(as_floats(x).shape) != plan.input_shape or tuple(as_floats(out).shape) != plan.output_shape:
        raise AssertionError(f"{row_name(kind, n, dtype)}: plan shapes {plan.input_shape} -> {plan.output_shape}, "
                             f"data {tuple(as_floats(x).shape)} -> {tuple(as_floats(out).shape)}")
    x_tvm, out_tvm = tvm_view(x), tvm_view(out)
    runners = {"generated": lambda: plan(x_tvm, out_tvm), **cufft_runners(kind, n, x, out)}
    seconds = gpu.median_seconds(runners, rounds)
    moved = x.numel() * x.element_size() + out.numel() * out.element_size()
    limit = moved / (bandwidth * 1e9)
    row = {"row": row_name(kind, n, dtype), "kind": kind, "n": n, "dtype": dtype, "batch": batch,
           "breakdown": str(plan.tree), "kernels": plan.kernels, "compile_seconds": compile_seconds,
           "us": {name: s * 1e6 for name, s in seconds.items()} | {"limit": limit * 1e6},
           "gflops": {name: flops(kind, n, batch) / s / 1e9 for name, s in seconds.items()},
           "generated/torch.fft": seconds["generated"] / seconds["torch.fft"],
           "generated/cupy.fft": seconds["generated"] / seconds["cupy.fft"],
           "generated/cuFFT": seconds["generated"] / cufft_seconds(seconds),
           "generated/limit": seconds["generated"] / limit}
    row.update(check_row(plan, kind, n, dtype, batch))
    return row


def cufft_runners(kind: str, n: int, x, out) -> dict:
    """The row's two cuFFT routes on the device input ``x``: torch.fft into a tensor like ``out`` (preallocated)
    and cupy.fft (its output from cupy's memory pool)."""
    import cupy
    import torch

    torch_out = torch.empty_like(out)
    torch_fn = {"c2c": lambda: torch.fft.fft(x, out=torch_out), "r2c": lambda: torch.fft.rfft(x, out=torch_out),
                "c2r": lambda: torch.fft.irfft(x, n=n, out=torch_out)}[kind]
    x_cupy = cupy.from_dlpack(x)
    cupy_fn = {"c2c": cupy.fft.fft, "r2c": cupy.fft.rfft, "c2r": lambda a: cupy.fft.irfft(a, n=n)}[kind]
    return {"torch.fft": torch_fn, "cupy.fft": lambda: cupy_fn(x_cupy)}


def cufft_seconds(times: dict[str, float]) -> float:
    """cuFFT's time in a row's ``us`` or seconds: the faster of its two routes, torch.fft and cupy.fft."""
    return min(times["torch.fft"], times["cupy.fft"])


def measure_convolution(rounds: int, arch: str) -> dict:
    """The fused-convolution row: ``tvm_tailsplit.fft.plan_convolve`` against torch's rfft -> multiply -> irfft and
    the generated r2c -> torch multiply -> generated c2r; errors against torch's."""
    import torch

    from tvm_tailsplit import fft as tfft

    n, batch = CONVOLUTION_N, batch_of(CONVOLUTION_N)
    x = random_input("r2c", n, "complex64", batch, seed=2)
    taps = torch.randn(CONVOLUTION_TAPS, device="cuda", generator=torch.Generator(device="cuda").manual_seed(3))
    h_hat = torch.fft.rfft(taps, n=n)
    r2c, c2r = make_plan("r2c", n, "complex64", batch, arch), make_plan("c2r", n, "complex64", batch, arch)
    spectrum = torch.empty(batch, n // 2 + 1, dtype=torch.complex64, device="cuda")
    out = torch.empty_like(x)
    x_tvm, spectrum_tvm, out_tvm = tvm_view(x), tvm_view(spectrum), tvm_view(out)

    def unfused() -> None:
        r2c(x_tvm, spectrum_tvm)
        spectrum.mul_(h_hat)
        c2r(spectrum_tvm, out_tvm)

    fused = tfft.plan_convolve(n, taps.cpu().numpy(), batch, "float32", target={"kind": "cuda", "arch": arch})
    fused_out = torch.empty_like(x)
    fused_out_tvm = tvm_view(fused_out)
    runners = {"torch rfft*h irfft": lambda: torch.fft.irfft(torch.fft.rfft(x) * h_hat, n=n),
               "generated r2c*h c2r": unfused,
               "generated convolve (fused)": lambda: fused(x_tvm, out=fused_out_tvm)}
    want = runners["torch rfft*h irfft"]()
    errors = {}
    for name, result in (("generated r2c*h c2r", out), ("generated convolve (fused)", fused_out)):
        result.fill_(math.nan)
        runners[name]()
        torch.cuda.synchronize()
        errors[name] = gpu.relative_error(result, want)
    seconds = gpu.median_seconds(runners, rounds)
    return {"row": f"convolution:{n}", "n": n, "taps": CONVOLUTION_TAPS, "batch": batch,
            "us": {name: s * 1e6 for name, s in seconds.items()}, "errors_vs_torch": errors,
            "ok": all(e <= 1e-5 for e in errors.values())}


def measure_fused_consumer(rounds: int, arch: str) -> dict:
    """The fused-consumer row: the TE graph |FFT(x / 2)|^2 with the power spectrum fused into the FFT's last pass
    (one kernel) and as its own kernel, against torch's fft -> abs -> square; errors against torch's."""
    import torch

    n, batch = CONSUMER_N, batch_of(CONSUMER_N)
    x = random_input("c2c", n, "complex64", batch, seed=4)
    device = torch.device("cuda")
    graphs = {}
    for label, fused in (("te graph, power spectrum fused", True), ("te graph, power spectrum a kernel", False)):
        mod, constants = consumer_graph(arch, fused)
        tables = [torch.from_numpy(value).to(device) for _, value in constants]  # kept alive with their views
        out = torch.empty(batch, n, device=device)
        graphs[label] = (compile_graph(mod, arch)["main"], tables, [tvm_view(t) for t in tables], out, tvm_view(out))
    x_tvm = tvm_view(x)
    runners = {"torch fft abs square": lambda: torch.fft.fft(x * 0.5).abs().square()}
    for label, (function, _, table_views, _, out_view) in graphs.items():
        runners[label] = lambda f=function, t=table_views, o=out_view: f(x_tvm, *t, o)
    want = runners["torch fft abs square"]()
    errors = {}
    for label, (_, _, _, out, _) in graphs.items():
        out.fill_(math.nan)
        runners[label]()
        torch.cuda.synchronize()
        errors[label] = gpu.relative_error(out, want)
    seconds = gpu.median_seconds(runners, rounds)
    return {"row": f"power spectrum:{n}", "n": n, "batch": batch, "us": {name: s * 1e6 for name, s in seconds.items()},
            "errors_vs_torch": errors, "ok": all(e <= 1e-5 for e in errors.values())}


def sanitized_child(name: str, command: list[str]) -> dict:
    """One child of ``sanitize`` run under compute-sanitizer: its exit status and summary lines (or the error)."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=SANITIZE_TIMEOUT, cwd=ROOT)
        lines = [line.strip("= ").strip() for line in (done.stdout + done.stderr).splitlines()
                 if "SUMMARY" in line or "child:" in line]
        outcome = {"exit": done.returncode, "summary": lines}
    except (OSError, subprocess.TimeoutExpired) as error:
        outcome = {"exit": None, "summary": [f"{type(error).__name__}: {error}"]}
    print(f"sanitize {name}: {outcome}", flush=True)
    return outcome


def sanitize(arch: str) -> dict:
    """compute-sanitizer's summary lines per breakdown and tool, each plan run once in a subprocess; the children
    run ``SANITIZE_WORKERS`` at a time (each spends most of its time starting Python and building its plan on one
    core), in the order of ``SANITIZE_PLANS`` and ``SANITIZE_TOOLS`` in the result."""
    commands = {f"{label} {row_name(kind, n, dtype)} {tool}":
                ["compute-sanitizer", "--tool", tool, sys.executable, "-m", "bench.bench_fft_cuda",
                 "--sanitize-child", f"{kind}:{n}:{dtype}:{batch}", "--arch", arch]
                for label, (kind, n, dtype, batch) in SANITIZE_PLANS.items() for tool in SANITIZE_TOOLS}
    with concurrent.futures.ThreadPoolExecutor(SANITIZE_WORKERS) as pool:
        outcomes = list(pool.map(sanitized_child, commands, commands.values()))
    return dict(zip(commands, outcomes, strict=True))


def sanitize_child(spec: str, arch: str) -> None:
    """One plan run once on numpy data (no torch: less for the sanitizer to watch) and checked against numpy."""
    import numpy as np

    kind, n, dtype, batch = spec.split(":")
    n, batch = int(n), int(batch)
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((batch, n)) + 1j * rng.standard_normal((batch, n))).astype(dtype)
    got = make_plan(kind, n, dtype, batch, arch)(x)
    want = np.fft.fft(x.astype(np.complex128))
    print(f"child: {spec} relative error {np.linalg.norm(got - want) / np.linalg.norm(want):.2e}", flush=True)


def run(quick: bool, with_sanitizer: bool) -> dict:
    rounds = gpu.QUICK_ROUNDS if quick else gpu.ROUNDS
    arch = gpu.device_arch()
    info = gpu.gpu_machine()
    bandwidth = copy_bandwidth(BATCH_POINTS * 8, rounds)
    dram_bandwidth = copy_bandwidth(2 ** 30, rounds)
    print(f"machine: {info}\ncopy bandwidth {bandwidth:.0f} GB/s (64 MiB), {dram_bandwidth:.0f} GB/s (1 GiB)",
          flush=True)
    rows = []
    for kind, n, dtype in selected_rows(quick):
        row = measure_row(kind, n, dtype, rounds, arch, bandwidth)
        rows.append(row)
        print(f"{row['row']}: " + " ".join(f"{k}={v:.1f}us" for k, v in row["us"].items())
              + f" gen/cuFFT {row['generated/cuFFT']:.2f} gen/limit {row['generated/limit']:.2f} "
              f"error {row['error_vs_cufft']:.1e} ok={row['ok']}", flush=True)
    report = {"machine": info, "rounds": rounds, "quick": quick, "copy_bandwidth_GBps": bandwidth,
              "dram_bandwidth_GBps": dram_bandwidth, "rows": rows, "convolution": measure_convolution(rounds, arch),
              "fused_consumer": measure_fused_consumer(rounds, arch),
              "command": f"python -m bench.bench_fft_cuda{' --quick' if quick else ''}"
                         f"{' --sanitize' if with_sanitizer else ''}"}
    print(f"convolution: {report['convolution']}\nfused consumer: {report['fused_consumer']}", flush=True)
    if with_sanitizer:
        report["sanitizer"] = sanitize(arch)
    return report


def _implementations(title: str, row: dict) -> list[str]:
    """The markdown lines of a row timing several implementations: µs and error against torch each."""
    lines = ["", title, "", "| implementation | µs | error vs torch |", "|---|---|---|"]
    for name, us in row["us"].items():
        error = row["errors_vs_torch"].get(name)
        lines.append(f"| {name} | {us:.1f} | {'-' if error is None else f'{error:.1e}'} |")
    return lines


def markdown(report: dict) -> str:
    info = report["machine"]
    lines = [
        "# CUDA FFT benchmark: the generated operator against cuFFT (µs, lower is better)", "",
        f"{gpu.machine_text(info, 'cupy', 'tvm')}. Device-to-device copy "
        f"{report['copy_bandwidth_GBps']:.0f} GB/s (64 MiB, the limit's speed), {report['dram_bandwidth_GBps']:.0f} "
        f"GB/s (1 GiB). Batches of 2^23 / n transforms on device-resident data; every time is the median of "
        f"{report['rounds']} rounds timing the implementations side by side. `limit`: one read of the input and one "
        f"write of the output at the copy speed. Ratios are times (generated / other); cuFFT: the faster of torch.fft "
        f"and cupy.fft. Error: generated against "
        f"torch.fft in the same precision; ok: {OK_RULE}. Command: `{report['command']}`.", "",
        "| row | batch | breakdown | kernels | generated | torch.fft | cupy.fft | limit | gen/cuFFT | gen/limit | "
        "GFLOP/s gen | error vs cuFFT | ok |", "|" + "---|" * 13]
    for row in report["rows"]:
        us = row["us"]
        lines.append(f"| {row['row']} | {row['batch']} | {row['breakdown'][:40]} | {row['kernels']} | "
                     f"{us['generated']:.1f} | {us['torch.fft']:.1f} | {us['cupy.fft']:.1f} | {us['limit']:.1f} | "
                     f"{us['generated'] / cufft_seconds(us):.2f} | {row['generated/limit']:.2f} | "
                     f"{row['gflops']['generated']:.0f} | {row['error_vs_cufft']:.1e} | "
                     f"{'yes' if row['ok'] else 'NO'} |")
    conv, consumer = report["convolution"], report["fused_consumer"]
    lines += _implementations(f"Fused convolution irfft(rfft(x) * h_hat), n = {conv['n']}, {conv['taps']} taps, "
                              f"batch {conv['batch']}:", conv)
    lines += _implementations(f"Power spectrum |FFT(x / 2)|^2 as a TE graph, n = {consumer['n']}, batch "
                              f"{consumer['batch']} (`fft.fuse_consumers`):", consumer)
    if "sanitizer" in report:
        lines += ["", "compute-sanitizer (one small plan per breakdown):", "", "| plan and tool | exit | summary |",
                  "|---|---|---|"]
        for name, outcome in report["sanitizer"].items():
            lines.append(f"| {name} | {outcome['exit']} | {'; '.join(outcome['summary'])} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark with the options ``argv`` (None: none, the full run, as ``bench.run_all`` calls it)."""
    cli = gpu.parser("bench_fft_cuda", (__doc__ or "").split("\n\n")[0])
    cli.add_argument("--sanitize", action="store_true",
                     help="also run compute-sanitizer memcheck and racecheck on one plan per breakdown")
    cli.add_argument("--sanitize-child", help=argparse.SUPPRESS)  # the subprocess of --sanitize
    args = cli.parse_args([] if argv is None else argv)
    if args.sanitize_child:
        sanitize_child(args.sanitize_child, args.arch)
        return
    gpu.dispatch("fft_cuda", args, dry_run=lambda: dry_run(args.quick, args.arch), dry_run_markdown=dry_run_markdown,
                 modules=("torch", "cupy"), run=lambda: run(args.quick, args.sanitize), markdown=markdown)


if __name__ == "__main__":
    main(sys.argv[1:])
