"""The GPU benchmarks (bench_fft_cuda, bench_fft_cuda_search, bench_tails_cuda, bench_warpspec_cuda): without a GPU
they say so and write nothing (also under `make bench`, which imports every benchmark: torch and cupy are imported
on use); `--dry-run --quick` builds their kernels with nvcc; the (a) kernel of the tail benchmark means the matmul;
on a GPU, `--quick` writes rows that pass their error checks."""

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tvm

from bench import bench_fft_cuda, bench_fft_cuda_search, bench_tails_cuda, bench_warpspec_cuda, cli
from tvm_tailsplit import cuda
from tvm_tailsplit.split import mma_schedule as ms
from tvm_tailsplit.testing import cuda_schedule_for_llvm, run_guarded

ROOT = pathlib.Path(__file__).parent.parent
BENCHMARKS = {"fft_cuda": bench_fft_cuda, "fft_cuda_search": bench_fft_cuda_search, "tails_cuda": bench_tails_cuda,
              "warpspec_cuda": bench_warpspec_cuda}


@pytest.fixture
def results(monkeypatch, tmp_path):
    """The benchmarks' results folder, redirected to an empty temporary one."""
    monkeypatch.setattr(cli, "RESULTS", tmp_path)
    return tmp_path


@pytest.mark.parametrize("stem", BENCHMARKS)
@pytest.mark.parametrize("argv", [[], ["--quick"]], ids=["full", "quick"])
def test_without_a_gpu_the_benchmark_says_so_and_writes_nothing(stem, argv, results, monkeypatch, capsys):
    monkeypatch.setattr(cuda, "gpu_available", lambda: False)
    BENCHMARKS[stem].main(argv)
    assert capsys.readouterr().out == (f"bench_{stem} skipped: no GPU (tvm_tailsplit.cuda.gpu_available() is "
                                       "false); nothing written\n")
    assert not list(results.rglob("*"))


def test_a_missing_module_is_a_reason_to_skip(monkeypatch):
    from bench import gpu

    monkeypatch.setattr(cuda, "gpu_available", lambda: True)
    assert gpu.skip_reason(("numpy", "no_such_module_x")) == "missing Python module(s) no_such_module_x"
    assert gpu.skip_reason(("numpy",)) is None


@pytest.mark.skipif(cuda.gpu_available(), reason="on a GPU, run_all would run the benchmarks")
def test_run_all_runs_them_without_a_gpu_and_writes_nothing():
    paths = [ROOT / "bench" / "results" / sub / f"{stem}.{ext}" for stem in BENCHMARKS for ext in ("json", "md")
             for sub in ("", "quick")]
    before = {path: path.stat().st_mtime_ns if path.exists() else None for path in paths}
    names = [f"bench_{stem}" for stem in BENCHMARKS]
    result = subprocess.run([sys.executable, "-m", "bench.run_all", "--quick", *names], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("skipped: no GPU") == len(BENCHMARKS)
    assert before == {path: path.stat().st_mtime_ns if path.exists() else None for path in paths}


def test_divisible_shape_rule():
    """Whole thread-block tiles of the tiling: the default 128 x 128 x 32, and the rule's thin 16 x 32 tiles."""
    default = ms.DEFAULT_TILING
    assert bench_tails_cuda.divisible_shape(4000, 4000, 4000, default) == (3968, 3968, 4000)
    assert bench_tails_cuda.divisible_shape(127, 255, 129, default) == (128, 256, 128)
    assert bench_tails_cuda.divisible_shape(1, 4096, 4096, default) == (128, 4096, 4096)
    assert bench_tails_cuda.divisible_shape(1000, 4096, 4096, default) == (1024, 4096, 4096)
    assert bench_tails_cuda.divisible_shape(1, 4096, 4096, ms.choose_tiling(1, 4096, 4096)) == (16, 4096, 4096)
    assert bench_tails_cuda.divisible_shape(127, 255, 129, ms.choose_tiling(127, 255, 129)) == (128, 256, 128)


def test_sanitized_plans_have_the_breakdowns_they_are_named_after():
    kinds = {"single codelet": "Codelet", "Cooley-Tukey": "CooleyTukey", "Rader": "Rader", "Bluestein": "Bluestein",
             "multi-kernel": "CooleyTukey"}
    for label, (kind, n, dtype, batch) in bench_fft_cuda.SANITIZE_PLANS.items():
        plan = bench_fft_cuda.make_plan(kind, n, dtype, batch, "sm_90")
        assert type(plan.tree).__name__ == kinds[label], (label, plan.tree)
        assert (plan.kernels > 1) == (label == "multi-kernel"), (label, plan.kernels)


@pytest.mark.parametrize("m", [33, None], ids=["M=33", "M symbolic"])
def test_guarded_cuda_core_kernel_means_the_matmul(m):
    """(a) on llvm (threads as serial loops, shared buffers global): 33 x 70 x 45, no dimension a multiple of its
    tile; with M symbolic, one function run with M = 33."""
    mod = cuda_schedule_for_llvm(bench_tails_cuda.simt_matmul(m, 70, 45))
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-1, 1, (33, 45)).astype("float16"), rng.uniform(-1, 1, (45, 70)).astype("float16")
    got = run_guarded(tvm.compile(mod, target="llvm"), mod["main"], [a, b, np.zeros((33, 70), "float32")], {})[-1]
    np.testing.assert_allclose(got, a.astype("float32") @ b.astype("float32"), rtol=1e-5, atol=1e-5)


def test_hopper_column_rule():
    """(h): sm_90 GPUs only, K a multiple of 8 (TMA's 16-byte row stride of fp16 A and B)."""
    assert bench_tails_cuda.hopper_unsupported(4096, "sm_90") is None
    assert bench_tails_cuda.hopper_unsupported(4000, "sm_90a") is None
    assert "not a multiple of 8" in bench_tails_cuda.hopper_unsupported(129, "sm_90")
    assert "needs an sm_90 GPU" in bench_tails_cuda.hopper_unsupported(None, "sm_80")


@pytest.mark.nvcc
def test_tails_dry_run_builds_the_symbolic_m_hopper_kernels(results, monkeypatch):
    """(h) of the M-symbolic rows: one function dispatching by M to a TailSplit + WarpSpecialize kernel of each of
    the rule's four tile widths, built for sm_90a without spills."""
    monkeypatch.setattr(bench_tails_cuda, "cases", lambda quick: [(None, *bench_tails_cuda.SYMBOLIC_NK)])
    monkeypatch.setattr(bench_tails_cuda, "kernels", lambda *args: {})
    bench_tails_cuda.main(["--dry-run", "--quick"])
    report = json.loads((results / "quick" / "tails_cuda_dry_run.json").read_text())
    (row,) = report["rows"]
    assert (row["shape"], row["column"], row["compiled"], row["kernels"], row["spills"]) == (
        "Mx4096x4096", "hopper", True, 4, 0), row
    assert row["tiling"] == "M<=128: 128x32x64, M<=384: 128x64x64, M<=896: 128x128x64, M>=897: 128x256x64"
    assert all("[sm_90a]" in usage for usage in row["ptxas"])


def test_the_search_rows_are_the_fft_rows_once_each():
    names = [bench_fft_cuda.row_name(*row) for row in bench_fft_cuda.ROWS]
    assert sorted(bench_fft_cuda_search.SEARCH_ROWS) == sorted(names)
    quick = bench_fft_cuda_search.selected_rows(True, None)
    assert sorted(bench_fft_cuda.row_name(*row) for row in quick) == sorted(bench_fft_cuda.QUICK_ROWS)
    assert bench_fft_cuda_search.selected_rows(False, ["r2c:4096", "c2c:16"]) == [("r2c", 4096, "complex64"),
                                                                                  ("c2c", 16, "complex64")]


def test_an_unknown_search_row_is_refused_naming_the_known_ones(results, capsys):
    with pytest.raises(SystemExit):
        bench_fft_cuda_search.main(["--rows", "c2c:1023"])
    error = capsys.readouterr().err
    assert "unknown row(s) ['c2c:1023']" in error and "'c2c:1024'" in error
    assert not list(results.rglob("*"))


@pytest.mark.nvcc
def test_search_dry_run_builds_every_variant_a_search_times(results):
    from tvm_tailsplit.fft import search

    bench_fft_cuda_search.main(["--dry-run", "--quick", "--rows", "c2c:64", "r2c:1024"])
    report = json.loads((results / "quick" / "fft_cuda_search_dry_run.json").read_text())
    assert [row["row"] for row in report["rows"]] == ["c2c:64", "r2c:1024"]
    for row, (kind, n, dtype) in zip(report["rows"], bench_fft_cuda_search.rows_of(["c2c:64", "r2c:1024"]),
                                     strict=True):
        plan = bench_fft_cuda.make_plan(kind, n, dtype, row["batch"], "sm_90")
        changes = search.single_changes(plan.variant, plan.spec, plan.variant, plan.batch, True, 1, wide=False)
        expected = {search.label(v, plan.variant) for pairs in changes.values() for _, v in pairs} | {"estimate"}
        assert {v["label"] for v in row["variants"]} == expected
        assert len(row["variants"]) == len(expected)  # each variant built once
        assert all(v["compiled"] and v["spills"] == 0 for v in row["variants"]), row
    assert "| r2c:1024 | lanes=2 |" in (results / "quick" / "fft_cuda_search_dry_run.md").read_text()


@pytest.mark.nvcc
def test_fft_dry_run_builds_every_quick_plan(results):
    bench_fft_cuda.main(["--dry-run", "--quick"])
    report = json.loads((results / "quick" / "fft_cuda_dry_run.json").read_text())
    assert [row["row"] for row in report["rows"]] == [
        bench_fft_cuda.row_name(*row) for row in bench_fft_cuda.ROWS
        if bench_fft_cuda.row_name(*row) in bench_fft_cuda.QUICK_ROWS]
    for row in report["rows"]:
        assert row["compiled"], row
        assert row["kernels"] >= row["plan_kernels"] >= 1 and row["spills"] == 0
    assert "c2c:65536" in (results / "quick" / "fft_cuda_dry_run.md").read_text()
    # the fused-consumer row's graph: the power spectrum in the FFT's kernel, or a kernel of its own
    consumer = report["consumer_graph"]
    assert [consumer[label]["kernels"] for label in ("fused", "unfused")] == [1, 2]
    assert consumer["fused"]["spills"] == 0


@pytest.mark.nvcc
def test_tails_dry_run_builds_every_kernel_of_one_shape(results, monkeypatch):
    """One static shape (the M-symbolic kernels compile the same schedules, and take longer), ``--tilings`` with
    one other tiling: (b) to (e) built with the rule's tiling, then (d) with the other; (h) has no entry (K =
    129 is not a multiple of 8), the row says why."""
    shape = (127, 255, 129)
    rule, other = ms.choose_tiling(*shape), ms.DEFAULT_TILING
    monkeypatch.setattr(bench_tails_cuda, "cases", lambda quick: [shape])
    monkeypatch.setattr(bench_tails_cuda, "sweep_tilings", lambda m, k: [rule, other])
    bench_tails_cuda.main(["--dry-run", "--quick", "--tilings"])
    report = json.loads((results / "quick" / "tails_cuda_dry_run.json").read_text())
    assert [row["column"] for row in report["rows"]] == ["guarded", "pad_einsum", "guard_chains", "tailsplit",
                                                         "divisible", "dlight", "hopper", "tailsplit"]
    (hopper,) = [row for row in report["rows"] if row["column"] == "hopper"]
    assert not hopper["compiled"] and "K = 129 is not a multiple of 8" in hopper["absent"]
    assert "(h) hopper | - | warp_specialized | no entry: K = 129" in (
        results / "quick" / "tails_cuda_dry_run.md").read_text()
    for row in report["rows"]:
        assert row is hopper or row["compiled"] and row["spills"] == 0, row
    mma = [row for row in report["rows"] if row["pipeline"] == "tailsplit_mma"]
    # the tensor-core kernels: (b) the matmul and the copy of the padded C back; (c), (d) and (e) the matmul alone
    assert [row["kernels"] for row in mma] == [2, 1, 1, 1, 1]
    assert [(row["tiling"], row["sweep"]) for row in mma] == [(rule.name(), False)] * 4 + [(other.name(), True)]


@pytest.mark.nvcc
def test_warpspec_dry_run_builds_the_hopper_kernels(results):
    bench_warpspec_cuda.main(["--dry-run", "--quick"])
    report = json.loads((results / "quick" / "warpspec_cuda_dry_run.json").read_text())
    assert [row["column"] for row in report["rows"]] == ["warp_specialized", "persistent", "persistent_row_major",
                                                         "ablation"]
    for row in report["rows"]:
        assert row["compiled"] and row["spills"] == 0 and row["kernels"] == 1, row


def test_the_persistent_columns_are_the_grouped_and_the_row_major_kernel():
    from tvm_tailsplit.warpspec import WarpSpecialize, examples

    columns = bench_warpspec_cuda.hopper_modules(8192, 8192, 2048)
    # 2048 tiles of 128 x 256 on 128 CTAs (persistent_ctas), in groups of 16 rows (tiling.hopper_group_rows)
    for column, group_rows in (("persistent", 16), ("persistent_row_major", None)):
        func = examples.hopper_gemm_kernel(8192, 8192, 2048, ctas=128, group_rows=group_rows)
        expected = WarpSpecialize("cuda", hopper=True)(tvm.IRModule({"main": func}))
        tvm.ir.assert_structural_equal(columns[column](), expected)


@pytest.mark.nvcc
def test_warpspec_dlight_column_is_built_with_tensor_cores():
    # dlight's Matmul rule reads the architecture as a number: for sm_90a it scheduled CUDA cores, not its wmma path
    columns = bench_warpspec_cuda.compiled_columns(1024, 1024, 1024, cuda.DEFAULT_MULTIPROCESSORS)
    build, arch, pipeline = columns["dlight"]
    source = cuda.cuda_source(build(), arch, pipeline)
    assert "wmma::mma_sync" in source
    assert len(cuda.compile_cuda_source(source, arch)) == 1


def test_fft_sanitizer_runs_every_child_and_keeps_their_order(monkeypatch):
    """``sanitize`` (GPU-only) with compute-sanitizer's children faked: one per plan and tool, in the table's order
    whatever order they end in, summary lines parsed, a child past its time recorded, not raised."""
    commands = []

    def fake_run(command, **options):
        commands.append(command)
        spec = command[command.index("--sanitize-child") + 1]
        if spec.startswith("c2c:4099:") and command[2] == "racecheck":
            raise subprocess.TimeoutExpired(command, options["timeout"])
        return subprocess.CompletedProcess(command, 0, f"child: {spec} relative error 1.0e-07\n",
                                           "========= ERROR SUMMARY: 0 errors\n")

    monkeypatch.setattr(bench_fft_cuda.subprocess, "run", fake_run)
    result = bench_fft_cuda.sanitize("sm_90")
    assert list(result) == [f"{label} {bench_fft_cuda.row_name(*plan[:3])} {tool}"
                            for label, plan in bench_fft_cuda.SANITIZE_PLANS.items()
                            for tool in bench_fft_cuda.SANITIZE_TOOLS]
    assert len(commands) == len(result) and all(c[0] == "compute-sanitizer" and c[-2:] == ["--arch", "sm_90"]
                                                for c in commands)
    assert result["Rader c2c:97 memcheck"] == {"exit": 0, "summary": [
        "child: c2c:97:complex64:8 relative error 1.0e-07", "ERROR SUMMARY: 0 errors"]}
    assert result["Bluestein c2c:4099 racecheck"]["exit"] is None
    assert result["Bluestein c2c:4099 racecheck"]["summary"][0].startswith("TimeoutExpired: ")


def test_fft_sanitizer_child_checks_its_plan_against_numpy(monkeypatch, capsys):
    """The child of ``--sanitize`` (GPU-only) on an llvm plan of the same request: its one line, a small error."""
    from tvm_tailsplit import fft as tfft

    monkeypatch.setattr(bench_fft_cuda, "make_plan", lambda kind, n, dtype, batch, arch: tfft.plan(
        n, batch, kind=kind, dtype=dtype))
    bench_fft_cuda.main(["--sanitize-child", "c2c:97:complex64:8", "--arch", "sm_90"])
    line = capsys.readouterr().out
    assert line.startswith("child: c2c:97:complex64:8 relative error ") and float(line.split()[-1]) < 1e-5


# ------------------------------------------------------------------------------------------------- on a GPU


@pytest.mark.gpu
def test_fft_quick_run_on_the_gpu(results):
    pytest.importorskip("torch")
    pytest.importorskip("cupy")
    bench_fft_cuda.main(["--quick"])
    report = json.loads((results / "quick" / "fft_cuda.json").read_text())
    assert sorted(row["row"] for row in report["rows"]) == sorted(bench_fft_cuda.QUICK_ROWS)
    for row in report["rows"]:
        assert row["ok"] and row["all_written"], row
        assert row["error_vs_cufft"] < 1e-4, row
        assert all(us > 0 for us in row["us"].values())
    assert report["convolution"]["ok"] and report["fused_consumer"]["ok"] and report["machine"]["gpu"]


@pytest.mark.gpu
def test_tails_quick_run_on_the_gpu(results):
    pytest.importorskip("torch")
    bench_tails_cuda.main(["--quick", "--tilings"])
    report = json.loads((results / "quick" / "tails_cuda.json").read_text())
    shapes = [tuple(row["shape"]) for row in report["rows"]]
    assert shapes == [*bench_tails_cuda.QUICK_STATIC_SHAPES, *((m, *bench_tails_cuda.SYMBOLIC_NK)
                                                               for m in bench_tails_cuda.QUICK_SYMBOLIC_MS)]
    for row in report["rows"]:
        assert row["ok"], row
        m, n, k = row["shape"]
        hopper = bench_tails_cuda.hopper_unsupported(k, report["machine"]["arch"]) is None  # (h): sm_90, K % 8 == 0
        assert set(row["us"]) == {*bench_tails_cuda.COLUMNS, *(("hopper",) if hopper else ())}
        assert hopper or row["hopper_absent"]
        # a symbolic-M row runs the tiling the dispatch picks for its M (not the one for SYMBOLIC_M)
        rule = (bench_tails_cuda.dispatched_tiling(m, n, k, report["sm_count"]) if row["m_symbolic"]
                else ms.choose_tiling(m, n, k, sm_count=report["sm_count"]))
        assert row["tiling"]["name"] == rule.name()
        assert rule.name() in row["sweep"] and all(result["ok"] for result in row["sweep"].values()), row["sweep"]


@pytest.mark.gpu
def test_warpspec_quick_run_on_the_gpu(results):
    pytest.importorskip("torch")
    bench_warpspec_cuda.main(["--quick"])
    report = json.loads((results / "quick" / "warpspec_cuda.json").read_text())
    assert [tuple(row["shape"]) for row in report["rows"]] == bench_warpspec_cuda.QUICK_SHAPES
    for row in report["rows"]:
        assert row["ok"], row
        assert set(row["tflops"]) == set(bench_warpspec_cuda.COLUMNS)
