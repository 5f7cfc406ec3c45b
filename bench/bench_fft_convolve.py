"""FFT convolution benchmark: the fused pipeline (`fft.plan_convolve`) against scipy.signal.fftconvolve and
against our own unfused rfft -> multiply -> irfft, on one thread.

Each case convolves `batch` rows of `length` float32 samples with a filter of `taps` ("full" mode: the
circular length n is `fft.convolve`'s, the smallest fast even length >= length + taps - 1). The filter's spectrum
is computed before timing in every implementation that can keep it (a plan applied to many blocks, as in
overlap-save):

* fused: `plan_convolve(n, h, batch)(x)` (zero-padding x to n, one pipeline call whose product with the filter is
  inside the pass that ends the r2c transform and begins the c2r one) and the output window (a view);
* unfused: x zero-padded to n, `plan(n, kind="r2c")`, the product with the filter's spectrum in numpy (in place,
  a separate pass over memory), `plan(n, kind="c2r")`, the output window; the same padding and window;
* scipy.fft + H: scipy.fft.rfft(x, m), the product with the precomputed spectrum, scipy.fft.irfft (workers=1),
  with m = scipy.fft.next_fast_len(length + taps - 1, real=True) (scipy's fast length: factors 2, 3, 5);
* scipy.signal.fftconvolve(x, h[None], axes=-1): scipy's own function (it transforms h on every call).

Every implementation runs in one child process with TVM_NUM_THREADS=1 (and one thread for OpenMP/BLAS) on its
CPU time (`time.process_time`), which other processes on the shared machine do not inflate. The child's glibc
malloc keeps freed blocks up to `MALLOC_THRESHOLD` bytes in its heap (`MALLOC_MMAP_THRESHOLD_`,
`MALLOC_TRIM_THRESHOLD_`): with glibc's defaults, after TVM's compiles in the same process,
scipy.signal.fftconvolve's result arrays were fresh mmaps on every call, whose page faults cost more system time
than its transforms (x 65536 x 8 rows, h 64: 2.9 ms user + 4.2 ms system per call; 2.5 ms in a process without
the compiles), and every implementation allocates its outputs. In each of `ROUNDS`
rounds every implementation is timed in turn (the best of 2 repetitions of calls lasting 50 ms or more,
`bench_fft.side_by_side`), and the table shows the median over the rounds. The results are checked against each
other (relative L2 error below 1e-5) before timing.

Run: `python -m bench.bench_fft_convolve` (all cases) or `--quick` (QUICK_CASES, QUICK_ROUNDS rounds); results
in bench/results/fft_convolve.json and .md (bench/results/quick/ for a quick run).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time

import numpy as np

from . import cli
from .bench_fft import machine, milliseconds, side_by_side

# (signal length, filter taps, rows): 1 MiB to 4 MiB of float32 per batch
CASES = [(1 << 16, 64, 8), (1 << 16, 4096, 8), (1 << 18, 64, 2), (1 << 18, 4096, 2), (1 << 20, 64, 1),
         (1 << 20, 4096, 1)]
ROUNDS = 5
# glibc malloc's mmap and trim thresholds in the child (see the module docstring): larger than any array here
MALLOC_THRESHOLD = 1 << 30
QUICK_CASES = [(1 << 16, 64, 8), (1 << 18, 4096, 2)]
QUICK_ROUNDS = 5
NAMES = ("fused", "unfused", "scipy.fft + H", "scipy.signal.fftconvolve")


def runners(length: int, taps: int, batch: int) -> tuple[int, int, dict, dict]:
    """(n, scipy's length, name -> call, name -> result) of the implementations for one case."""
    import scipy.fft
    import scipy.signal

    from tvm_tailsplit import fft
    from tvm_tailsplit.fft.convolve import convolution_length

    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, length)).astype(np.float32)
    h = rng.standard_normal(taps).astype(np.float32)
    count = length + taps - 1
    n = convolution_length(length, taps, "full")
    fused = fft.plan_convolve(n, h, batch, "float32")
    r2c = fft.plan(n, batch, kind="r2c", dtype="complex64")
    c2r = fft.plan(n, batch, kind="c2r", dtype="complex64")
    spectrum = np.fft.rfft(h.astype(np.float64), n)
    # rounded once, as the fused plan's (whose 1/n the c2r plan's norm applies here)
    spectrum64 = spectrum.astype(np.complex64)

    def run_fused():
        return fused(x)[:, :count]

    def run_unfused():
        padded = np.zeros((batch, n), np.float32)
        padded[:, :length] = x
        spectra = r2c(padded)
        spectra *= spectrum64
        return c2r(spectra)[:, :count]

    # scipy's own fast length (factors 2, 3, 5 for real transforms) and the spectrum for it
    scipy_n = scipy.fft.next_fast_len(count, real=True)
    scipy_spectrum = np.fft.rfft(h.astype(np.float64), scipy_n).astype(np.complex64)

    def run_scipy_fft():
        return scipy.fft.irfft(scipy.fft.rfft(x, scipy_n, workers=1) * scipy_spectrum, scipy_n,
                               workers=1)[:, :count]

    def run_fftconvolve():
        return scipy.signal.fftconvolve(x, h[None], mode="full", axes=-1)

    calls = {"fused": run_fused, "unfused": run_unfused, "scipy.fft + H": run_scipy_fft,
             "scipy.signal.fftconvolve": run_fftconvolve}
    results = {name: call() for name, call in calls.items()}
    return n, scipy_n, calls, results


def child(quick: bool) -> None:
    """Time every case on this process's one thread and print the rows as JSON."""
    rows = []
    for length, taps, batch in QUICK_CASES if quick else CASES:
        started = time.perf_counter()
        n, scipy_n, calls, results = runners(length, taps, batch)
        build_s = time.perf_counter() - started
        reference = results["scipy.signal.fftconvolve"].astype(np.float64)
        errors = {name: float(np.linalg.norm(result - reference) / np.linalg.norm(reference))
                  for name, result in results.items()}
        if max(errors.values()) > 1e-5:
            raise RuntimeError(f"x {length}, h {taps}: the implementations disagree: {errors}")
        timing = milliseconds(side_by_side(calls, QUICK_ROUNDS if quick else ROUNDS, clock=time.process_time))
        rows.append({"length": length, "taps": taps, "batch": batch, "n": n, "scipy_n": scipy_n, "build_s": build_s,
                     **timing, "errors": errors})
        print(f"x {length} h {taps} batch {batch} n {n}: " + ", ".join(f"{name} {ms:.2f} ms"
                                                                       for name, ms in timing["ms"].items()),
              file=sys.stderr, flush=True)
    print(json.dumps(rows))


def markdown(info: dict, rows: list[dict], rounds: int, quick: bool) -> str:
    lines = [
        "# FFT convolution: the fused pipeline against scipy and against unfused rfft -> multiply -> irfft",
        "",
        f"Machine: {info['cpu']}, {info['cores']} cores; {datetime.datetime.fromisoformat(info['date']):%Y-%m-%d %H:%M}"
        f" UTC; numpy {info['numpy']}, scipy {info['scipy']}, TVM {info['tvm']}. `python -m bench.bench_fft_convolve"
        f"{' --quick' if quick else ''}`: one thread (TVM_NUM_THREADS=1, scipy workers=1), glibc malloc keeping "
        "freed arrays in its heap (no page faults per call), CPU time "
        f"(`time.process_time`), median of {rounds} rounds of side-by-side timings (best of 2 repetitions of calls "
        "lasting >= 50 ms). float32, mode \"full\", n = `fft.convolve`'s length (fast, even). Times in ms per call "
        "of the whole batch; the ratios are the other implementation's time over the fused plan's (> 1: the fused "
        "plan is faster). The filter's spectrum is precomputed in the fused, unfused and scipy.fft + H columns; "
        "scipy.signal.fftconvolve transforms the filter on every call.",
        "",
        "| x | h | rows | n (ours, scipy's) | fused | unfused | scipy.fft + H | scipy.signal.fftconvolve | "
        "unfused / fused | scipy.fft + H / fused | fftconvolve / fused |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        ms = row["ms"]
        lines.append(f"| {row['length']} | {row['taps']} | {row['batch']} | {row['n']}, {row['scipy_n']} | " +
                     " | ".join(f"{ms[name]:.2f}" for name in NAMES) + " | " +
                     " | ".join(f"{ms[name] / ms['fused']:.2f}x" for name in NAMES[1:]) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = cli.parser("bench_fft_convolve", __doc__.split("\n\n")[0])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.quick)
        return
    heap = {name: str(MALLOC_THRESHOLD) for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")}
    rows = cli.single_threaded_child("bench_fft_convolve", args.quick, heap)
    info = {**machine(), "tvm_num_threads": "1"}
    rounds = QUICK_ROUNDS if args.quick else ROUNDS
    json_path, md_path = cli.result_paths("fft_convolve", args.quick)
    json_path.write_text(json.dumps({"machine": info, "rounds": rounds, "rows": rows}, indent=1) + "\n")
    md_path.write_text(markdown(info, rows, rounds, args.quick))
    print(md_path.read_text())


if __name__ == "__main__":
    main()
