"""Row-pitch benchmark: whether the dense int8 VNNI kernel's speed depends on its tails or on the output's row pitch.

The tail benchmark's (d)/(e) for the dense layer compares TailSplit's kernel on an irregular shape with the same
kernel on the nearest divisible shape. Here that (d), TailSplit + `tensorize_marked`, compiles the same workload
(`split.workloads.dense_int8_vnni`: loops `j_0, i_0, i_1, j_1, r`, the register-blocked kernel: 8 x 16 tiles of
`C` accumulated in registers over the whole reduction, each row stored once) at shapes that differ in one thing
each: tails in M and K with N whole, a tail in N alone, N a multiple of the 16-wide tile but not of 64, and N a
power of two. Every kernel is timed in turn in each of `ROUNDS` rounds (`bench_tails.seconds_per_call`); the table
shows medians, multiply-accumulates per second, and `C`'s row pitch. A kernel that loads and stores its
accumulator tile of `C` in the loop over K (the earlier loop order `j_0, r_0, i, j_1, r_1`, one `vpdpbusd` per
16 x 4 tile) pays for a pitch that is not a multiple of 64 bytes (every other row's tile across two cache lines)
and falls off a cliff at a power-of-two pitch (one column tile of `C` in a few cache sets); this table shows
whether the kernel still does.

Run: `make bench`, or `python -m bench.bench_dense_pitch` (`--quick`: fewer shapes and rounds); results:
bench/results/dense_pitch.json and dense_pitch.md.
"""

from __future__ import annotations

import statistics

from bench import cli
from bench.bench_tails import arguments, compile_module, machine, seconds_per_call

ROUNDS = 7
QUICK_ROUNDS = 3
# (shape, what it isolates)
SHAPES = [
    (dict(m=127, n=1000, k=255), "the tail benchmark's shape: tails in M, N and K"),
    (dict(m=128, n=1008, k=255), "its divisible shape, the (e)"),
    (dict(m=127, n=1008, k=255), "tails in M and K, N whole"),
    (dict(m=128, n=1000, k=256), "a tail in N alone"),
    (dict(m=128, n=992, k=256), "N whole, one tile less"),
    (dict(m=128, n=1040, k=256), "N whole, two tiles more"),
    (dict(m=128, n=512, k=256), "N a power of two"),
    (dict(m=128, n=1024, k=256), "N a power of two"),
    (dict(m=128, n=2048, k=256), "N a power of two"),
]
QUICK_SHAPES = SHAPES[:4] + SHAPES[7:8]
CACHE_LINE_BYTES = 64


def run(quick: bool = False) -> dict:
    from bench import tail_variants as tv
    from tvm_tailsplit.split import workloads as wl

    wl.register_workload_intrinsics()
    target = wl.llvm_target()
    shapes = QUICK_SHAPES if quick else SHAPES
    rounds = QUICK_ROUNDS if quick else ROUNDS
    info = machine()
    print(f"machine: {info}", flush=True)
    built = []
    for shape, purpose in shapes:
        mod = tv.build_variant("dense_int8_vnni", "tailsplit", shape)  # the tail benchmark's (d)
        executable, _ = compile_module(mod, target)
        built.append((shape, purpose, executable, arguments(mod)))
    times: list[list[float]] = [[] for _ in built]
    for _ in range(rounds):
        for index, (_, _, executable, args) in enumerate(built):
            times[index].append(seconds_per_call(executable, args))
    rows = []
    for (shape, purpose, _, _), samples in zip(built, times, strict=True):
        seconds = statistics.median(samples)
        pitch = shape["n"] * 4  # C is int32
        rows.append({"shape": shape, "purpose": purpose, "seconds": seconds, "rounds": samples,
                     "gmac_per_second": shape["m"] * shape["n"] * shape["k"] / seconds / 1e9,
                     "c_row_pitch_bytes": pitch, "pitch_multiple_of_cache_line": pitch % CACHE_LINE_BYTES == 0})
        print(f"{shape}: {seconds * 1e6:.1f} us", flush=True)
    return {"machine": info, "rounds": rounds, "quick": quick, "rows": rows,
            "command": "make bench (python -m bench.run_all) or python -m bench.bench_dense_pitch"}


def markdown(report: dict) -> str:
    info = report["machine"]
    lines = [
        "# Dense int8 VNNI: tails or row pitch",
        "",
        f"{info['cpu']}, {info['cores']} cores, {info['date']}, TVM {info['tvm']}, target `{info['target']}`; "
        f"TailSplit + tensorize_marked on `split.workloads.dense_int8_vnni`, single-threaded, medians of "
        f"{report['rounds']} rounds (side by side). Command: `{report['command']}`.",
        "",
        "| M x N x K | what it isolates | µs | G MAC/s | C row pitch (bytes) | pitch a multiple of 64 B |",
        "|---|---|---|---|---|---|",
    ]
    for row in report["rows"]:
        shape = row["shape"]
        lines.append(f"| {shape['m']}x{shape['n']}x{shape['k']} | {row['purpose']} | {row['seconds'] * 1e6:.1f} | "
                     f"{row['gmac_per_second']:.1f} | {row['c_row_pitch_bytes']} | "
                     f"{'yes' if row['pitch_multiple_of_cache_line'] else 'no'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    args = cli.parser("bench_dense_pitch", (__doc__ or "").split("\n\n")[0]).parse_args(argv)
    report = run(quick=args.quick)
    cli.write_results("dense_pitch", args.quick, report, markdown(report))


if __name__ == "__main__":
    main()
