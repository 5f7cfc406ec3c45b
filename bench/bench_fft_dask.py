"""Dask benchmark: a 2-D FFT of a complex64 array larger than one worker's memory limit, on a local cluster.

A `distributed.LocalCluster` of 2 worker processes (1 thread each, `--memory-limit` each; data beyond it
spills to disk) transforms a `--side` x `--side` complex64 array (default 16384²: 2 GiB, over the 1.5 GiB
limit) generated in chunks by the workers (dask's "auto" chunks of `array.chunk-size`, 128 MiB, its default). The 2-D
transform runs axis by axis: rechunk to whole rows, 1-D FFTs of the rows, an all-to-all rechunk to whole
columns, 1-D FFTs of the columns; the output is reduced to its sum (and a corner kept to compare the two
kernels), so it is never held whole. Three graphs, identical but for the per-chunk kernel:

* `tvm_tailsplit`: `tvm_tailsplit.fft.dask_array.fft2`, the generated operator per chunk (TVM_NUM_THREADS=1 in
  each worker: one worker thread, one core); its plans are compiled in each worker before timing (a warm-up
  call per chunk shape; the compile seconds are reported);
* `numpy (dask fft_wrap)`: `dask.array.fft.fft`, dask's numpy-backed kernel, with the same rechunks;
* `no transform`: the same generation, rechunks and reduction without any FFT: what the pipeline costs
  around the transforms.

Each round times the three side by side (wall time of the whole computation, the median over `--rounds`).
GFLOP/s = 5·N·log2(N)/time with N = side² points; GB/s = the array's bytes / time. Peak memory per worker:
each worker's resident-set high-water mark (Linux VmHWM, reset through /proc/self/clear_refs before each
computation), including the ~0.3 GB of the imported libraries (reported as the base).

Run: `python -m bench.bench_fft_dask` (results: bench/results/fft_dask.json and .md), or `--quick` (a 2048²
array in 2 MiB chunks, 1 round, results under bench/results/quick/: checks that everything works; that array
fits in memory). `--help` lists the options (--side, --memory-limit, --chunk-size, --rounds).
"""

from __future__ import annotations

import json
import logging
import math
import pathlib
import statistics
import sys
import tempfile
import time

import numpy as np

from bench import cli
from bench.bench_fft import machine

SIDE, QUICK_SIDE = 16384, 2048
MEMORY_LIMIT = "1.5GiB"
CHUNK_SIZE, QUICK_CHUNK_SIZE = "128MiB", "2MiB"  # dask's default array.chunk-size; quick: 16 chunks of 2048²
ROUNDS, QUICK_ROUNDS = 3, 1
WORKERS = 2
CORNER = 4  # the output corner kept to compare the kernels
VARIANTS = ("tvm_tailsplit", "numpy (dask fft_wrap)", "no transform")


def parse_args(argv: list[str]):
    """The command line (`--quick` from `bench.cli`; --side, --memory-limit, --rounds, --chunk-size)."""
    parser = cli.parser("bench_fft_dask", (__doc__ or "").split("\n\n")[0])
    parser.add_argument("--side", type=int, help=f"the array is side x side complex64 (default {SIDE}, quick "
                                                 f"{QUICK_SIDE})")
    parser.add_argument("--memory-limit", default=MEMORY_LIMIT, help=f"per worker (default {MEMORY_LIMIT})")
    parser.add_argument("--rounds", type=int, help=f"timed rounds (default {ROUNDS}, quick {QUICK_ROUNDS})")
    parser.add_argument("--chunk-size", help=f"dask's array.chunk-size (default {CHUNK_SIZE}, quick "
                                             f"{QUICK_CHUNK_SIZE})")
    args = parser.parse_args(argv)
    args.chunk_size = args.chunk_size or (QUICK_CHUNK_SIZE if args.quick else CHUNK_SIZE)
    args.side = args.side or (QUICK_SIDE if args.quick else SIDE)
    args.rounds = args.rounds or (QUICK_ROUNDS if args.quick else ROUNDS)
    if args.side < 2 or args.rounds < 1:
        parser.error("--side must be at least 2 and --rounds at least 1")
    return args


def random_complex(side: int, seed: int = 0):
    """A side x side complex64 dask array of uniform random parts, in dask's auto chunks for complex64
    (generated as float32 pairs, viewed as complex)."""
    import dask.array as da

    rows, columns = da.core.normalize_chunks("auto", (side, side), dtype=np.complex64)
    pairs = da.random.default_rng(seed).random((side, 2 * side), dtype=np.float32,
                                               chunks=(rows, tuple(2 * c for c in columns)))
    return pairs.view(np.complex64)


def build(variant: str, x):
    """The 2-D transform of `x` as `variant` computes it (see the module docstring)."""
    import dask.array as da

    from tvm_tailsplit.fft import dask_array as dfft

    if variant == "tvm_tailsplit":
        return dfft.fft2(x)
    rows = dfft.one_chunk_along(x, 1)
    if variant == "numpy (dask fft_wrap)":
        return da.fft.fft(dfft.one_chunk_along(da.fft.fft(rows, axis=1), 0), axis=0)
    return dfft.one_chunk_along(rows, 0)


def block_shapes(x) -> list[tuple[tuple[int, ...], int]]:
    """(block shape, axis) of every distinct block the row and column passes of `fft2(x)` transform."""
    from tvm_tailsplit.fft import dask_array as dfft

    rows = dfft.one_chunk_along(x, 1)
    columns = dfft.one_chunk_along(rows, 0)
    return sorted({(shape, axis) for array, axis in ((rows, 1), (columns, 0))
                   for shape in ((r, c) for r in set(array.chunks[0]) for c in set(array.chunks[1]))})


def warm_plans(shapes: list[tuple[tuple[int, ...], int]]) -> float:
    """In a worker: compile the plans of these blocks (one call each on zeros); the seconds it took."""
    from tvm_tailsplit.fft import fft

    started = time.perf_counter()
    for shape, axis in shapes:
        fft(np.zeros(shape, np.complex64), axis=axis)
    return time.perf_counter() - started


def reset_peak() -> int:
    """In a worker: reset the resident-set high-water mark (Linux clear_refs); the current resident bytes."""
    pathlib.Path("/proc/self/clear_refs").write_text("5")
    return _status_bytes("VmRSS")


def peak_bytes() -> int:
    """In a worker: the resident-set high-water mark since the last `reset_peak`."""
    return _status_bytes("VmHWM")


def _status_bytes(field: str) -> int:
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def run_variant(client, variant: str, side: int) -> dict:
    """Build, compute and measure one variant: seconds, peak and base bytes per worker, sum, corner."""
    x = random_complex(side)
    y = build(variant, x)
    base = client.run(reset_peak)
    started = time.perf_counter()
    total, corner = client.compute([y.sum(), y[:CORNER, :CORNER]], sync=True)
    seconds = time.perf_counter() - started
    peaks = client.run(peak_bytes)
    return {"seconds": seconds, "peak_bytes": sorted(peaks.values()), "base_bytes": sorted(base.values()),
            "sum": complex(total), "corner": np.asarray(corner)}


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark with the options `argv` (None: the full run, as `bench.run_all` calls it)."""
    args = parse_args([] if argv is None else argv)
    # the scheduler (in this process) logs every all-to-all rechunk it starts and stops as a warning
    logging.getLogger("distributed.shuffle").setLevel(logging.ERROR)
    import dask
    import distributed
    from dask.utils import format_bytes, parse_bytes

    info = {**machine(), "dask": dask.__version__, "distributed": distributed.__version__}
    array_bytes = args.side * args.side * np.dtype(np.complex64).itemsize
    limit = parse_bytes(args.memory_limit)
    print(f"machine: {info}\narray {args.side}x{args.side} complex64: {format_bytes(array_bytes)}; "
          f"{WORKERS} workers x {format_bytes(limit)}", flush=True)
    with dask.config.set({"array.chunk-size": args.chunk_size}), \
            tempfile.TemporaryDirectory(prefix="bench_fft_dask-") as spill, distributed.LocalCluster(
            n_workers=WORKERS, threads_per_worker=1, processes=True, memory_limit=limit, local_directory=spill,
            dashboard_address=None, worker_dashboard_address=None, env={"TVM_NUM_THREADS": "1"}) as cluster, \
            distributed.Client(cluster) as client:
        shapes = block_shapes(random_complex(args.side))
        compile_seconds = max(client.run(warm_plans, shapes).values())
        print(f"plans for blocks {shapes} compiled in each worker in {compile_seconds:.1f} s", flush=True)
        run_variant(client, "no transform", min(args.side, QUICK_SIDE))  # untimed: starts dask's rechunk machinery
        runs: dict[str, list[dict]] = {variant: [] for variant in VARIANTS}
        for round_ in range(args.rounds):
            for variant in VARIANTS:
                run = run_variant(client, variant, args.side)
                runs[variant].append(run)
                print(f"round {round_}: {variant}: {run['seconds']:.2f} s, peak per worker "
                      f"{[format_bytes(b) for b in run['peak_bytes']]}", flush=True)
        method = dask.config.get("array.rechunk.method", None) or "dask's choice (tasks or p2p)"
        chunk_size = dask.config.get("array.chunk-size")
    ours, theirs = runs["tvm_tailsplit"][0], runs["numpy (dask fft_wrap)"][0]
    agreement = float(np.linalg.norm(ours["corner"] - theirs["corner"]) / np.linalg.norm(theirs["corner"]))
    flop = 5 * args.side ** 2 * math.log2(args.side ** 2)
    rows = []
    for variant in VARIANTS:
        seconds = statistics.median(run["seconds"] for run in runs[variant])
        rows.append({"variant": variant, "seconds": seconds, "rounds": [run["seconds"] for run in runs[variant]],
                     "gflops": flop / seconds / 1e9 if variant != "no transform" else None,
                     "GBps": array_bytes / seconds / 1e9,
                     "peak_bytes_per_worker": max((run["peak_bytes"] for run in runs[variant]), key=max),
                     "base_bytes_per_worker": runs[variant][-1]["base_bytes"]})
    report = {"machine": info, "side": args.side, "array_bytes": array_bytes, "workers": WORKERS,
              "threads_per_worker": 1, "memory_limit_bytes": limit, "chunk_size": chunk_size,
              "rechunk_method": method, "rounds": args.rounds, "plan_compile_seconds": compile_seconds,
              "block_shapes": shapes, "corner_relative_difference": agreement, "rows": rows,
              "command": "python -m bench.bench_fft_dask " + " ".join(argv or [])}
    for row in rows:
        print(row, flush=True)
    print(f"tvm_tailsplit vs numpy corner {CORNER}x{CORNER}: relative difference {agreement:.1e}")
    json_path, md_path = cli.result_paths("fft_dask", args.quick)
    json_path.write_text(json.dumps(report, indent=2))
    md_path.write_text(markdown(report))
    print(f"wrote {json_path} and {md_path}")


def markdown(report: dict) -> str:
    from dask.utils import format_bytes

    info = report["machine"]
    lines = [
        "# 2-D FFT of a chunked array on a local Dask cluster",
        "",
        f"{info['cpu']}, {info['cores']} cores, {info['date']}; dask {info['dask']}, distributed "
        f"{info['distributed']}, numpy {info['numpy']}, TVM {info['tvm']}. Command: `{report['command'].strip()}`.",
        "",
        f"A {report['side']}x{report['side']} complex64 array ({format_bytes(report['array_bytes'])}) on "
        f"{report['workers']} worker processes x {report['threads_per_worker']} thread with a memory limit of "
        f"{format_bytes(report['memory_limit_bytes'])} each; chunks of `array.chunk-size` "
        f"{report['chunk_size']}; rechunk method: {report['rechunk_method']}. Rows, an all-to-all rechunk, "
        "columns; the output reduced to its sum. Wall seconds are the median of "
        f"{report['rounds']} round(s) (each round times the three side by side); GFLOP/s = 5·N·log2(N)/time "
        "(N = side²), GB/s = array bytes / time; peak = each worker's resident-set high-water mark during the "
        f"computation (base: its resident set before). Plans compiled in each worker before timing in "
        f"{report['plan_compile_seconds']:.1f} s. The two kernels' outputs (a {CORNER}x{CORNER} corner) differ by "
        f"{report['corner_relative_difference']:.1e} (relative L2).",
        "",
        "| per-chunk kernel | seconds | GFLOP/s | GB/s | peak per worker | base per worker |",
        "|---|---|---|---|---|---|",
    ]
    for row in report["rows"]:
        gflops = "-" if row["gflops"] is None else f"{row['gflops']:.2f}"
        peaks = " / ".join(format_bytes(b) for b in row["peak_bytes_per_worker"])
        bases = " / ".join(format_bytes(b) for b in row["base_bytes_per_worker"])
        lines.append(f"| {row['variant']} | {row['seconds']:.2f} | {gflops} | {row['GBps']:.3f} | {peaks} | {bases} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main(sys.argv[1:])
