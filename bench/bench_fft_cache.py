"""FFT plan cache benchmark: the first call of a plan in a fresh process, with a cold cache and with a warm one.

Each measurement is a fresh Python process that imports tvm_tailsplit (not timed), makes its input, then times
`fft.plan(n, batch=16, kind)` and the plan's first call (what a user waits for before the first result) and
checks the result against numpy; an n-D case (a shape `AxBxC`) times `fft.fftn(x)` or `fft.rfftn(x)` of one
array (its graph and the 1-D plans of its axes, each an entry). Cold: an empty cache directory (the plan is
compiled and its entry written); warm: the same directory afterwards (the plan is loaded). For each case and
round, the cold run and the warm run come one after the other; the table shows the medians over the rounds and
the ratio of the medians. The processes use TVM_NUM_THREADS threads (default 2, the issue's setting).

Second table: the plan of any batch (a symbolic batch, compiled once; also where the rule would not, to show why)
against the plan compiled for one batch,
on the same data, timed side by side in one process (`SYMBOLIC_ROUNDS` rounds; in each, each plan's best time
over calls lasting `SYMBOLIC_SECONDS`; the medians over the rounds and their ratio).

Run: `python -m bench.bench_fft_cache` (results: bench/results/fft_cache.json and .md) or `--quick` (fewer cases,
two rounds, results under bench/results/quick/).
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

from bench import cli
from bench.bench_fft import machine

ROOT = pathlib.Path(__file__).parent.parent
CASES = ("c2c:64", "c2c:1000", "c2c:4096", "c2c:1009", "c2c:65536", "r2c:4097", "c2c:16x24x30", "r2c:64x64x64")
QUICK_CASES = ("c2c:64", "c2c:1009", "c2c:4x6")
BATCH = 16
ROUNDS = 5
QUICK_ROUNDS = 2
# (n, batches) of the c2c plans compiled for any batch, timed against plans compiled for their batch
SYMBOLIC_CASES = ((64, (2, 3, 16, 64, 256)), (256, (2, 16, 256)), (1024, (2, 3, 16, 64, 256)),
                  (4096, (2, 5, 16, 64)), (65536, (2, 5, 16)))
QUICK_SYMBOLIC_CASES = ((64, (2, 16)),)
SYMBOLIC_ROUNDS = 9
SYMBOLIC_SECONDS = 0.03


def child(case: str) -> None:
    """In a fresh process: time plan() and the first call of `case` (or the first fftn / rfftn of an n-D case),
    print the times and the error as JSON."""
    import numpy as np

    from tvm_tailsplit import fft
    from tvm_tailsplit.fft import cache

    kind, size = case.split(":")
    shape = tuple(int(d) for d in size.split("x")) if "x" in size else (BATCH, int(size))
    rng = np.random.default_rng(0)
    if kind == "r2c":
        x = rng.standard_normal(shape).astype(np.float32)
        reference = np.fft.rfftn(x) if "x" in size else np.fft.rfft(x)
    else:
        x = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
        reference = np.fft.fftn(x) if "x" in size else np.fft.fft(x)
    started = time.perf_counter()
    if "x" in size:
        y = fft.rfftn(x) if kind == "r2c" else fft.fftn(x)
        planned = time.perf_counter()
    else:
        plan = fft.plan(shape[1], BATCH, kind)
        planned = time.perf_counter()
        y = plan(x)
    finished = time.perf_counter()
    error = float(np.linalg.norm(y - reference) / np.linalg.norm(reference))
    print(json.dumps({"plan_s": planned - started, "first_call_s": finished - started, "error": error,
                      "cache": cache.stats()}))


def symbolic_child(quick: bool) -> None:
    """Time the plan of any batch against the plan of one batch, side by side; print the rows as JSON."""
    import numpy as np
    import tvm

    from bench.bench_fft import best_time
    from tvm_tailsplit.fft import cache, planner
    from tvm_tailsplit.fft.spec import FFTSpec

    class OneBatchPlan(planner.Plan):
        """The plan compiled for its own batch only (the baseline)."""

        def _serves_any_batch(self) -> bool:
            return False

    class AnyBatchPlan(planner.Plan):
        """The plan compiled for any batch wherever its lane groups hold one transform, whatever its scratch (the
        rule's scratch limit, `tuning.ANY_BATCH_SCRATCH_BYTES`, is what the rows beyond it measure)."""

        def _serves_any_batch(self) -> bool:
            return self.lanes == 1 and self.batch > 1

    rounds = QUICK_ROUNDS if quick else SYMBOLIC_ROUNDS
    target = planner._resolve_target("llvm")
    rows = []
    for n, batches in QUICK_SYMBOLIC_CASES if quick else SYMBOLIC_CASES:
        spec = FFTSpec(n)
        for batch in batches:
            layouts = spec.layouts(batch)
            with cache.using_cache_dir(None):  # both compiled here, from the same code
                rule = planner.Plan(spec, batch, target, *layouts).symbolic_batch
                plans = {"any batch": AnyBatchPlan(spec, batch, target, *layouts),
                         "one batch": OneBatchPlan(spec, batch, target, *layouts)}
            if not plans["any batch"].symbolic_batch:
                raise RuntimeError(f"n={n} batch={batch}: the plan's lane groups hold several transforms")
            rng = np.random.default_rng(0)
            x = tvm.runtime.tensor(rng.standard_normal((batch, n, 2)).astype(np.float32))
            outputs = {name: tvm.runtime.empty((batch, n, 2), "float32") for name in plans}
            times: dict[str, list[float]] = {name: [] for name in plans}
            for _ in range(rounds):
                for name, plan in plans.items():
                    run = functools.partial(plan, x, outputs[name])
                    times[name].append(best_time(run, min_seconds=SYMBOLIC_SECONDS, repeats=2))
            if not np.array_equal(outputs["any batch"].numpy(), outputs["one batch"].numpy()):
                raise RuntimeError(f"n={n} batch={batch}: the two plans disagree")
            any_s, one_s = statistics.median(times["any batch"]), statistics.median(times["one batch"])
            rows.append({"n": n, "batch": batch, "any_batch_us": any_s * 1e6, "one_batch_us": one_s * 1e6,
                         "ratio": any_s / one_s, "rule_any_batch": rule})
    print(json.dumps(rows))


def measure(directory: str, *arguments: str):
    """The JSON printed by a fresh process running this module with `arguments`, with `directory` as its cache."""
    env = {**os.environ, "TVM_TAILSPLIT_CACHE_DIR": directory,
           "TVM_NUM_THREADS": os.environ.get("TVM_NUM_THREADS", "2"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env.pop("TVM_TAILSPLIT_CACHE", None)
    result = subprocess.run([sys.executable, "-m", "bench.bench_fft_cache", *arguments], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=1800, check=False)
    if result.returncode:
        raise RuntimeError(f"{arguments}: the child process failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = cli.parser("bench_fft_cache", __doc__)
    parser.add_argument("--child", metavar="KIND:N", help=argparse.SUPPRESS)
    parser.add_argument("--symbolic-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child)
        return
    if args.symbolic_child:
        symbolic_child(args.quick)
        return
    cases, rounds = (QUICK_CASES, QUICK_ROUNDS) if args.quick else (CASES, ROUNDS)
    info = machine()
    info["tvm_num_threads"] = os.environ.get("TVM_NUM_THREADS", "2")
    print(f"machine: {info}", flush=True)
    rows = []
    for case in cases:
        cold, warm = [], []
        for _ in range(rounds):
            with tempfile.TemporaryDirectory(prefix="fft-cache-bench-") as directory:
                first, second = measure(directory, "--child", case), measure(directory, "--child", case)
            entries = first["cache"]["stored"]
            if not entries or second["cache"]["loaded"] != entries or second["cache"]["stored"]:
                raise RuntimeError(f"{case}: expected a compile then a load, got {first['cache']}, {second['cache']}")
            if max(first["error"], second["error"]) > 1e-5:
                raise RuntimeError(f"{case}: wrong result (relative error {first['error']}, {second['error']})")
            cold.append(first["first_call_s"])
            warm.append(second["first_call_s"])
        row = {"case": case, "batch": 1 if "x" in case else BATCH, "entries": entries,
               "cold_s": statistics.median(cold), "warm_s": statistics.median(warm),
               "cold_rounds_s": cold, "warm_rounds_s": warm}
        row["ratio"] = row["cold_s"] / row["warm_s"]
        rows.append(row)
        print(f"{case}: cold {row['cold_s']:.3f} s, warm {row['warm_s'] * 1e3:.1f} ms, {row['ratio']:.0f}x",
              flush=True)
    with tempfile.TemporaryDirectory(prefix="fft-cache-bench-") as directory:
        symbolic = measure(directory, "--symbolic-child", *(["--quick"] if args.quick else []))
    for row in symbolic:
        print(f"n={row['n']} batch={row['batch']}: any batch {row['any_batch_us']:.1f} us, one batch "
              f"{row['one_batch_us']:.1f} us, ratio {row['ratio']:.3f}", flush=True)
    json_path, md_path = cli.result_paths("fft_cache", args.quick)
    json_path.write_text(json.dumps({"machine": info, "rounds": rounds, "rows": rows, "symbolic_batch": symbolic},
                                    indent=1) + "\n")
    lines = [
        "# FFT plan cache: first call in a fresh process, cold cache vs warm cache",
        "",
        f"Machine: {info['cpu']}, {info['cores']} cores, TVM_NUM_THREADS={info['tvm_num_threads']}; "
        f"{datetime.datetime.fromisoformat(info['date']):%Y-%m-%d %H:%M} UTC. `python -m bench.bench_fft_cache`"
        f"{' --quick' if args.quick else ''}: median of {rounds} rounds; each time is `fft.plan(n, batch={BATCH})` "
        "plus its first call (an n-D case `AxBxC`: the first `fft.fftn(x)` or `fft.rfftn(x)` of one array, whose "
        "graph and 1-D plans are the entries), in a fresh process (imports not timed). Cold: empty cache (compile, "
        "then the entries are written); warm: the entries are loaded.",
        "",
        "| case | batch | entries | cold (s) | warm (ms) | cold / warm |",
        "|---|---|---|---|---|---|",
    ]
    lines += [f"| {row['case']} | {row['batch']} | {row['entries']} | {row['cold_s']:.3f} | "
              f"{row['warm_s'] * 1e3:.1f} | {row['ratio']:.0f}x |" for row in rows]
    ratios = [row["ratio"] for row in symbolic if row["rule_any_batch"]]
    lines += [
        "",
        "## One plan for every batch (symbolic batch) against one plan per batch",
        "",
        f"c2c complex64 plans whose lane groups hold one transform, same input, timed side by side in one process "
        f"(TVM tensors): median over {QUICK_ROUNDS if args.quick else SYMBOLIC_ROUNDS} rounds of each plan's best "
        f"time over calls lasting {SYMBOLIC_SECONDS * 1e3:.0f} ms. `rule`: whether `plan()` compiles that case for "
        "any batch (`tuning.ANY_BATCH_SCRATCH_BYTES`: a scratch up to 512 KiB); the rows it does not are compiled "
        "for any batch here to show why. Ratios where the rule does: median "
        + (f"{statistics.median(ratios):.3f}, range {min(ratios):.3f}-{max(ratios):.3f}." if ratios else "(none)."),
        "",
        "| n | batch | rule | any batch (us) | this batch (us) | any / this |",
        "|---|---|---|---|---|---|",
    ]
    lines += [f"| {row['n']} | {row['batch']} | {'any batch' if row['rule_any_batch'] else 'this batch'} | "
              f"{row['any_batch_us']:.1f} | {row['one_batch_us']:.1f} | {row['ratio']:.3f} |" for row in symbolic]
    md_path.write_text("\n".join(lines) + "\n")
    print(f"wrote {json_path} and {md_path}")


if __name__ == "__main__":
    main()
