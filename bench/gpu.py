"""What the GPU benchmarks (``bench_fft_cuda``, ``bench_tails_cuda``) share: whether this machine can run them,
the device's description, side-by-side timing on the device, relative errors, the nvcc build of ``--dry-run``
and where results go.

Timing (METHOD.md of the device machine): every implementation of a row is warmed up (module load, JIT, cuFFT
plans and cuBLAS handles stay out of the numbers), then timed in each of the rounds in turn: calls are enqueued
back to back and the device synchronized once (``torch.cuda.synchronize``, every stream of the device, so TVM's,
torch's and cupy's launches are all waited for), the wall time divided by the calls; the tables show the median
over the rounds. torch and cupy are imported on use: ``make bench`` imports every benchmark on machines without
them.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import math
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

from bench import cli
from bench.cli import write_results  # re-exported: what the GPU benchmarks write their results with
from tvm_tailsplit.cuda import device_arch

__all__ = ["MIN_SECONDS", "QUICK_ROUNDS", "ROUNDS", "build_outcome", "cublas_mm", "device_arch", "dispatch",
           "dry_run_heading", "gpu_machine", "machine_text", "median_seconds", "now", "nvcc_build", "parser",
           "relative_error", "skip_reason", "timed_rounds", "write_results"]

# rounds of side-by-side timings per row (the tables show medians); a quick run keeps the same count
ROUNDS = 7
QUICK_ROUNDS = 5
# one timing enqueues calls for at least this long before the single synchronization: launch gaps and the
# synchronization itself stay under 1% of it for kernels of 10 us and more
MIN_SECONDS = 0.05
# the architecture --dry-run builds for without a GPU (the H100 / H200 the device machine lends)
DRY_RUN_ARCH = "sm_90"


def parser(name: str, description: str) -> argparse.ArgumentParser:
    """``cli.parser`` (``--quick``) with ``--dry-run`` and ``--arch``."""
    result = cli.parser(name, description)
    result.add_argument("--dry-run", action="store_true",
                        help="no GPU needed: build (TVM + nvcc) every kernel of the rows, report compile time and "
                             "kernel count, time nothing; results go to <name>_dry_run.json/.md")
    result.add_argument("--arch", default=DRY_RUN_ARCH, help=f"architecture of --dry-run (default {DRY_RUN_ARCH})")
    return result


def skip_reason(modules: tuple[str, ...]) -> str | None:
    """Why a GPU run is impossible here (no device TVM sees, or a missing Python module), or None."""
    from tvm_tailsplit.cuda import gpu_available

    if not gpu_available():
        return "no GPU (tvm_tailsplit.cuda.gpu_available() is false)"
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    return f"missing Python module(s) {', '.join(missing)}" if missing else None


def gpu_machine() -> dict:
    """The host (``bench_fft.machine``) with the GPU's name, architecture and the torch / CUDA versions."""
    import torch

    from bench.bench_fft import machine

    info = machine()
    info.update(gpu=torch.cuda.get_device_name(0), arch=device_arch(), torch=torch.__version__,
                cuda=torch.version.cuda)
    if importlib.util.find_spec("cupy") is not None:
        import cupy

        info["cupy"] = cupy.__version__
    return info


def seconds_per_call(run: Callable[[], Any], calls: int) -> float:
    """Wall seconds per call of ``calls`` calls enqueued back to back, the device synchronized once."""
    import torch

    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        run()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls


def timed_rounds(runners: dict[str, Callable[[], Any]], rounds: int) -> dict[str, list[float]]:
    """name -> seconds per call in each of ``rounds`` rounds that time every runner in turn (warmed up first; the
    calls per timing chosen from one warm call so that a timing lasts at least ``MIN_SECONDS``)."""
    calls = {}
    for name, run in runners.items():
        seconds_per_call(run, 1)  # warm-up: module load, JIT, library plans
        calls[name] = max(3, math.ceil(MIN_SECONDS / max(seconds_per_call(run, 3), 1e-7)))
    seconds: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(rounds):
        for name, run in runners.items():
            seconds[name].append(seconds_per_call(run, calls[name]))
    return seconds


def cublas_mm(a: Any, b: Any) -> Any:
    """cuBLAS through ``torch.mm(a, b)`` with fp32 output where torch has ``out_dtype`` (else fp16 output)."""
    import torch

    try:
        return torch.mm(a, b, out_dtype=torch.float32)
    except TypeError:
        return torch.mm(a, b)


def median_seconds(runners: dict[str, Callable[[], Any]], rounds: int) -> dict[str, float]:
    """name -> the median over ``rounds`` of ``timed_rounds``' seconds per call."""
    return {name: statistics.median(times) for name, times in timed_rounds(runners, rounds).items()}


def now() -> str:
    """The UTC time, ISO 8601 to the second (the results' date)."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def relative_error(got: Any, want: Any) -> float:
    """‖got − want‖ / ‖want‖ of two torch tensors, in float64 (complex128 for complex data); NaN stays NaN."""
    import torch

    wide = torch.complex128 if want.is_complex() or got.is_complex() else torch.float64
    difference = torch.linalg.vector_norm((got.to(wide) - want.to(wide)).flatten()).item()
    scale = torch.linalg.vector_norm(want.to(wide).flatten()).item()
    return difference / (scale or 1.0)


def nvcc_build(source_of: Callable[[], str], arch: str) -> dict:
    """``--dry-run`` of one kernel module: TVM's CUDA source (``source_of()``) compiled by nvcc for ``arch``:
    seconds of each step, kernels and their ptxas usage; an error is recorded, not raised."""
    from tvm_tailsplit.cuda import compile_cuda_source

    start = time.perf_counter()
    try:
        source = source_of()
        generated = time.perf_counter()
        usages = compile_cuda_source(source, arch, ("-diag-suppress", "177"))
    except Exception as error:  # noqa: BLE001 - the dry run reports every row's outcome
        return {"compiled": False, "error": f"{type(error).__name__}: {str(error).strip().splitlines()[-1]}",
                "seconds": time.perf_counter() - start}
    return {"compiled": True, "tvm_seconds": generated - start, "nvcc_seconds": time.perf_counter() - generated,
            "seconds": time.perf_counter() - start, "kernels": len(usages),
            "ptxas": [str(usage) for usage in usages],
            "spills": sum(u.spill_store_bytes + u.spill_load_bytes for u in usages),
            "registers": max((u.registers for u in usages), default=0),
            "shared_bytes": max((u.shared_memory_bytes for u in usages), default=0)}


def build_outcome(built: dict) -> str:
    """One line about an ``nvcc_build``: kernels, seconds and spills, or the error."""
    if not built["compiled"]:
        return f"FAILED {built['error']}"
    return (f"compiled, {built['kernels']} kernel(s), TVM {built['tvm_seconds']:.1f} s + nvcc "
            f"{built['nvcc_seconds']:.1f} s, {built['spills']} spill bytes")


def machine_text(info: dict, *versions: str) -> str:
    """The machine of a report (``gpu_machine``) in the words of its markdown: the GPU, its architecture, the host,
    the date, torch and CUDA, and the ``versions`` named ("cupy", "tvm") too."""
    names = {"cupy": "cupy", "tvm": "TVM"}
    return (f"{info['gpu']} ({info['arch']}) on {info['cpu']}, {info['date']}; torch {info['torch']} (CUDA "
            f"{info['cuda']})" + "".join(f", {names[key]} {info.get(key, '-')}" for key in versions))


def dry_run_heading(what: str, report: dict) -> list[str]:
    """The first lines of a dry run's markdown: what was built for which architecture, when, where, how."""
    return [f"# {what} built for {report['arch']} without a GPU (TVM source + nvcc; nothing timed)", "",
            f"{report['date']}, {platform.node()}. Command: `{report['command']}`.", ""]


def dispatch(stem: str, args: argparse.Namespace, *, dry_run: Callable[[], dict],
             dry_run_markdown: Callable[[dict], str], modules: tuple[str, ...], run: Callable[[], dict],
             markdown: Callable[[dict], str], unsupported: Callable[[], str | None] | None = None) -> None:
    """What every GPU benchmark's ``main`` does with its parsed ``args``: ``--dry-run`` builds and writes
    ``<stem>_dry_run``; else, without a GPU, one of ``modules`` or (``unsupported()``) what the kernels need, it
    prints why and writes nothing; else it runs and writes ``<stem>``."""
    if args.dry_run:
        report = dry_run()
        write_results(f"{stem}_dry_run", args.quick, report, dry_run_markdown(report))
        return
    reason = skip_reason(modules) or (unsupported() if unsupported is not None else None)
    if reason:
        print(f"bench_{stem} skipped: {reason}; nothing written")
        return
    report = run()
    write_results(stem, args.quick, report, markdown(report))
