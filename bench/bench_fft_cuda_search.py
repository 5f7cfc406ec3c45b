"""CUDA FFT plan search on the GPU: the variants the rules of `tuning` did not choose, timed on the device.

The CUDA rules of ``tvm_tailsplit.fft.tuning`` (threads per block, transforms per block, input staging, kernels
over columns, the breakdown) were set without a GPU. This benchmark asks the device which of them to change. For
each row of ``bench_fft_cuda`` in ``SEARCH_ROWS`` (ordered by generated / cuFFT in the H100 run of 2026-11-25, the
rows furthest from their targets first, so that a run stopped by its budget has the ones that matter), in one
process with no plan cache and no wisdom (every search times afresh):

1. ``fft.plan(n, batch, kind, target=<this GPU's arch>, effort=...)`` ("measure", or "patient" with
   ``--patient``) times the variants of ``fft.search`` on the device: every single-knob change of the estimate
   variant side by side (``search.single_changes``), then the winners' changes combined, the winner kept only when
   confirmed against the estimate in paired rounds;
2. the search's winner, the estimate plan and cuFFT (torch.fft and cupy.fft, ``bench_fft_cuda.cufft_runners``) are
   then timed side by side as ``bench_fft_cuda`` times its rows (``gpu.median_seconds``), and the winner's output is
   checked against cuFFT (``bench_fft_cuda.check_row``).

The table gives per row the estimate's and the winner's µs, the winner's changes (``search.label``), winner /
estimate and both against cuFFT; below it, every variant of each row with the time the search measured. A winner
that beats the estimate on several rows is the evidence for changing a rule; this file is what such a change
cites. Rows are written as they finish; ``--seconds`` stops starting rows once that budget is spent
(``gpu_session.sh fft`` gives it what the table leaves of the part).

``--dry-run`` needs no GPU: it builds, for ``--arch``, every single-knob variant the search would time for each row
(TVM's CUDA source compiled by nvcc) and records which compile, their kernels, registers and spills, so a GPU
session does not spend its minutes on variants that fail to build.

Run: ``python -m bench.bench_fft_cuda_search [--quick] [--patient] [--seconds S] [--rows ROW ...]``; results:
bench/results/fft_cuda_search.json and .md (quick: ``bench_fft_cuda``'s quick rows, under bench/results/quick/);
``--dry-run``: fft_cuda_search_dry_run.json and .md. Without a GPU, torch or cupy it says so and writes nothing.
"""

from __future__ import annotations

import sys
import time

from bench import bench_fft_cuda, gpu

# bench_fft_cuda's rows by their generated / cuFFT time on the H100 (2026-11-25), the largest first
SEARCH_ROWS = ("r2c:1024", "c2c:16384", "c2c:1048576", "c2c:262144", "c2c:65536:complex128", "c2c:65536",
               "r2c:4096", "c2c:4096", "c2c:64", "c2c:256", "c2c:16", "c2c:1000", "c2c:1024", "c2c:12000",
               "c2c:17", "c2c:1009", "c2c:1024:complex128", "c2r:4096", "c2r:1024", "c2c:4099", "c2c:97")
# the budget of a run (seconds): no row is started after it; a row takes 10-60 s (compiles and timings)
SEARCH_SECONDS = 600
EFFORT = "measure"


def rows_of(names: tuple[str, ...] | list[str]) -> list[tuple[str, int, str]]:
    """(kind, n, dtype) of ``bench_fft_cuda``'s rows named ``names``, in that order; an unknown name is a
    ValueError listing the known ones."""
    known = {bench_fft_cuda.row_name(*row): row for row in bench_fft_cuda.ROWS}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(f"unknown row(s) {unknown}; bench_fft_cuda's rows are {sorted(known)}")
    return [known[name] for name in names]


def selected_rows(quick: bool, names: list[str] | None) -> list[tuple[str, int, str]]:
    """The rows to search: ``names``, else ``SEARCH_ROWS`` (with ``quick``, those of ``bench_fft_cuda``'s quick
    rows)."""
    if names:
        return rows_of(names)
    return rows_of([name for name in SEARCH_ROWS if not quick or name in bench_fft_cuda.QUICK_ROWS])


def candidate_variants(plan) -> list[tuple[str, object]]:
    """(label, variant) of the estimate plan's variant and of every single-knob change a measure search times
    beside it (``search.single_changes``, the CUDA axes)."""
    from tvm_tailsplit.fft import search

    estimate = plan.variant
    changes = search.single_changes(estimate, plan.spec, estimate, plan.batch, True, 1, wide=False)
    labels = {estimate: "estimate"}  # a change to the estimate's own value is the estimate (timed once)
    for pairs in changes.values():
        for _, variant in pairs:
            labels.setdefault(variant, search.label(variant, estimate))
    return [(name, variant) for variant, name in labels.items()]


# ------------------------------------------------------------------------------------------------ dry run


def dry_run(quick: bool, arch: str, names: list[str] | None) -> dict:
    """Every variant the search would time for each row, built for ``arch`` (TVM source + nvcc), no GPU."""
    from tvm_tailsplit import fft

    rows = []
    for kind, n, dtype in selected_rows(quick, names):
        batch = bench_fft_cuda.batch_of(n)
        estimate = bench_fft_cuda.make_plan(kind, n, dtype, batch, arch)
        direction = "backward" if kind == "c2r" else "forward"
        variants = []
        for name, variant in candidate_variants(estimate):
            try:
                plan = fft.plan(n, batch, kind=kind, direction=direction, dtype=dtype,
                                target={"kind": "cuda", "arch": arch}, variant=variant)
            except Exception as error:  # noqa: BLE001 - a variant the planner refuses is recorded, not raised
                variants.append({"label": name, "plan_error": f"{type(error).__name__}: {error}"[:300]})
                continue
            built = gpu.nvcc_build(lambda plan=plan: plan.cuda_source(arch), arch)
            variants.append({"label": name, "plan_kernels": plan.kernels, "lanes": plan.lanes, **built})
            print(f"{bench_fft_cuda.row_name(kind, n, dtype)} {name}: {gpu.build_outcome(built)}", flush=True)
        rows.append({"row": bench_fft_cuda.row_name(kind, n, dtype), "batch": batch, "variants": variants})
    return {"arch": arch, "quick": quick, "date": gpu.now(), "rows": rows,
            "command": f"python -m bench.bench_fft_cuda_search --dry-run{' --quick' if quick else ''} --arch {arch}"}


def dry_run_markdown(report: dict) -> str:
    lines = [*gpu.dry_run_heading("CUDA FFT search variants", report),
             "Every single-knob variant of the estimate that `effort=\"measure\"` times for a row (`search."
             "single_changes`): planned, its CUDA source compiled by nvcc; registers: the largest of its kernels.", "",
             "| row | variant | kernels | lanes | compiled | registers | spill bytes | TVM s | nvcc s |",
             "|" + "---|" * 9]
    for row in report["rows"]:
        for variant in row["variants"]:
            if "plan_error" in variant:
                lines.append(f"| {row['row']} | {variant['label']} | - | - | no: {variant['plan_error']} | - | - | - "
                             "| - |")
                continue
            built = variant["compiled"]
            lines.append(f"| {row['row']} | {variant['label']} | {variant['plan_kernels']} | {variant['lanes']} | "
                         f"{'yes' if built else 'NO: ' + variant['error']} | "
                         f"{variant['registers'] if built else '-'} | {variant['spills'] if built else '-'} | "
                         f"{variant.get('tvm_seconds', 0):.1f} | {variant.get('nvcc_seconds', 0):.1f} |")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------ GPU run


def search_row(kind: str, n: int, dtype: str, rounds: int, arch: str, effort: str) -> dict:
    """One row: the search on the device, then its winner, the estimate and cuFFT timed side by side."""

    batch = bench_fft_cuda.batch_of(n)
    estimate = bench_fft_cuda.make_plan(kind, n, dtype, batch, arch)
    start = time.perf_counter()
    searched = bench_fft_cuda.make_plan(kind, n, dtype, batch, arch, effort=effort)
    search_seconds = time.perf_counter() - start
    report = searched.search
    x = bench_fft_cuda.random_input(kind, n, dtype, batch, seed=0)
    out = bench_fft_cuda.cufft(kind, n, x)
    x_tvm, out_tvm = bench_fft_cuda.tvm_view(x), bench_fft_cuda.tvm_view(out)
    runners = {"estimate": lambda: estimate(x_tvm, out_tvm)}
    if searched.variant != estimate.variant:
        runners["winner"] = lambda: searched(x_tvm, out_tvm)
    runners.update(bench_fft_cuda.cufft_runners(kind, n, x, out))
    seconds = gpu.median_seconds(runners, rounds)
    seconds.setdefault("winner", seconds["estimate"])
    cufft = bench_fft_cuda.cufft_seconds(seconds)
    row = {"row": bench_fft_cuda.row_name(kind, n, dtype), "kind": kind, "n": n, "dtype": dtype, "batch": batch,
           "effort": effort, "source": report.source, "winner": report.winner, "reason": report.reason,
           "confirmation": report.confirmation, "search_seconds": search_seconds,
           "estimate_variant": estimate.variant.to_dict(), "winner_variant": searched.variant.to_dict(),
           "candidates": [{"label": c.label, "us": None if c.seconds is None else c.seconds * 1e6, "note": c.note}
                          for c in report.candidates],
           "us": {name: s * 1e6 for name, s in seconds.items()},
           "winner/estimate": seconds["winner"] / seconds["estimate"],
           "estimate/cuFFT": seconds["estimate"] / cufft, "winner/cuFFT": seconds["winner"] / cufft}
    row.update(bench_fft_cuda.check_row(searched, kind, n, dtype, batch))
    return row


def run(quick: bool, effort: str, budget: float, names: list[str] | None) -> dict:
    from tvm_tailsplit import fft
    from tvm_tailsplit.fft import cache

    rounds = gpu.QUICK_ROUNDS if quick else gpu.ROUNDS
    arch = gpu.device_arch()
    info = gpu.gpu_machine()
    print(f"machine: {info}", flush=True)
    rows: list[dict] = []
    selected = selected_rows(quick, names)
    command = ("python -m bench.bench_fft_cuda_search" + (" --quick" if quick else "")
               + (" --patient" if effort == "patient" else "") + (f" --rows {' '.join(names)}" if names else ""))

    def report(complete: bool) -> dict:
        return {"machine": info, "rounds": rounds, "quick": quick, "effort": effort, "budget_seconds": budget,
                "rows": rows, "skipped": [bench_fft_cuda.row_name(*row) for row in selected[len(rows):]],
                "command": command, "complete": complete}

    started = time.perf_counter()
    fft.forget_wisdom()
    with cache.using_cache_dir(None):  # no wisdom read or written: every row is searched afresh
        for kind, n, dtype in selected:
            if time.perf_counter() - started > budget:
                print(f"budget of {budget:.0f} s spent: {len(selected) - len(rows)} row(s) not searched", flush=True)
                break
            row = search_row(kind, n, dtype, rounds, arch, effort)
            rows.append(row)
            print(f"{row['row']}: winner {row['winner']} ({row['source']}), estimate {row['us']['estimate']:.1f}us "
                  f"winner {row['us']['winner']:.1f}us cuFFT ratio {row['estimate/cuFFT']:.2f} -> "
                  f"{row['winner/cuFFT']:.2f}, search {row['search_seconds']:.0f} s, ok={row['ok']}", flush=True)
            partial = report(complete=False)  # written after each row: a stopped run keeps what it measured
            gpu.write_results("fft_cuda_search", quick, partial, markdown(partial))
    return report(complete=len(rows) == len(selected))


def markdown(report: dict) -> str:
    info = report["machine"]
    lines = [
        "# CUDA FFT plan search: variants of the rules timed on the GPU (µs, lower is better)", "",
        f"{gpu.machine_text(info, 'cupy', 'tvm')}. Rows of `bench_fft_cuda` (batches of "
        f"2^23 / n transforms on the device), each searched with `effort=\"{report['effort']}\"` (no wisdom, no plan "
        f"cache), then the search's winner, the estimate (the rules of `tuning`) and cuFFT (the faster of torch.fft "
        f"and cupy.fft) timed side by side, medians of {report['rounds']} rounds. ok (the winner's): "
        f"{bench_fft_cuda.OK_RULE}. Command: `{report['command']}`.", "",
        "| row | winner (changes from the estimate) | estimate µs | winner µs | winner/estimate | estimate/cuFFT | "
        "winner/cuFFT | confirmation | search s | ok |", "|" + "---|" * 10]
    for row in report["rows"]:
        us = row["us"]
        confirmation = "-" if row["confirmation"] is None else f"{row['confirmation']:.2f}"
        lines.append(f"| {row['row']} | {row['winner']} | {us['estimate']:.1f} | {us['winner']:.1f} | "
                     f"{row['winner/estimate']:.2f} | {row['estimate/cuFFT']:.2f} | {row['winner/cuFFT']:.2f} | "
                     f"{confirmation} | {row['search_seconds']:.0f} | {'yes' if row['ok'] else 'NO'} |")
    if report["skipped"]:
        lines += ["", f"Not searched (the budget of {report['budget_seconds']:.0f} s was spent, or the run stopped): "
                  + ", ".join(report["skipped"]) + "."]
    lines += ["", "Every variant each search timed (µs per call as the search measured it, fastest first):"]
    for row in report["rows"]:
        timed = sorted(row["candidates"], key=lambda c: (c["us"] is None, c["us"] or 0.0))
        lines += ["", f"- {row['row']}: " + "; ".join(
            c["label"] + " " + ("-" if c["us"] is None else f"{c['us']:.1f}") + (f" ({c['note']})" if c["note"] else "")
            for c in timed)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark with the options ``argv`` (None: none, the full run, as ``bench.run_all`` calls it)."""
    cli = gpu.parser("bench_fft_cuda_search", (__doc__ or "").split("\n\n")[0])
    cli.add_argument("--patient", action="store_true", help="search with effort=\"patient\" (wider, longer)")
    cli.add_argument("--seconds", type=float, default=SEARCH_SECONDS,
                     help=f"start no row after this many seconds (default {SEARCH_SECONDS})")
    cli.add_argument("--rows", nargs="+", metavar="ROW", help="rows of bench_fft_cuda to search, e.g. c2c:1024 "
                     "r2c:4096 c2c:65536:complex128 (default: SEARCH_ROWS)")
    args = cli.parse_args([] if argv is None else argv)
    if args.rows:
        try:
            rows_of(args.rows)  # an unknown row is refused before anything is built
        except ValueError as error:
            cli.error(str(error))
    effort = "patient" if args.patient else EFFORT
    gpu.dispatch("fft_cuda_search", args, dry_run=lambda: dry_run(args.quick, args.arch, args.rows),
                 dry_run_markdown=dry_run_markdown, modules=("torch", "cupy"),
                 run=lambda: run(args.quick, effort, args.seconds, args.rows), markdown=markdown)


if __name__ == "__main__":
    main(sys.argv[1:])
