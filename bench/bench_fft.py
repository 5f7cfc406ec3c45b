"""FFT benchmark: the generated operator against numpy.fft, scipy.fft, pyFFTW and mkl_fft, in one run.

GFLOP/s = 5·n·log2(n)·batch / time for complex transforms (2.5·... for real ones), on batches of 16 MiB of
complex64 (16 MiB of float32 for r2c input and c2r output). Plans, FFTW wisdom and compiled operators are built
before timing. The machine is noisy, so the implementations of a case are timed side by side: in each of
`ROUNDS` rounds every implementation is timed in turn (the best of 2 repetitions of steady-state calls lasting
50 ms or more), and the table shows the median over the rounds. The generated operator on 1 thread and the
single-threaded libraries are measured together in a subprocess (TVM's thread pool size is fixed per
process), on the process's CPU time (all its threads), which other processes on a shared machine do not
inflate as they inflate wall time; the generated operator on TVM_NUM_THREADS threads (default: all cores)
and the multi-threaded libraries together in the main process, on wall time. Each generated column has a
`measure` twin: the plan made with `effort="measure"` (variants timed on this machine, with the process's thread
count, before the benchmark's timing), beside the estimate plan in the same rotation, with its speedup as the
median of their paired time ratios (a search that kept the estimate variant returns the estimate plan itself,
timed once); pyFFTW plans with FFTW_MEASURE. The memory-bandwidth ceiling is measured in the same run (a numpy
copy of one batch; a 256 MiB copy gives the DRAM bandwidth) and converted to the GFLOP/s a transform would reach
if it only read its input and wrote its output once.

Run: `make bench` (all benchmarks) or `python -m bench.bench_fft`; results: bench/results/fft.json and .md,
written only by a full run (every case, the default rounds). Runs that write no results: `--cases
c2c:64,r2c:1024` (a focused run; unknown cases are refused), `--rounds 3`, `--quick` (QUICK_CASES, QUICK_ROUNDS
rounds). `--help` lists the options.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

from tvm_tailsplit.fft.search import seconds_per_call

C2C_SIZES = [8, 16, 64, 256, 1024, 4096, 65536, 12, 60, 1000, 17, 97, 1009]
REAL_SIZE = 1024
BATCH_BYTES = 16 * 1024 * 1024
# rounds of side-by-side timings per case; the table shows medians (single best-of timings, one implementation
# after the other, differed by up to 30% between two runs on the 2-core benchmark machine)
ROUNDS = 7
# the single-threaded implementations are timed side by side with the generated operator on 1 thread (in a
# subprocess), the multi-threaded ones with it on TVM_NUM_THREADS threads: in one rotation, the idle worker
# threads of a multi-threaded library slowed the next implementation by up to 25% (n = 64, on 2 cores)
SINGLE_THREADED = ("numpy.fft", "scipy.fft w=1", "pyfftw t=1")
# pause after each timing, so that the worker threads of a multi-threaded library (OpenMP's spin for 200 ms
# after a parallel region) are idle when the next implementation is timed: without it, the generated operator
# timed after mkl_fft on 2 threads ran up to 30% slower than on 1 thread (n = 12, 64)
SETTLE_SECONDS = 0.3
RESULTS = pathlib.Path(__file__).parent / "results"
# `--quick`: these cases, this many rounds, no results written
QUICK_CASES = ("c2c:64", "c2c:1024", "c2c:97", "r2c:1024")
QUICK_ROUNDS = 2


def best_time(run, min_seconds: float = 0.15, repeats: int = 3, clock=time.perf_counter) -> float:
    """Best per-call time over `repeats` rounds of calls lasting at least `min_seconds` each (on `clock`)."""
    run()
    return min(seconds_per_call(run, min_seconds, clock) for _ in range(repeats))


def all_cases() -> list[tuple[str, int, int]]:
    """(kind, n, batch) of every measured transform."""
    result = [("c2c", n, max(1, BATCH_BYTES // (8 * n))) for n in C2C_SIZES]
    return result + [("r2c", REAL_SIZE, BATCH_BYTES // (4 * REAL_SIZE)),
                     ("c2r", REAL_SIZE, BATCH_BYTES // (4 * REAL_SIZE))]


def case_name(case: tuple[str, int, int]) -> str:
    return f"{case[0]}:{case[1]}"


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line: `cases` becomes the list of (kind, n, batch) to measure (unknown names are refused)."""
    names = [case_name(case) for case in all_cases()]
    parser = argparse.ArgumentParser(prog="python -m bench.bench_fft", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", help=f"comma-separated cases to measure (default: all): {','.join(names)}")
    parser.add_argument("--rounds", type=int, help=f"rounds of side-by-side timings per case (default {ROUNDS})")
    parser.add_argument("--quick", action="store_true",
                        help=f"{','.join(QUICK_CASES)} (unless --cases), {QUICK_ROUNDS} rounds (unless --rounds); "
                             "writes no results")
    parser.add_argument("--one-thread", action="store_true", help=argparse.SUPPRESS)  # the 1-thread subprocess
    args = parser.parse_args(argv)
    selected = args.cases.split(",") if args.cases else list(QUICK_CASES) if args.quick else names
    unknown = [name for name in selected if name not in names]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; the cases are {', '.join(names)}")
    if args.rounds is not None and args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    args.full = not args.quick and args.cases is None and args.rounds is None
    args.rounds = args.rounds or (QUICK_ROUNDS if args.quick else ROUNDS)
    args.selected = [case for case in all_cases() if case_name(case) in selected]
    return args


def flops(kind: str, n: int, batch: int) -> float:
    nominal = 5.0 * n * math.log2(n) * batch
    return nominal if kind == "c2c" else nominal / 2


def make_input(kind: str, n: int, batch: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    if kind == "r2c":
        return rng.standard_normal((batch, n)).astype(np.float32)
    length = n // 2 + 1 if kind == "c2r" else n
    return (rng.standard_normal((batch, length)) + 1j * rng.standard_normal((batch, length))).astype(np.complex64)


def side_by_side(runners: dict, rounds: int, clock=time.perf_counter) -> dict[str, list[float]]:
    """name -> seconds per call in each of `rounds` rounds, each timing every runner in turn."""
    seconds: dict = {name: [] for name in runners}
    for _ in range(rounds):
        for name, run in runners.items():
            seconds[name].append(best_time(run, min_seconds=0.05, repeats=2, clock=clock))
            time.sleep(SETTLE_SECONDS)
    return seconds


def milliseconds(seconds: dict[str, list[float]]) -> dict:
    """A row's timing fields from `side_by_side`'s seconds: "ms", each implementation's median over the rounds,
    and "rounds_ms", every round's time (ms per call)."""
    return {"ms": {name: statistics.median(values) * 1e3 for name, values in seconds.items()},
            "rounds_ms": {name: [value * 1e3 for value in values] for name, values in seconds.items()}}


def measure_generated(single_threaded: bool, cases: list[tuple[str, int, int]], rounds: int) -> dict:
    """GFLOP/s of the generated operator for every case, with this process's TVM thread count, and of the
    installed single-threaded (or else multi-threaded) libraries side by side with it (`libraries`; `skipped`:
    name -> reason)."""
    from tvm_tailsplit import fft as tfft

    results = {}
    for kind, n, batch in cases:
        start = time.perf_counter()
        direction = "backward" if kind == "c2r" else "forward"
        plan = tfft.plan(n, batch, kind=kind, direction=direction)
        compile_seconds = time.perf_counter() - start
        start = time.perf_counter()
        measured = tfft.plan(n, batch, kind=kind, direction=direction, effort="measure")
        measure_seconds = time.perf_counter() - start
        x = make_input(kind, n, batch)
        out = plan(x)
        runners = {"generated": lambda plan=plan, x=x, out=out: plan(x, out)}
        # a search that kept the estimate variant returns the same compiled plan: timing it twice would time noise
        same_plan = measured.variant == plan.variant
        if not same_plan:
            runners["generated measure"] = lambda plan=measured, x=x, out=out: plan(x, out)
        skipped = {}
        for name, runner in library_runners(kind, n, x).items():
            if isinstance(runner, str):
                skipped[name] = runner
            elif (name in SINGLE_THREADED) == single_threaded:
                runners[name] = runner
        # single-threaded: the process's CPU time (every thread's), which other processes on a shared machine do
        # not inflate; multi-threaded: wall time (CPU time would count the libraries' spinning threads)
        clock = time.process_time if single_threaded else time.perf_counter
        seconds = side_by_side(runners, rounds, clock=clock)
        if same_plan:
            seconds["generated measure"] = seconds["generated"]
        gflops = {name: flops(kind, n, batch) / statistics.median(times) / 1e9 for name, times in seconds.items()}
        # the measure plan's speedup over the estimate plan: the median over rounds of their paired time ratio
        speedup = statistics.median(e / m for e, m in zip(seconds["generated"], seconds["generated measure"],
                                                          strict=True))
        results[f"{kind}:{n}"] = {"gflops": gflops.pop("generated"), "gflops_measure": gflops.pop("generated measure"),
                                  "measure_speedup": speedup, "measure_same_plan": same_plan,
                                  "compile_seconds": compile_seconds, "measure_seconds": measure_seconds,
                                  "measure_variant": measured.search.winner, "passes": len(plan.passes.passes),
                                  "lanes": plan.lanes, "libraries": gflops, "skipped": skipped}
    return results


def library_runners(kind: str, n: int, x: np.ndarray) -> dict:
    """name -> zero-argument callable for every library that is installed; skipped ones map to a reason."""
    import scipy.fft

    runners: dict = {}
    numpy_fn = {"c2c": np.fft.fft, "r2c": np.fft.rfft, "c2r": lambda a: np.fft.irfft(a, n=n)}[kind]
    runners["numpy.fft"] = lambda: numpy_fn(x)
    scipy_fn = {"c2c": scipy.fft.fft, "r2c": scipy.fft.rfft, "c2r": lambda a, workers: scipy.fft.irfft(
        a, n=n, workers=workers)}[kind]
    for workers in (1, 2):
        runners[f"scipy.fft w={workers}"] = lambda w=workers: scipy_fn(x, workers=w)
    try:
        import pyfftw

        for threads in (1, 2):
            source = pyfftw.empty_aligned(x.shape, x.dtype)
            output_shape = (x.shape[0], n) if kind == "c2r" else (x.shape[0], n // 2 + 1) if kind == "r2c" \
                else x.shape
            output_dtype = np.float32 if kind == "c2r" else np.complex64
            target = pyfftw.empty_aligned(output_shape, output_dtype)
            direction = "FFTW_BACKWARD" if kind == "c2r" else "FFTW_FORWARD"
            # FFTW_MEASURE plans overwrite the arrays: fill the input afterwards
            fftw = pyfftw.FFTW(source, target, axes=(-1,), direction=direction, flags=("FFTW_MEASURE",),
                               threads=threads, planning_timelimit=20.0)
            source[:] = x
            runners[f"pyfftw t={threads}"] = fftw
    except ImportError as error:
        runners["pyfftw"] = f"not installed ({error})"
    try:
        import mkl_fft

        mkl_fn = {"c2c": mkl_fft.fft, "r2c": mkl_fft.rfft, "c2r": lambda a: mkl_fft.irfft(a, n=n)}[kind]
        runners["mkl_fft"] = lambda: mkl_fn(x)
    except ImportError as error:
        runners["mkl_fft"] = f"not installed ({error})"
    return runners


def memory_bandwidth(nbytes: int) -> float:
    """Copy bandwidth in GB/s (bytes read + bytes written) of a numpy copy of `nbytes`, best of 3."""
    source = np.ones(nbytes // 8, np.float64)
    target = np.empty_like(source)
    seconds = best_time(lambda: np.copyto(target, source), min_seconds=0.3)
    return 2 * source.nbytes / seconds / 1e9


def machine() -> dict:
    model = platform.processor()
    with contextlib.suppress(OSError):  # no /proc/cpuinfo: keep platform.processor()
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    import scipy
    import tvm

    return {"cpu": model, "cores": os.cpu_count(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec="seconds"), "python": platform.python_version(), "numpy": np.__version__,
        "scipy": scipy.__version__, "tvm": tvm.__version__,
        "tvm_num_threads": os.environ.get("TVM_NUM_THREADS", str(os.cpu_count()))}


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark with the options `argv` (None: none, the full run, as `bench.run_all` calls it)."""
    args = parse_args([] if argv is None else argv)
    if args.one_thread:
        print(json.dumps(measure_generated(True, args.selected, args.rounds)))
        return
    os.environ.setdefault("TVM_NUM_THREADS", str(os.cpu_count()))
    # every plan compiled and every search timed in this run (inherited by the timing subprocesses): `compile s`
    # and `measure s` are real, and no variant comes from an earlier run's saved wisdom
    os.environ["TVM_TAILSPLIT_CACHE"] = "0"
    info = machine()
    # the ceiling uses the copy of one batch (16 MiB, partly cache-resident like the transforms' data);
    # the 256 MiB copy is the DRAM bandwidth
    bandwidth = memory_bandwidth(BATCH_BYTES)
    dram_bandwidth = memory_bandwidth(256 * 1024 * 1024)
    print(f"machine: {info}\ncopy bandwidth: {bandwidth:.1f} GB/s (16 MiB), {dram_bandwidth:.1f} GB/s (256 MiB)",
          flush=True)
    options = ["--cases", ",".join(case_name(case) for case in args.selected), "--rounds", str(args.rounds)]
    single = subprocess.run([sys.executable, "-m", "bench.bench_fft", "--one-thread", *options], capture_output=True,
                            text=True, check=True, env={**os.environ, "TVM_NUM_THREADS": "1"},
                            cwd=pathlib.Path(__file__).parent.parent)
    generated_one = json.loads(single.stdout.strip().splitlines()[-1])
    generated_all = measure_generated(False, args.selected, args.rounds)
    rows = []
    skipped: dict[str, str] = {}
    for kind, n, batch in args.selected:
        key = f"{kind}:{n}"
        x = make_input(kind, n, batch)
        # bytes read + written once, over the copy bandwidth: the memory-bound GFLOP/s ceiling
        moved = x.nbytes + make_output_bytes(kind, n, batch)
        ceiling = flops(kind, n, batch) / (moved / (bandwidth * 1e9)) / 1e9
        threads = info["tvm_num_threads"]
        row = {"kind": kind, "n": n, "batch": batch, "ceiling": ceiling,
               "generated t=1": generated_one[key]["gflops"],
               "generated t=1 measure": generated_one[key]["gflops_measure"],
               f"generated t={threads}": generated_all[key]["gflops"],
               f"generated t={threads} measure": generated_all[key]["gflops_measure"],
               "compile_seconds": generated_all[key]["compile_seconds"], "passes": generated_all[key]["passes"],
               "measure_seconds": generated_one[key]["measure_seconds"],
               "measure t=1 variant": generated_one[key]["measure_variant"],
               f"measure t={threads} variant": generated_all[key]["measure_variant"],
               "measure t=1 speedup": generated_one[key]["measure_speedup"],
               f"measure t={threads} speedup": generated_all[key]["measure_speedup"]}
        for generated in (generated_one, generated_all):
            row.update(generated[key]["libraries"])
            skipped.update(generated[key]["skipped"])
        rows.append(row)
        print(" ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
    if not args.full:
        print("a focused or quick run: the results files keep the full benchmark")
        return
    RESULTS.mkdir(exist_ok=True)
    report = {"machine": info, "memory_bandwidth_GBps": bandwidth, "dram_bandwidth_GBps": dram_bandwidth,
              "skipped_libraries": skipped, "rows": rows,
              "command": "make bench (python -m bench.run_all) or python -m bench.bench_fft"}
    (RESULTS / "fft.json").write_text(json.dumps(report, indent=2))
    (RESULTS / "fft.md").write_text(markdown(report))
    print(f"wrote {RESULTS / 'fft.json'} and {RESULTS / 'fft.md'}")


def make_output_bytes(kind: str, n: int, batch: int) -> int:
    return {"c2c": 8 * n, "r2c": 8 * (n // 2 + 1), "c2r": 4 * n}[kind] * batch


def markdown(report: dict) -> str:
    info = report["machine"]
    columns = [c for c in report["rows"][0] if isinstance(report["rows"][0][c], float) and
               c not in ("compile_seconds", "measure_seconds") and not c.endswith(" speedup")]
    lines = [
        "# FFT benchmark (GFLOP/s, higher is better)",
        "",
        f"{info['cpu']}, {info['cores']} cores, {info['date']}; numpy {info['numpy']}, scipy {info['scipy']}, "
        f"TVM {info['tvm']}. Copy bandwidth {report['memory_bandwidth_GBps']:.1f} GB/s for a 16 MiB copy (one batch) "
        f"and {report['dram_bandwidth_GBps']:.1f} GB/s for 256 MiB (DRAM); `ceiling` is the GFLOP/s of a transform "
        "that reads its input and writes its output once at the 16 MiB copy bandwidth.",
        "GFLOP/s = 5·n·log2(n)·batch/time (half for r2c/c2r); batches of 16 MiB of complex64 (float32 for the real "
        "side of r2c/c2r). `generated t=k`: the generated operator on k threads (effort='estimate', the rules); "
        "`generated t=k measure`: its plan with effort='measure' (variants timed on this machine). Every value is "
        f"the median of {ROUNDS} rounds that time the implementations of a case side by side; the single-threaded "
        "columns (generated t=1 and its measure plan, numpy.fft, scipy.fft w=1, pyfftw t=1 with FFTW_MEASURE, timed "
        "together in one process) on the process's CPU time, the others on wall time. Command: "
        f"`{report['command']}`.",
        "",
        "| kind | n | batch | " + " | ".join(columns) + " | compile s | measure s |",
        "|" + "---|" * (len(columns) + 5),
    ]
    for row in report["rows"]:
        values = " | ".join(f"{row[c]:.2f}" if c in row else "-" for c in columns)
        lines.append(f"| {row['kind']} | {row['n']} | {row['batch']} | {values} | {row['compile_seconds']:.1f} | "
                     f"{row['measure_seconds']:.1f} |")
    variants = [c for c in report["rows"][0] if c.endswith(" variant")]
    lines += ["", "Variants that effort='measure' chose (changes from the estimate variant) and the measure plan's "
              "speedup over the estimate plan: the median over the rounds of the ratio of their times in the same "
              "round. Where the search kept the estimate variant, the measure plan is the estimate plan (the same "
              "compiled code), timed once: its column repeats the estimate's value and its speedup is 1.", "",
              "| kind | n | " + " | ".join(f"{c} | speedup" for c in variants) + " |",
              "|" + "---|" * (2 * len(variants) + 2)]
    for row in report["rows"]:
        cells = [f"{row[c]} | {row[c.replace(' variant', ' speedup')]:.3f}" for c in variants]
        lines.append(f"| {row['kind']} | {row['n']} | " + " | ".join(cells) + " |")
    if report["skipped_libraries"]:
        lines += ["", "Skipped: " + "; ".join(f"{k}: {v}" for k, v in report["skipped_libraries"].items())]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main(sys.argv[1:])
