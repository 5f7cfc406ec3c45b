"""n-D FFT benchmark: `fft.ndim.plan_nd` (the Relax graph of 1-D plans) against chaining the 1-D plans and
against scipy.fft / numpy.fft, in one run.

Implementations of a case (complex64 c2c over every axis, last axis first; r2c over both axes of a 2-D case):
* `graph`: `plan_nd(...)(x, out)`, the compiled Relax VM graph;
* `nodes direct`: the graph's own PrimFuncs, each compiled alone with the 1-D plans' TIR pipeline and called one
  after the other from Python into preallocated intermediates (checks that the Relax build generates code as
  fast as the plans and measures the VM's overhead);
* `1-D plans`: the public `fft.plan` with strides (istride = B, idist = 1 and the same lanes), one call per
  (A, N, B) block of an axis that is neither the first nor the last (a Python loop: what a caller of the 1-D
  API does);
* `permute`: per axis a numpy transpose that makes it last, the contiguous 1-D plan, and the transpose back
  (the alternative design: a permute node per axis);
* scipy.fft.fftn with workers=1 and 2, numpy.fft.fftn.
Each implementation's result is checked against numpy first. The implementations are timed side by side in
`ROUNDS` rounds (each the best of 2 repetitions of calls lasting 50 ms or more, wall time) and the table shows
the median in milliseconds. TVM uses TVM_NUM_THREADS threads (default 2 here).

Run: `python -m bench.bench_fft_ndim` (writes bench/results/fft_ndim.json and .md) or `--quick` (one case, 2
rounds, under bench/results/quick/).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import time

import numpy as np

from bench.bench_fft import best_time, machine
from bench.cli import parser, result_paths

os.environ.setdefault("TVM_NUM_THREADS", "2")

CASES = [("c2c", (512, 512)), ("c2c", (64, 64, 64)), ("c2c", (100, 100, 100)), ("r2c", (512, 512))]
QUICK_CASES = [("c2c", (64, 64, 64))]
ROUNDS = 5
QUICK_ROUNDS = 2


def make_input(kind: str, shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(0)
    if kind == "r2c":
        return rng.standard_normal(shape).astype(np.float32)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def runners(kind: str, shape: tuple[int, ...], x: np.ndarray) -> dict:
    """name -> zero-argument callable returning the transform of x."""
    import scipy.fft
    import tvm

    from tvm_tailsplit import fft
    from tvm_tailsplit.fft import ndim, planner
    from tvm_tailsplit.fft.lowering import PAIR_BUFFERS_ATTR

    axes = tuple(range(len(shape)))[::-1] if kind == "c2c" else tuple(range(len(shape)))
    graph = ndim.plan_nd(shape, axes, kind)
    out = np.empty(graph.output_shape, np.complex64)
    result = {"graph": lambda: graph(x, out)}

    # the graph's PrimFuncs compiled one by one, called in sequence
    calls, tensors = [], []
    for node in graph.nodes:
        func = ndim._relaid_function(node)
        pairs = frozenset(str(name) for name in func.attrs[PAIR_BUFFERS_ATTR])
        executable = planner._compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}),
                                      node.plan.target, pairs)
        tensors.append(np.empty(node.buffer_shape("output"), np.float32))
        calls.append((executable["main"], node.plan._constant_tensors(), node.buffer_shape("input")))
    wrap = graph.nodes[0].plan._wrap

    def nodes_direct():
        source = x.view(np.float32)
        for (function, constants, in_shape), target in zip(calls, tensors, strict=True):
            function(wrap(source.reshape(in_shape)), *constants, wrap(target))
            source = target
        return tensors[-1].view(np.complex64).reshape(graph.output_shape)

    result["nodes direct"] = nodes_direct

    def one_d_plans():
        y = x
        for node in graph.nodes:
            a, n, b = node.view
            if b == 1:
                y = fft.plan(n, a, node.kind)(y.reshape(a, -1)).reshape(node.out_shape)
                continue
            one_d = fft.plan(n, b, node.kind, istride=b, idist=1, ostride=b, odist=1, lanes=node.plan.lanes)
            blocks = y.reshape(a, n, b)
            z = np.empty((a,) + node.out_shape[node.axis:node.axis + 1] + (b,), np.complex64)
            for block in range(a):
                one_d(blocks[block].T, z[block].T)
            y = z.reshape(node.out_shape)
        return y

    if kind == "c2c":
        result["1-D plans"] = one_d_plans

    def permute():
        y = x
        for node in graph.nodes:
            moved = np.ascontiguousarray(np.moveaxis(y, node.axis, -1))
            transformed = (fft.fft if node.kind == "c2c" else fft.rfft)(moved)
            y = np.ascontiguousarray(np.moveaxis(transformed, -1, node.axis))
        return y

    result["permute"] = permute
    scipy_fn = scipy.fft.fftn if kind == "c2c" else scipy.fft.rfftn
    for workers in (1, 2):
        result[f"scipy.fft w={workers}"] = lambda w=workers: scipy_fn(x, axes=axes, workers=w)
    result["numpy.fft"] = lambda: (np.fft.fftn if kind == "c2c" else np.fft.rfftn)(x, axes=axes)
    return result, graph


def measure(kind: str, shape: tuple[int, ...], rounds: int) -> dict:
    x = make_input(kind, shape)
    start = time.perf_counter()
    implementations, graph = runners(kind, shape, x)
    build_seconds = time.perf_counter() - start
    axes = tuple(range(len(shape)))
    reference = (np.fft.fftn if kind == "c2c" else np.fft.rfftn)(x.astype(np.float64 if kind == "r2c" else
                                                                          np.complex128), axes=axes)
    for name, run in implementations.items():
        error = np.linalg.norm(run() - reference) / np.linalg.norm(reference)
        if error > 1e-5:
            raise AssertionError(f"{name} on {kind} {shape}: relative error {error:.2e}")
    seconds: dict = {name: [] for name in implementations}
    for _ in range(rounds):
        for name, run in implementations.items():
            seconds[name].append(best_time(run, min_seconds=0.05, repeats=2))
    return {"milliseconds": {name: 1e3 * statistics.median(times) for name, times in seconds.items()},
            "build_seconds": build_seconds, "workspace_bytes": graph.workspace_bytes,
            "lanes": [node.plan.lanes for node in graph.nodes]}


def markdown(info: dict, rounds: int, results: dict) -> str:
    """The results table, under the machine and the date of the run (`bench_fft.machine()`'s `info`)."""
    names = list(next(iter(results.values()))["milliseconds"])
    lines = [f"# n-D FFT: milliseconds per transform (median of {rounds} rounds, "
             f"TVM_NUM_THREADS={info['tvm_num_threads']})", "",
             f"{info['cpu']}, {info['cores']} cores, {info['date']}; numpy {info['numpy']}, scipy {info['scipy']}, "
             f"TVM {info['tvm']}. Command: `make bench (python -m bench.run_all) or python -m bench.bench_fft_ndim`.",
             "", "| case | " + " | ".join(names) + " | workspace bytes |", "|---" * (len(names) + 2) + "|"]
    for name, result in results.items():
        cells = [f"{result['milliseconds'][n]:.3f}" if n in result["milliseconds"] else "-" for n in names]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {result['workspace_bytes']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parser("bench_fft_ndim", __doc__.split("\n\n")[0]).parse_args(argv)
    cases = QUICK_CASES if args.quick else CASES
    rounds = QUICK_ROUNDS if args.quick else ROUNDS
    info = machine()
    print(f"machine: {info}", flush=True)
    results = {}
    for kind, shape in cases:
        name = f"{kind}:{'x'.join(map(str, shape))}"
        results[name] = measure(kind, shape, rounds)
        print(name, {k: round(v, 3) for k, v in results[name]["milliseconds"].items()}, flush=True)
    json_path, md_path = result_paths("fft_ndim", args.quick)
    json_path.write_text(json.dumps({"machine": info, "date": info["date"], "tvm_num_threads": info["tvm_num_threads"],
                                     "rounds": rounds, "cases": results}, indent=1))
    md_path.write_text(markdown(info, rounds, results))
    print(f"results: {json_path}, {md_path}")
    return 0 if all(math.isfinite(v) for r in results.values() for v in r["milliseconds"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
