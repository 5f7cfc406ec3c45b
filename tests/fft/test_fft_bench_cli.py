"""The FFT benchmark's command line, without running the benchmark: `--help` answers at once, unknown cases and
bad options are refused with a non-zero exit before anything is measured."""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "bench.bench_fft", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)


def test_help_lists_the_options_and_exits():
    result = _run("--help")
    assert result.returncode == 0
    assert all(option in result.stdout for option in ("--cases", "--rounds", "--quick", "c2c:64"))
    assert "machine:" not in result.stdout  # nothing was measured


@pytest.mark.parametrize(("args", "message"), [
    (("--cases", "c2c:63"), "unknown case(s) c2c:63"),
    (("--cases", "c2c:64,fft:64"), "unknown case(s) fft:64"),
    (("--rounds", "0"), "--rounds must be at least 1"),
    (("--rounds", "many"), "invalid int value"),
    (("--bogus",), "unrecognized arguments"),
])
def test_bad_options_exit_non_zero_before_measuring(args, message):
    result = _run(*args)
    assert result.returncode != 0
    assert message in result.stderr
    assert "machine:" not in result.stdout


def test_only_a_full_run_writes_the_results():
    from bench.bench_fft import QUICK_CASES, ROUNDS, all_cases, parse_args

    full = parse_args([])
    assert full.full and full.rounds == ROUNDS and full.selected == all_cases()
    quick = parse_args(["--quick"])
    assert not quick.full and [f"{k}:{n}" for k, n, _ in quick.selected] == list(QUICK_CASES)
    assert not parse_args(["--cases", "c2c:64"]).full
    assert not parse_args(["--rounds", "3"]).full
