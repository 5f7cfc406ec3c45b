"""FFT consumer fusion benchmark: a TE graph's element-wise consumer computed in the stores of the FFT's last pass
(`fft.fuse_consumers`) against the same graph with the consumer as its own loop nest, on one thread (llvm).

Each case is the power spectrum `|FFT(x)|^2` of `batch` complex64 signals of length n (8 MiB of input, a batch
beyond the L2 cache), as a TE graph: `te_fft(x)`, then `P[b, k] = Y[b, k, 0]^2 + Y[b, k, 1]^2`.

* fused: `fft.fuse_consumers` puts the power spectrum in the stores of the last pass (no intermediate spectrum);
* unfused: the same graph with the consumer a loop nest of its own (fused loops, vectorized 16 wide), reading the
  spectrum back from memory;
* numpy: `np.abs(np.fft.fft(x)) ** 2` (pocketfft, one thread), the reference the outputs are checked against
  (relative L2 error below 1e-5).

Both graphs are compiled with the pipeline of `plan()` (`fft.lowering.register_pipeline`, the complex buffers
named). Every implementation runs in one child process with TVM_NUM_THREADS=1 on its CPU time
(`time.process_time`); in each of `ROUNDS` rounds every implementation is timed in turn (best of 2 repetitions of
calls lasting 50 ms or more, `bench_fft.side_by_side`), and the table shows the median over the rounds.

Run: `python -m bench.bench_fft_fusion` (all cases) or `--quick`; results in bench/results/fft_fusion.json and .md
(bench/results/quick/ for a quick run).
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

POINTS = 1 << 20  # complex64 points per case: 8 MiB of input
CASES = [64, 1000, 1024, 4096]  # n; batch = POINTS // n
ROUNDS = 7
QUICK_CASES = [1024]
QUICK_ROUNDS = 3
NAMES = ("fused", "unfused", "numpy")


def power_spectrum_graph(n: int, batch: int, fused: bool):
    """The compiled TE graph |te_fft(x)|^2 (the consumer fused into the last pass, or its own vectorized loop nest)
    and its constants."""
    import tvm
    from tvm import s_tir, te

    from tvm_tailsplit import fft

    x = te.placeholder((batch, n, 2), "float32", name="x")
    y = fft.te_fft(x)
    power = te.compute(y.shape[:-1], lambda b, k: y[b, k, 0] * y[b, k, 0] + y[b, k, 1] * y[b, k, 1], name="power")
    constants = fft.te_fft_constants(power)
    func = te.create_prim_func([x, *[c for c, _ in constants], power]).with_attr("global_symbol", "main")
    if fused:
        report: list = []
        func = fft.fuse_consumers(func, report)
        if "fused into the stores of the last pass" not in "".join(report):
            raise AssertionError(f"n = {n}: the power spectrum was not fused: {report}")
    else:
        sch = s_tir.Schedule(func)
        _, lanes = sch.split(sch.fuse(*sch.get_loops(sch.get_sblock("power"))), [None, 16])
        sch.vectorize(lanes)
        func = sch.mod["main"]
    pipeline = fft.lowering.register_pipeline(frozenset(["x", y.op.name]))
    with tvm.transform.PassContext(opt_level=3, config={"tirx.disable_cse_tir": True}):
        executable = tvm.compile(tvm.IRModule({"main": func}), target="llvm", tir_pipeline=pipeline)
    return executable["main"], constants


def child(quick: bool) -> None:
    """Time every case on this process's one thread and print the rows as JSON."""
    import tvm

    rows = []
    for n in QUICK_CASES if quick else CASES:
        batch = POINTS // n
        rng = np.random.default_rng(0)
        x = rng.standard_normal((batch, n, 2)).astype(np.float32)
        signals = x.view(np.complex64)[..., 0]
        started = time.perf_counter()
        calls, results = {}, {}
        for name in NAMES[:2]:
            function, constants = power_spectrum_graph(n, batch, name == "fused")
            arguments = [tvm.runtime.tensor(x), *[tvm.runtime.tensor(v) for _, v in constants],
                         tvm.runtime.empty((batch, n), "float32")]
            calls[name] = lambda function=function, arguments=arguments: function(*arguments)
            calls[name]()
            results[name] = arguments[-1].numpy()
        build_s = time.perf_counter() - started
        calls["numpy"] = lambda signals=signals: np.abs(np.fft.fft(signals)) ** 2
        reference = np.abs(np.fft.fft(signals.astype(np.complex128))) ** 2
        results["numpy"] = calls["numpy"]()
        errors = {name: float(np.linalg.norm(result - reference) / np.linalg.norm(reference))
                  for name, result in results.items()}
        if max(errors.values()) > 1e-5:
            raise RuntimeError(f"n = {n}: the implementations disagree with numpy: {errors}")
        timing = milliseconds(side_by_side(calls, QUICK_ROUNDS if quick else ROUNDS, clock=time.process_time))
        rows.append({"n": n, "batch": batch, "build_s": build_s, **timing, "errors": errors})
        print(f"n {n} batch {batch}: " + ", ".join(f"{name} {ms:.2f} ms" for name, ms in timing["ms"].items()),
              file=sys.stderr, flush=True)
    print(json.dumps(rows))


def markdown(info: dict, rows: list[dict], rounds: int, quick: bool) -> str:
    lines = [
        "# FFT consumer fusion: |FFT(x)|^2 as a TE graph, the consumer fused into the last pass or not",
        "",
        f"Machine: {info['cpu']}, {info['cores']} cores; {datetime.datetime.fromisoformat(info['date']):%Y-%m-%d %H:%M}"
        f" UTC; numpy {info['numpy']}, TVM {info['tvm']}. "
        f"`python -m bench.bench_fft_fusion{' --quick' if quick else ''}`: one thread (TVM_NUM_THREADS=1), CPU time "
        f"(`time.process_time`), median of {rounds} rounds of side-by-side timings (best of 2 repetitions of calls "
        f"lasting >= 50 ms). complex64 input, batch = {POINTS} // n (8 MiB). fused: `fft.fuse_consumers` "
        "computes the power spectrum in the stores of the FFT's last pass; unfused: the same TE graph with the "
        "power spectrum its own loop nest (vectorized); numpy: `np.abs(np.fft.fft(x)) ** 2`. Times in ms per call "
        "of the whole batch; the ratios are the other implementation's time over the fused graph's (> 1: fusion is "
        "faster).",
        "",
        "| n | batch | fused | unfused | numpy | unfused / fused | numpy / fused |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        ms = row["ms"]
        lines.append(f"| {row['n']} | {row['batch']} | " + " | ".join(f"{ms[name]:.2f}" for name in NAMES) + " | "
                     + " | ".join(f"{ms[name] / ms['fused']:.2f}x" for name in NAMES[1:]) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = cli.parser("bench_fft_fusion", __doc__.split("\n\n")[0])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.quick)
        return
    rows = cli.single_threaded_child("bench_fft_fusion", args.quick)
    info = {**machine(), "tvm_num_threads": "1"}
    rounds = QUICK_ROUNDS if args.quick else ROUNDS
    report = {"machine": info, "rounds": rounds, "rows": rows}
    cli.write_results("fft_fusion", args.quick, report, markdown(info, rows, rounds, args.quick))
    print(markdown(info, rows, rounds, args.quick))


if __name__ == "__main__":
    main()
