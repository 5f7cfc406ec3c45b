"""The GPU benchmarks' markdown (bench_fft_cuda, bench_fft_cuda_search, bench_tails_cuda, bench_warpspec_cuda) on
synthetic reports of the shape their `run` returns, without a GPU: a report survives JSON (what
`gpu.write_results` writes), and every table row has as many cells as its table's header, so that a GPU run's
results render the first time."""

import json

import pytest

from bench import bench_fft_cuda, bench_fft_cuda_search, bench_tails_cuda, bench_warpspec_cuda
from tvm_tailsplit.split import mma_schedule as ms

MACHINE = {"cpu": "a CPU", "cores": 16, "date": "2026-11-25T00:00:00+00:00", "python": "3.12.3", "numpy": "2.5.2",
           "scipy": "1.16.0", "tvm": "0.27.0", "tvm_num_threads": "16", "gpu": "NVIDIA H100 80GB HBM3",
           "arch": "sm_90", "torch": "2.11.0", "cuda": "13.0", "cupy": "14.2.0"}


def cells(line: str) -> int:
    """The cells of a markdown table row."""
    return len(line.strip()[1:-1].split("|"))


def check_tables(text: str) -> list[list[str]]:
    """Every table of the markdown (its rows, the header first); each row has the header's cell count."""
    tables, current = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    for table in tables:
        header, rule, *rows = table
        assert cells(rule) == cells(header), table
        for row in rows:
            assert cells(row) == cells(header), (header, row)
    return tables


def render(module, report: dict) -> str:
    """The markdown of the report as the benchmark writes it, after checking that the report survives JSON."""
    assert json.loads(json.dumps(report)) == json.loads(json.dumps(report, default=str))
    return module.markdown(report)


def fft_report(sanitize: bool) -> dict:
    us = {"generated": 10.0, "torch.fft": 12.0, "cupy.fft": 8.0}  # cuFFT: the faster route, cupy's
    rows = [{"row": bench_fft_cuda.row_name(kind, n, dtype), "kind": kind, "n": n, "dtype": dtype,
             "batch": bench_fft_cuda.batch_of(n), "breakdown": "ct(4, 16)", "kernels": 1, "compile_seconds": 2.0,
             "us": us | {"limit": 8.0}, "gflops": {name: 1000.0 for name in us},
             "generated/torch.fft": 10 / 12, "generated/cupy.fft": 10 / 8, "generated/cuFFT": 10 / 8,
             "generated/limit": 10 / 8,
             "error_vs_cufft": 1e-7, "error_vs_float64": 2e-7, "cufft_error_vs_float64": 1e-7, "all_written": True,
             "ok": True} for kind, n, dtype in bench_fft_cuda.selected_rows(True)]
    convolution = {"row": "convolution:4096", "n": 4096, "taps": bench_fft_cuda.CONVOLUTION_TAPS, "batch": 2048,
                   "us": {"torch rfft*h irfft": 50.0, "generated r2c*h c2r": 40.0, "generated convolve (fused)": 30.0},
                   "errors_vs_torch": {"generated r2c*h c2r": 1e-7, "generated convolve (fused)": 2e-7}, "ok": True}
    consumer = {"row": "power spectrum:1024", "n": 1024, "batch": 8192,
                "us": {"torch fft abs square": 60.0, "te graph, power spectrum fused": 30.0,
                       "te graph, power spectrum a kernel": 40.0},
                "errors_vs_torch": {"te graph, power spectrum fused": 1e-7, "te graph, power spectrum a kernel": 1e-7},
                "ok": True}
    report = {"machine": MACHINE, "rounds": 5, "quick": True, "copy_bandwidth_GBps": 3000.0,
              "dram_bandwidth_GBps": 3000.0, "rows": rows, "convolution": convolution, "fused_consumer": consumer,
              "command": "python -m bench.bench_fft_cuda --quick"}
    if sanitize:
        report["sanitizer"] = {f"{label} {bench_fft_cuda.row_name(*spec[:3])} {tool}":
                               {"exit": 0, "summary": ["ERROR SUMMARY: 0 errors", "child: relative error 1e-07"]}
                               for label, spec in bench_fft_cuda.SANITIZE_PLANS.items()
                               for tool in bench_fft_cuda.SANITIZE_TOOLS}
        report["sanitizer"]["Bluestein c2c:4099 racecheck"] = {"exit": None, "summary": ["TimeoutExpired: ..."]}
    return report


@pytest.mark.parametrize("sanitize", [False, True])
def test_fft_cuda_markdown_renders_a_report_of_run(sanitize):
    report = fft_report(sanitize)
    text = render(bench_fft_cuda, report)
    tables = check_tables(text)
    assert len(tables[0]) == 2 + len(report["rows"]) and len(tables) == 3 + sanitize
    # gen/cuFFT against the faster of torch.fft (12 µs) and cupy.fft (8 µs)
    assert all(row.split("|")[9].strip() == "1.25" for row in tables[0][2:]), tables[0]
    assert "generated convolve (fused) | 30.0 | 2.0e-07" in text and "torch fft abs square | 60.0 | - |" in text


def search_row(name: str, winner: str | None) -> dict:
    """A row of bench_fft_cuda_search's `run`: a search whose winner is `winner` (None: the estimate)."""
    from tvm_tailsplit.fft.variants import estimate_variant

    kind, n, dtype = bench_fft_cuda_search.rows_of([name])[0]
    variant = estimate_variant(bench_fft_cuda.make_plan(kind, n, dtype, 4, "sm_90").spec, 4, None).to_dict()
    us = {"estimate": 20.0, "winner": 16.0 if winner else 20.0, "torch.fft": 30.0, "cupy.fft": 16.0}
    return {"row": name, "kind": kind, "n": n, "dtype": dtype, "batch": bench_fft_cuda.batch_of(n),
            "effort": "measure", "source": "timed", "winner": winner or "estimate", "reason": "the fastest",
            "confirmation": 0.8 if winner else None, "search_seconds": 12.0, "estimate_variant": variant,
            "winner_variant": variant,
            "candidates": [{"label": "estimate", "us": 20.5, "note": ""},
                           {"label": winner or "lanes=2", "us": 16.5, "note": ""},
                           {"label": "kernel_per_pass=True", "us": None, "note": "failed to compile"}],
            "us": us, "winner/estimate": us["winner"] / us["estimate"], "estimate/cuFFT": us["estimate"] / 16.0,
            "winner/cuFFT": us["winner"] / 16.0, "error_vs_cufft": 1e-7, "error_vs_float64": 2e-7,
            "cufft_error_vs_float64": 1e-7, "all_written": True, "ok": True}


@pytest.mark.parametrize("complete", [True, False])
def test_fft_cuda_search_markdown_renders_a_report_of_run(complete):
    rows = [search_row("r2c:1024", "cuda_threads=64, lanes=2"), search_row("c2c:16", None)]
    report = {"machine": MACHINE, "rounds": 5, "quick": False, "effort": "measure", "budget_seconds": 600.0,
              "rows": rows, "skipped": [] if complete else ["c2c:97"],
              "command": "python -m bench.bench_fft_cuda_search", "complete": complete}
    text = render(bench_fft_cuda_search, report)
    (table,) = check_tables(text)
    assert len(table) == 2 + len(rows)
    assert "| r2c:1024 | cuda_threads=64, lanes=2 | 20.0 | 16.0 | 0.80 | 1.25 | 1.00 |" in text
    assert "| c2c:16 | estimate | 20.0 | 20.0 | 1.00 | 1.25 | 1.25 | - |" in text
    assert "kernel_per_pass=True - (failed to compile)" in text
    assert ("Not searched" in text and "c2c:97" in text) == (not complete)


def tails_row(m: int, n: int, k: int, symbolic: bool, hopper: bool, tilings: bool) -> dict:
    columns = (*bench_tails_cuda.COLUMNS, *((bench_tails_cuda.HOPPER,) if hopper else ()))
    tiling = bench_tails_cuda.dispatched_tiling(m, n, k, 132) if symbolic else ms.choose_tiling(m, n, k, 132)
    row = {"shape": [m, n, k], "m_symbolic": symbolic, "tiling": bench_tails_cuda.tiling_record(tiling),
           "divisible_shape": list(bench_tails_cuda.divisible_shape(m, n, k, tiling)), "useful_work": 0.9,
           "errors": {c: 1e-6 for c in columns}, "all_written": {c: True for c in columns}, "cublas_output":
           "torch.float32", "us": {c: 100.0 for c in columns}, "tflops": {c: 50.0 for c in columns},
           "ratios": {"d/a": 2.0, "d/b": 1.1, "d/e": 1.0, "d/f": 1.5, "d/g": 0.9, **({"d/h": 0.5} if hopper else {})},
           "ok": True}
    if hopper:
        row["hopper_block_n"], row["hopper_tiling"] = 256, bench_tails_cuda.hopper_tiling_name(256)
    else:
        row["hopper_absent"] = bench_tails_cuda.hopper_unsupported(k, "sm_90") or "no sm_90 GPU"
    if tilings:
        sweep = {t.name(): {"us": 100.0, "tflops": 50.0, "ok": True, "error": 1e-6}
                 for t in bench_tails_cuda.sweep_tilings(None if symbolic else m, k)}
        row["sweep"], row["sweep_best"] = sweep, next(iter(sweep))
        if hopper:
            row["hopper_sweep"] = {bench_tails_cuda.hopper_tiling_name(w): {"us": 90.0, "tflops": 60.0, "ok": False,
                                                                            "error": 1.0}
                                   for w in bench_tails_cuda.HOPPER_BLOCK_N}
            row["hopper_sweep_best"] = None
    return row


@pytest.mark.parametrize("hopper", [True, False], ids=["sm_90", "sm_80"])
@pytest.mark.parametrize("tilings", [False, True], ids=["columns", "tilings"])
def test_tails_cuda_markdown_renders_a_report_of_run(hopper, tilings):
    rows = []
    for shape in bench_tails_cuda.cases(True):
        m, n, k = shape
        for m_value in bench_tails_cuda.QUICK_SYMBOLIC_MS if m is None else (m,):
            has_hopper = hopper and bench_tails_cuda.hopper_unsupported(k, "sm_90") is None
            rows.append(tails_row(m_value, n, k, m is None, has_hopper, tilings))
    report = {"machine": MACHINE | {"arch": "sm_90" if hopper else "sm_80"}, "sm_count": 132, "rounds": 5,
              "quick": True, "tilings": tilings, "hopper_absent": bench_tails_cuda.hopper_unsupported(
                  None, "sm_90" if hopper else "sm_80"), "rows": rows,
              "compile_seconds": {"127x255x129 guarded": 1.0}, "command": bench_tails_cuda.command(True, tilings)}
    text = render(bench_tails_cuda, report)
    tables = check_tables(text)
    assert len(tables[0]) == 2 + len(rows) and len(tables) == 1 + tilings
    assert ("no entry: K = 129" in text) == hopper and ("(h) hopper: absent" in text) != hopper


def test_warpspec_cuda_markdown_renders_a_report_of_run():
    columns, ratios = bench_warpspec_cuda.COLUMNS, bench_warpspec_cuda.RATIOS
    rows = [{"shape": list(shape), "errors": {c: 1e-6 for c in columns}, "all_written": {c: True for c in columns},
             "cublas_output": "torch.float32", "us": {c: 100.0 for c in columns}, "tflops": {c: 500.0 for c in columns},
             "ratios": {r: 1.0 for r in ratios}, "ok": True} for shape in bench_warpspec_cuda.SHAPES]
    report = {"machine": MACHINE, "sms": 132, "rounds": 7, "quick": False, "rows": rows,
              "compile_seconds": {"4096x4096x4096 dlight": 10.0}, "command": "python -m bench.bench_warpspec_cuda"}
    tables = check_tables(render(bench_warpspec_cuda, report))
    assert len(tables) == 1 and len(tables[0]) == 2 + len(rows)
