"""The benchmark command lines: `--help` answers without running anything, unknown names are refused with a
non-zero exit, and a quick run writes under bench/results/quick/, never over the committed full results."""

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).parent.parent


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("module", ["bench.run_all", "bench.bench_tails", "bench.bench_warpspec",
                                    "bench.bench_fft_ndim", "bench.bench_fft_dask", "bench.bench_fft_cache",
                                    "bench.bench_fft_cuda", "bench.bench_tails_cuda", "bench.bench_dense_pitch",
                                    "bench.bench_fft_fusion"])
def test_help_answers_without_running(module):
    result = run(module, "--help")
    assert result.returncode == 0, result.stderr
    assert "usage: python -m " in result.stdout and "--quick" in result.stdout
    assert "machine:" not in result.stdout  # the benchmark did not start


def test_run_all_refuses_unknown_benchmarks():
    result = run("bench.run_all", "bench_nope")
    assert result.returncode == 2
    assert "unknown benchmark(s) ['bench_nope']" in result.stderr


def test_unknown_flags_are_refused():
    result = run("bench.bench_tails", "--quik")
    assert result.returncode == 2 and "unrecognized arguments: --quik" in result.stderr


def test_quick_results_never_overwrite_full_results():
    sys.path.insert(0, str(ROOT))
    from bench import cli

    full = cli.result_paths("tails", quick=False)
    quick = cli.result_paths("tails", quick=True)
    assert full[0] == ROOT / "bench" / "results" / "tails.json"
    assert quick[0] == ROOT / "bench" / "results" / "quick" / "tails.json"
    assert "bench/results/quick/" in (ROOT / ".gitignore").read_text()


def test_blas_worker_times_numpy_matmul_with_one_thread():
    """The tail benchmark's BLAS reference: a worker process started with one BLAS thread names its BLAS and
    answers each shape with a positive time per call."""
    sys.path.insert(0, str(ROOT))
    from bench.bench_tails import BLAS_THREAD_VARIABLES, NumpyMatmul

    assert "OPENBLAS_NUM_THREADS" in BLAS_THREAD_VARIABLES
    with NumpyMatmul() as numpy_matmul:
        assert numpy_matmul.blas
        assert 0 < numpy_matmul.seconds(dict(m=3, n=5, k=7)) < 0.01
    assert numpy_matmul.process.returncode == 0


def test_fft_ndim_table_names_the_machine_and_the_date():
    """As README says of every table under bench/results/: the n-D table states where and when it was measured."""
    sys.path.insert(0, str(ROOT))
    from bench import bench_fft_ndim

    info = {"cpu": "Some CPU", "cores": 2, "date": "2026-11-25T01:00:00+00:00", "numpy": "2.4", "scipy": "1.17",
            "tvm": "0.27.0.post1", "tvm_num_threads": "2"}
    results = {"c2c:8x8": {"milliseconds": {"graph": 0.5, "numpy.fft": 1.0}, "workspace_bytes": 64}}
    text = bench_fft_ndim.markdown(info, 5, results)
    assert "Some CPU, 2 cores, 2026-11-25T01:00:00+00:00" in text
    assert "| c2c:8x8 | 0.500 | 1.000 | 64 |" in text
