"""Tail benchmark: TailSplit + tensorize against what TVM offers for tiles that do not divide the shape.

For every workload of `tvm_tailsplit.split.workloads` and shape (none a multiple of the tile), five variants of the same
tiling are compiled for this machine's CPU (`llvm_target()`: AVX-512, VNNI) and timed side by side:

- (a) `guarded`: TVM's default — the tiling with its `T.where` guards, inner loop vectorized where
  `sch.vectorize` accepts it (a loop a guard depends on is refused and left to LLVM), no tensorize;
- (b) `pad_einsum`: `sch.pad_einsum` to whole tiles (padded copies in and out), then tensorize;
- (c) `loop_partition`: (a) with `pragma_loop_partition_hint` on the tile loops (TVM's LoopPartition);
- (d) `tailsplit`: TailSplit + `tensorize_marked` (main tiles: the intrinsic; tails: its tail forms); for the fp32
  matmul the kernel packs each 16-column panel of B into whole 64-byte rows first (GEMM panel packing) where the
  rule `workloads.MATMUL_PACK_MIN_ROW_TILES` says so (M > 16), and reads B in place for a thinner M;
- (e) `divisible`: the tensorized kernel on the nearest shape divisible by the tile, its time multiplied by
  `useful_work` (points of the shape / points of the divisible shape); the same kernel as (d), panel packing
  included.

For the element-wise op two more kernels are timed with them: `flat`, the same multiply as one flat 16-lane loop
(no tiling, no guard), which shows what the guards cost (a); and `guarded_unvectorized`, (a) without
`sch.vectorize` (the only workload whose lane loop TVM lets `sch.vectorize` take: its guard is on `h`).

In each of `ROUNDS` rounds every variant is timed in turn (`time_evaluator`, repetitions lasting >= 40 ms); the
tables show medians over the rounds. Kernels are single-threaded (no parallel loops), for every variant alike.
Also per variant: compile time (`tvm.compile` + JIT), TIR lines (the scheduled module), object code bytes
(`write_to_file` of the llvm module) and, for the marked modules, issued instructions
(`analysis.instruction_count`). A second table compares the full split, the partial split and full unrolling
(prior art: the marked region's loops unrolled completely, TVM's LoopPartition on the tile loops) by lowered
TIR lines, object bytes and compile time. A last table times the fp32 matmul's (d) against numpy's matmul (its
BLAS, one thread, in a worker process: `bench/blas_worker.py`) on the benchmark's shapes and larger ones; another
times the matmul's (d) with B packed and with B read in place on thin and less thin M (what the packing rule
rests on).

Run: `make bench` (all benchmarks), `python -m bench.bench_tails` or `python -m bench.bench_tails --quick`
(fewer shapes and rounds, for development, written under bench/results/quick/); results: bench/results/tails.json
and tails.md.
"""

from __future__ import annotations

import contextlib
import datetime
import math
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from bench import cli

ROUNDS = 7
QUICK_ROUNDS = 3
SHAPES = {
    "dense_int8_vnni": [dict(m=127, n=1000, k=255), dict(m=64, n=250, k=130)],
    "matmul_fp32": [dict(m=127, n=255, k=129), dict(m=255, n=127, k=63)],
    "elementwise_nc1hwc0": [dict(n=2, c1=3, h=30, w=28, c0=16), dict(n=4, c1=8, h=30, w=56, c0=16)],
}
QUICK_SHAPES = {name: shapes[:1] for name, shapes in SHAPES.items()}
TARGETS = {"d/a": 1.5, "d/b": 1.0, "d/e": 1.15}


def machine() -> dict:
    model = platform.processor()
    with contextlib.suppress(OSError):
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    import tvm

    from tvm_tailsplit.split.workloads import llvm_target

    return {"cpu": model, "cores": os.cpu_count(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec="seconds"), "python": platform.python_version(), "numpy": np.__version__, "tvm": tvm.__version__,
        "target": str(llvm_target()), "tvm_num_threads": os.environ.get("TVM_NUM_THREADS", "unset")}


def object_bytes(executable) -> int:
    with tempfile.TemporaryDirectory(prefix="bench_tails_") as workdir:
        path = os.path.join(workdir, "kernel.o")
        executable.mod.write_to_file(path)
        return os.path.getsize(path)


def compile_module(mod, target) -> tuple:
    """(executable, seconds of tvm.compile + the JIT of the entry function)."""
    import tvm

    start = time.perf_counter()
    executable = tvm.compile(mod, target=target)
    executable["main"]
    return executable, time.perf_counter() - start


def compile_lowered(mod, target) -> tuple:
    """(executable, compile seconds, lines of TIR after TVM's lowering passes, just before the host/device split:
    unrolled loops expanded, loop partitions made, simplified)."""
    import tvm

    captured: list[int] = []

    @tvm.ir.instrument.pass_instrument
    class CaptureLowered:
        def run_before_pass(self, module, info):
            if info.name == "tirx.SplitHostDevice" and not captured:
                captured.append(len(module.script().splitlines()))

    with tvm.transform.PassContext(opt_level=3, instruments=[CaptureLowered()]):
        executable, seconds = compile_module(mod, target)
    return executable, seconds, captured[0]


def arguments(mod) -> list:
    import tvm

    rng = np.random.default_rng(0)
    args = []
    for param in mod["main"].params:
        shape = tuple(int(d) for d in param.shape)
        if param.dtype == "uint8":
            data = rng.integers(0, 256, size=shape).astype("uint8")
        elif param.dtype == "int8":
            data = rng.integers(-128, 128, size=shape).astype("int8")
        else:
            data = rng.uniform(-1, 1, size=shape).astype(param.dtype)
        args.append(tvm.runtime.tensor(data))
    return args


def seconds_per_call(executable, args) -> float:
    import tvm

    timer = executable.mod.time_evaluator("main", tvm.cpu(), number=1, repeat=3, min_repeat_ms=40)
    return min(timer(*args).results)


def timed_in_rounds(built: dict, rounds: int) -> dict:
    """Every ``(executable, args)`` of ``built`` timed once per round, in turn (side by side): its seconds per call
    in each round, by key."""
    times: dict = {key: [] for key in built}
    for _ in range(rounds):
        for key, (executable, args) in built.items():
            times[key].append(seconds_per_call(executable, args))
    return times


def measure_case(name: str, shape: dict, rounds: int, target) -> dict:
    """Every variant of one workload and shape: medians of side-by-side timings, code size, compile time."""
    import tvm

    from bench import tail_variants as tv
    from tvm_tailsplit.split import workloads as wl
    from tvm_tailsplit.split.conditions import loop_vars_in

    built = {}
    row: dict = {"workload": name, "shape": shape, "divisible_shape": tv.divisible_shape(name, shape),
                 "useful_work": tv.useful_work(name, shape), "variants": {}}

    def add(label: str, build, args_like=None) -> tuple:
        """Build (timed), compile and record the code size of one kernel; it is timed with the others."""
        start = time.perf_counter()
        mod = build()
        build_seconds = time.perf_counter() - start
        executable, compile_seconds = compile_module(mod, target)
        built[label] = (executable, arguments(args_like or mod))
        row["variants"][label] = {"build_seconds": build_seconds, "compile_seconds": compile_seconds,
                                  "tir_lines": len(mod.script().splitlines()),
                                  "object_bytes": object_bytes(executable)}
        return built[label]

    for variant in tv.VARIANTS:
        add(variant, lambda variant=variant: tv.build_variant(name, variant, shape))
    spec = wl.WORKLOADS[name]
    if spec.symbolic_axis:  # (d) with that extent symbolic: one kernel for every extent, run with this shape's
        from tvm_tailsplit import TailSplit, tensorize_marked

        symbolic = spec.build(**{**shape, spec.symbolic_axis: None})
        add(f"tailsplit, symbolic {spec.symbolic_axis.upper()}", lambda: tensorize_marked(TailSplit()(symbolic)),
            args_like=tv.build_variant(name, "tailsplit", shape))
    guarded = tv.build_variant(name, "guarded", shape)
    if any(loop.kind == tvm.tirx.ForKind.VECTORIZED for loop in loop_vars_in(guarded["main"].body)):
        # (a) without sch.vectorize, where TVM vectorized the lane loop (the element-wise op: its guard is on h)
        add("guarded_unvectorized", lambda: tv.build_variant(name, "guarded_unvectorized", shape))
    if name in FLAT:
        # the op with no tiling and no guard at all (see flat_elementwise)
        executable, args = add("flat", lambda: FLAT[name](shape))
        executable["main"](*args)
        np.testing.assert_array_equal(args[2].numpy(), args[0].numpy() * args[1].numpy())
    times = timed_in_rounds(built, rounds)
    for variant in built:
        seconds = statistics.median(times[variant])
        if variant == "divisible":
            seconds *= row["useful_work"]
        row["variants"][variant]["seconds"] = seconds
        row["variants"][variant]["rounds"] = times[variant]
    row["issued"] = issued_instructions(name, shape, row["divisible_shape"])
    seconds = {v: row["variants"][v]["seconds"] for v in built}
    # ratios are speedups of (d): time of the other variant over time of (d)
    row["ratios"] = {"d/a": seconds["guarded"] / seconds["tailsplit"],
                     "d/b": seconds["pad_einsum"] / seconds["tailsplit"],
                     "d/e": seconds["tailsplit"] / seconds["divisible"]}
    if "guarded_unvectorized" in seconds:
        row["ratios"]["d/a without vectorize"] = seconds["guarded_unvectorized"] / seconds["tailsplit"]
    row["targets_met"] = {"d/a": row["ratios"]["d/a"] >= TARGETS["d/a"],
                          "d/b": row["ratios"]["d/b"] >= TARGETS["d/b"],
                          "d/e": row["ratios"]["d/e"] <= TARGETS["d/e"]}
    return row


def flat_elementwise(shape: dict):
    """The element-wise multiply of ``shape`` as one flat loop over all its elements (the arrays are contiguous),
    16 lanes, unrolled by 4: no tiling and no guard, nothing but the loads, the multiply and the store, i.e. (a)
    without any tail cost. time(a) / time(flat) is what the guards cost (a): when it is about 1, the op runs at
    the speed of guard-free vector code and no tail handling can make it much faster."""
    from tvm import s_tir, te

    total = math.prod(shape.values())
    a = te.placeholder((total,), "float32", name="A")
    b = te.placeholder((total,), "float32", name="B")
    c = te.compute((total,), lambda i: a[i] * b[i], name="C")
    sch = s_tir.Schedule(te.create_prim_func([a, b, c]).with_attr("global_symbol", "main"))
    (loop,) = sch.get_loops(sch.get_sblock("C"))
    _, unrolled_loop, lanes = sch.split(loop, [None, 4, 16])
    sch.unroll(unrolled_loop)
    sch.vectorize(lanes)
    return sch.mod


# kernels timed beside the variants of one workload: the same op with no tiling and no guard
FLAT = {"elementwise_nc1hwc0": flat_elementwise}


def issued_instructions(name: str, shape: dict, divisible: dict) -> dict:
    """Issued instructions (``analysis.instruction_count``) of the marked module before and after TailSplit and of
    the divisible shape (``instruction_count`` enumerates the loops above each mark in Python)."""
    from tvm_tailsplit import TailSplit
    from tvm_tailsplit.split import analysis
    from tvm_tailsplit.split import workloads as wl

    marked = wl.WORKLOADS[name].build(**shape)
    return {"marked, before TailSplit": analysis.instruction_count(marked).issued,
            "after TailSplit": analysis.instruction_count(TailSplit()(marked)).issued,
            "divisible shape": analysis.instruction_count(wl.WORKLOADS[name].build(**divisible)).issued}


def unrolled(name: str, shape: dict):
    """Prior art: the guarded marked nest with every loop of the marked region unrolled completely (except a
    reduction loop no guard depends on, such as the matmul's whole-K loop) and the tile loops hinted for TVM's
    LoopPartition, so that lowering resolves each guard per unrolled instance."""
    import tvm
    import tvm_ffi
    from tvm import s_tir
    from tvm.s_tir import SBlockRealize

    from tvm_tailsplit import MARK_KEY
    from tvm_tailsplit.split import workloads as wl
    from tvm_tailsplit.split.rewrite import remove_marks

    sch = s_tir.Schedule(wl.WORKLOADS[name].build(**shape))
    block_name = wl.WORKLOADS[name].marked_block
    block = sch.get_sblock(block_name)
    guard_vars: set = set()
    reduction_vars: set = set()

    def collect(realize: SBlockRealize) -> None:
        if realize.block.name_hint != block_name:
            return
        tvm_ffi.structural_walk(realize.predicate, (tvm.ir.Var, lambda var: guard_vars.add(var.name)))
        for iter_var, value in zip(realize.block.iter_vars, realize.iter_values, strict=True):
            if iter_var.iter_type == tvm.tirx.IterVar.CommReduce:
                tvm_ffi.structural_walk(value, (tvm.ir.Var, lambda var: reduction_vars.add(var.name)))

    tvm_ffi.structural_walk(sch.mod["main"].body, (SBlockRealize, collect))
    loops = sch.get_loops(block)
    marked = next(i for i, loop in enumerate(loops) if MARK_KEY in sch.get(loop).annotations)
    for loop in loops[:marked]:
        sch.annotate(loop, "pragma_loop_partition_hint", 1)
    for loop in loops[marked:]:
        name_of_loop = sch.get(loop).loop_var.name
        if name_of_loop in guard_vars or name_of_loop not in reduction_vars:
            sch.unroll(loop)
    return remove_marks(sch.mod)


def measure_strategies(name: str, shape: dict, target) -> dict:
    """Full split, partial split and full unrolling: lowered TIR lines, object bytes, compile time."""
    from tvm_tailsplit import TailSplit, tensorize_marked
    from tvm_tailsplit.split import workloads as wl

    modules = {strategy: tensorize_marked(TailSplit(strategy=strategy)(wl.WORKLOADS[name].build(**shape)))
               for strategy in ("full", "partial")}
    modules["full unrolling"] = unrolled(name, shape)
    result = {}
    for strategy, mod in modules.items():
        executable, compile_seconds, lowered = compile_lowered(mod, target)
        result[strategy] = {"tir_lines": len(mod.script().splitlines()), "lowered_tir_lines": lowered,
                            "object_bytes": object_bytes(executable), "compile_seconds": compile_seconds}
    return result


TAIL_BREAKDOWN = {"no tail": dict(m=128, n=256, k=128), "K = 129 (K is not tiled)": dict(m=128, n=256, k=129),
                  "M tail": dict(m=127, n=256, k=128), "N tail": dict(m=128, n=255, k=128)}


def measure_tail_breakdown(rounds: int, target) -> dict:
    """The fp32 matmul with one kind of tail at a time, (d) and (b) side by side: which tail costs what. An N
    that is not a multiple of 16 also makes the row stride of C (N * 4 bytes) not a multiple of 64 bytes, so the
    main tiles' 16-float rows of C straddle cache lines in (d) but not in (b)'s padded copies ((d) reads B from
    its packed panels); the aligned (vmovaps) and unaligned (vmovups) vector moves of the object code are counted
    alongside."""

    from bench import tail_variants as tv

    built = {}
    for label, shape in TAIL_BREAKDOWN.items():
        for variant in ("tailsplit", "pad_einsum"):
            mod = tv.build_variant("matmul_fp32", variant, shape)
            executable, _ = compile_module(mod, target)
            built[(label, variant)] = (executable, arguments(mod))
    times = timed_in_rounds(built, rounds)
    result = {}
    for (label, variant), (executable, _) in built.items():
        asm = executable.mod.inspect_source("asm")
        moves = {op: sum(1 for line in asm.splitlines() if line.startswith(f"\t{op}\t")) for op in ("vmovaps",
                                                                                                     "vmovups")}
        result.setdefault(label, {"shape": TAIL_BREAKDOWN[label]})[variant] = {
            "seconds": statistics.median(times[(label, variant)]), **moves}
    return result


# the fp32 matmul's (d) against numpy's matmul (its BLAS): the benchmark's shapes, larger ones and thin M
BLAS_SHAPES = [dict(m=127, n=255, k=129), dict(m=255, n=127, k=63), dict(m=127, n=1000, k=1000),
               dict(m=1000, n=1000, k=1000), dict(m=16, n=4096, k=1024), dict(m=4, n=4096, k=1024)]
QUICK_BLAS_SHAPES = BLAS_SHAPES[:1]
# what numpy's BLAS libraries read for their thread count when they load
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS")


class NumpyMatmul:
    """numpy's fp32 matmul timed with one BLAS thread in a worker process (``bench/blas_worker.py``: the thread
    count of numpy's BLAS is fixed when it loads, and this process's numpy is loaded already). A context manager;
    ``blas`` names the library."""

    def __enter__(self) -> NumpyMatmul:
        env = {**os.environ, **dict.fromkeys(BLAS_THREAD_VARIABLES, "1")}
        self.process = subprocess.Popen([sys.executable, "-m", "bench.blas_worker"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, env=env,
                                        cwd=pathlib.Path(__file__).resolve().parents[1])
        self.blas = self.process.stdout.readline().strip()
        return self

    def seconds(self, shape: dict) -> float:
        self.process.stdin.write(f"{shape['m']} {shape['n']} {shape['k']}\n")
        self.process.stdin.flush()
        return float(self.process.stdout.readline())

    def __exit__(self, *exc_info) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)


def measure_against_blas(shapes: list[dict], rounds: int, target) -> dict:
    """The fp32 matmul's (d), TailSplit + tensorize_marked, and numpy's matmul on the same shapes, side by side in
    each round, both single-threaded."""
    from bench import tail_variants as tv

    built = []
    for shape in shapes:
        mod = tv.build_variant("matmul_fp32", "tailsplit", shape)
        executable, _ = compile_module(mod, target)
        built.append((executable, arguments(mod)))
    times = {"tailsplit": [[] for _ in shapes], "numpy": [[] for _ in shapes]}
    with NumpyMatmul() as numpy_matmul:
        for _ in range(rounds):
            for index, (shape, (executable, args)) in enumerate(zip(shapes, built, strict=True)):
                times["tailsplit"][index].append(seconds_per_call(executable, args))
                times["numpy"][index].append(numpy_matmul.seconds(shape))
    rows = [{"shape": shape, **{who: {"seconds": statistics.median(samples[index]), "rounds": samples[index]}
                                for who, samples in times.items()}} for index, shape in enumerate(shapes)]
    return {"blas": numpy_matmul.blas, "rows": rows}


# the fp32 matmul's panel packing against reading B in place, for thin and less thin M (MATMUL_PACK_MIN_ROW_TILES)
PACKING_SHAPES = [*(dict(m=m, n=4096, k=1024) for m in (1, 4, 8, 16, 17, 24, 32, 64)),
                  *(dict(m=m, n=1000, k=1000) for m in (1, 8, 16, 24, 32, 64))]
QUICK_PACKING_SHAPES = PACKING_SHAPES[3:5]  # M = 16 and 17: either side of the rule


def measure_packing(shapes: list[dict], rounds: int, target) -> dict:
    """The fp32 matmul's (d) with ``B`` packed per panel and read in place (``workloads.matmul_fp32(pack=...)``),
    side by side in each round, and which of the two the rule ``workloads.matmul_packs_panels`` picks."""
    from tvm_tailsplit import TailSplit, tensorize_marked
    from tvm_tailsplit.split import workloads as wl

    forms = {"packed": True, "in place": False}
    built = {}
    for index, shape in enumerate(shapes):
        for form, pack in forms.items():
            mod = tensorize_marked(TailSplit()(wl.matmul_fp32(**shape, pack=pack)))
            executable, _ = compile_module(mod, target)
            built[(index, form)] = (executable, arguments(mod))
    times = timed_in_rounds(built, rounds)
    return {"min_row_tiles": wl.MATMUL_PACK_MIN_ROW_TILES,
            "rows": [{"shape": shape, "rule_packs": wl.matmul_packs_panels(shape["m"]),
                      **{form: {"seconds": statistics.median(times[(index, form)])} for form in forms}}
                     for index, shape in enumerate(shapes)]}


def run(quick: bool = False) -> dict:
    from bench import tail_variants as tv
    from tvm_tailsplit.split import workloads as wl

    wl.register_workload_intrinsics()
    target = wl.llvm_target()
    shapes = QUICK_SHAPES if quick else SHAPES
    rounds = QUICK_ROUNDS if quick else ROUNDS
    info = machine()
    print(f"machine: {info}", flush=True)
    rows, strategies = [], []
    for name, cases in shapes.items():
        for shape in cases:
            row = measure_case(name, shape, rounds, target)
            rows.append(row)
            us = " ".join(f"{v}={row['variants'][v]['seconds'] * 1e6:.1f}us" for v in tv.VARIANTS)
            print(f"{name} {shape}: {us} ratios {row['ratios']}", flush=True)
            strategies.append({"workload": name, "shape": shape, **measure_strategies(name, shape, target)})
    breakdown = measure_tail_breakdown(rounds, target)
    blas = measure_against_blas(QUICK_BLAS_SHAPES if quick else BLAS_SHAPES, rounds, target)
    packing = measure_packing(QUICK_PACKING_SHAPES if quick else PACKING_SHAPES, rounds, target)
    return {"machine": info, "rounds": rounds, "quick": quick, "targets": TARGETS, "rows": rows,
            "strategies": strategies, "tail_breakdown": breakdown, "against_blas": blas, "packing": packing,
            "command": "make bench (python -m bench.run_all) or python -m bench.bench_tails"}


def shape_text(shape: dict) -> str:
    return "x".join(str(v) for v in shape.values())


def markdown(report: dict) -> str:
    from bench.tail_variants import VARIANTS

    info = report["machine"]
    lines = [
        "# Tail benchmark: TailSplit + tensorize against TVM's guarded, padded and partitioned schedules",
        "",
        f"{info['cpu']}, {info['cores']} cores, {info['date']}; TVM {info['tvm']}, target `{info['target']}`; "
        f"single-threaded kernels. Every time is the median of {report['rounds']} rounds timing the variants of a "
        f"case side by side{' (quick mode: fewer shapes and rounds)' if report['quick'] else ''}. Command: "
        f"`{report['command']}`.",
        "",
        "(a) guarded: TVM's default tiling with guards, inner loop vectorized where TVM accepts it; (b) pad_einsum + "
        "tensorize; (c) (a) + LoopPartition hints; (d) TailSplit + tensorize_marked (fp32 matmul: B packed per "
        "16-column panel where M > 16, read in place below: the packing table); (e) the same tensorized kernel on "
        "the nearest divisible shape, time x useful work. "
        "Ratios: d/a = time(a)/time(d) (target >= "
        f"{report['targets']['d/a']}), d/b = time(b)/time(d) (target >= {report['targets']['d/b']}), "
        f"d/e = time(d)/time(e) (target <= {report['targets']['d/e']}).",
        "",
        "| workload | shape | " + " | ".join(f"{v} us" for v in VARIANTS) + " | d/a | d/b | d/e | targets met |",
        "|" + "---|" * (len(VARIANTS) + 6),
    ]
    for row in report["rows"]:
        times = " | ".join(f"{row['variants'][v]['seconds'] * 1e6:.1f}" for v in VARIANTS)
        ratios = " | ".join(f"{row['ratios'][r]:.2f}" for r in ("d/a", "d/b", "d/e"))
        met = ", ".join(f"{r} {'yes' if ok else 'NO'}" for r, ok in row["targets_met"].items())
        lines.append(f"| {row['workload']} | {shape_text(row['shape'])} | {times} | {ratios} | {met} |")
    symbolic = [row for row in report["rows"] if "tailsplit, symbolic M" in row["variants"]]
    if symbolic:
        lines += ["", "(d) with M symbolic (one compiled function for every M, run with the shape's M) against (d) "
                  "with static M:",
                  "", "| workload | shape | tailsplit us | tailsplit, symbolic M us | symbolic / static |",
                  "|---|---|---|---|---|"]
        for row in symbolic:
            static, dynamic = (row["variants"][v]["seconds"] for v in ("tailsplit", "tailsplit, symbolic M"))
            lines.append(f"| {row['workload']} | {shape_text(row['shape'])} | {static * 1e6:.1f} | "
                         f"{dynamic * 1e6:.1f} | {dynamic / static:.2f} |")
    blas = report["against_blas"]
    lines += ["", f"The fp32 matmul's (d) against numpy's matmul (`A @ B`, BLAS: {blas['blas']}, one thread, "
              "timed side by side in a worker process):", "",
              "| shape | tailsplit us | tailsplit GFLOP/s | numpy us | numpy GFLOP/s | numpy / tailsplit |",
              "|---|---|---|---|---|---|"]
    for entry in blas["rows"]:
        flops = 2 * math.prod(entry["shape"].values())
        ours, theirs = entry["tailsplit"]["seconds"], entry["numpy"]["seconds"]
        lines.append(f"| {shape_text(entry['shape'])} | {ours * 1e6:.1f} | {flops / ours / 1e9:.0f} | "
                     f"{theirs * 1e6:.1f} | {flops / theirs / 1e9:.0f} | {theirs / ours:.2f} |")
    flat_rows = [row for row in report["rows"] if "flat" in row["variants"]]
    if flat_rows:
        lines += ["", "What the guards cost (a) on the element-wise op: the same multiply as one flat 16-lane loop "
                  "over all elements (no tiling, no guard). time(a) / time(flat) about 1 means (a) already runs at "
                  "the speed of guard-free vector code, so no tail handling can be much faster than (a). Its guard "
                  "is on h, above the lane loop, so sch.vectorize accepts the lane loop of (a) (the dense layer's "
                  "and the matmul's lane loops carry a guard: TVM refuses them). (a) without sch.vectorize is what "
                  "TVM compiles when the user does not vectorize by hand:", "",
                  "| workload | shape | guarded us | guarded without vectorize us | tailsplit us | flat us | "
                  "GB/s of the flat loop | time(a) / time(flat) | d/a without vectorize |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for row in flat_rows:
            guarded, unvectorized, tailsplit, flat = (
                row["variants"][v]["seconds"] for v in ("guarded", "guarded_unvectorized", "tailsplit", "flat"))
            moved = 3 * 4 * math.prod(row["shape"].values())  # two float32 inputs read, one output written
            lines.append(f"| {row['workload']} | {shape_text(row['shape'])} | {guarded * 1e6:.1f} | "
                         f"{unvectorized * 1e6:.1f} | {tailsplit * 1e6:.1f} | {flat * 1e6:.1f} | "
                         f"{moved / flat / 1e9:.1f} | {guarded / flat:.2f} | {unvectorized / tailsplit:.1f} |")
    lines += ["", "Code size and compile time per variant (TIR lines of the scheduled module / object bytes / "
              "compile seconds), and issued instructions of the marked module:", "",
              "| workload | shape | " + " | ".join(VARIANTS) + " | issued before / after TailSplit / divisible |",
              "|" + "---|" * (len(VARIANTS) + 3)]
    for row in report["rows"]:
        cells = " | ".join(f"{row['variants'][v]['tir_lines']} / {row['variants'][v]['object_bytes']} / "
                           f"{row['variants'][v]['compile_seconds']:.2f}" for v in VARIANTS)
        issued = " / ".join(str(v) for v in row["issued"].values())
        lines.append(f"| {row['workload']} | {shape_text(row['shape'])} | {cells} | {issued} |")
    lines += ["", "Full split, partial split and full unrolling (TIR lines scheduled / lowered, object bytes, compile "
              "seconds):", "", "| workload | shape | full split | partial split | full unrolling |",
              "|---|---|---|---|---|"]
    for entry in report["strategies"]:
        cells = " | ".join(f"{entry[s]['tir_lines']} / {entry[s]['lowered_tir_lines']} / {entry[s]['object_bytes']}"
                           f" / {entry[s]['compile_seconds']:.2f}" for s in ("full", "partial", "full unrolling"))
        lines.append(f"| {entry['workload']} | {shape_text(entry['shape'])} | {cells} |")
    lines += ["", "Which tail costs what: fp32 matmul with one kind of tail at a time (us, and the aligned / unaligned "
              "vector moves in the object code):", "", "| case | shape | tailsplit us | pad_einsum us | tailsplit "
              "vmovaps / vmovups | pad_einsum vmovaps / vmovups |", "|---|---|---|---|---|---|"]
    for label, entry in report["tail_breakdown"].items():
        d, b = entry["tailsplit"], entry["pad_einsum"]
        lines.append(f"| {label} | {shape_text(entry['shape'])} | {d['seconds'] * 1e6:.1f} | {b['seconds'] * 1e6:.1f} "
                     f"| {d['vmovaps']} / {d['vmovups']} | {b['vmovaps']} / {b['vmovups']} |")
    packing = report["packing"]
    lines += ["", f"The fp32 matmul's panel packing: (d) with `B` packed per 16-column panel and read in place, side "
              f"by side (the rule `workloads.matmul_packs_panels`: pack when at least {packing['min_row_tiles']} "
              "8-row tiles read each panel):", "", "| shape | packed us | in place us | packed / in place | "
              "rule | rule's choice is the faster |", "|---|---|---|---|---|---|"]
    for row in packing["rows"]:
        packed, in_place = row["packed"]["seconds"], row["in place"]["seconds"]
        faster = (packed <= in_place) == row["rule_packs"]
        lines.append(f"| {shape_text(row['shape'])} | {packed * 1e6:.1f} | {in_place * 1e6:.1f} | "
                     f"{packed / in_place:.2f} | {'packed' if row['rule_packs'] else 'in place'} | "
                     f"{'yes' if faster else 'no'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    args = cli.parser("bench_tails", (__doc__ or "").split("\n\n")[0]).parse_args(argv)
    report = run(quick=args.quick)
    cli.write_results("tails", args.quick, report, markdown(report))


if __name__ == "__main__":
    main()
