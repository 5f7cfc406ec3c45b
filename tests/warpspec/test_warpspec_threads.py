"""The llvm form never hangs for lack of threads: with fewer pool threads than warp roles the call raises.

Each case runs in a fresh Python process (TVM's thread pool size is fixed per process by TVM_NUM_THREADS) under a
timeout, so a regression shows up as a failed test, not a hung test run.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import tvm

from tvm_tailsplit.warpspec import WarpSpecialize, examples, require_concurrent_threads

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 120

# Prints "RESULT ok <pool threads>" when the specialized kernel matches numpy, "RESULT error <pool threads>" and
# the message when the call raised.
SCRIPT = """
import sys
import numpy as np
import tvm
from tvm_tailsplit.warpspec import WarpSpecialize, examples, load_libatomic

load_libatomic()
compute_roles = int(sys.argv[1])
m = n = 32
k = 64
func = examples.gemm_kernel(m=m, n=n, k=k, block_m=32, block_n=32, block_k=16, stages=2, compute_roles=compute_roles)
executable = tvm.compile(WarpSpecialize("llvm")(tvm.IRModule({"main": func})), target="llvm")
rng = np.random.default_rng(0)
a = rng.standard_normal((m, k)).astype("float16")
b = rng.standard_normal((k, n)).astype("float16")
c = tvm.runtime.empty((m, n), "float32")
try:
    executable["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), c)
except Exception as error:  # the kernel's run-time check, raised through TVM's FFI
    print("RESULT error", tvm.get_global_func("runtime.NumThreads")())
    print(error)
    sys.exit(0)
np.testing.assert_allclose(c.numpy(), a.astype("float32") @ b.astype("float32"), rtol=1e-4, atol=1e-3)
print("RESULT ok", tvm.get_global_func("runtime.NumThreads")())
"""


def _run(tvm_num_threads: int, compute_roles: int) -> tuple[str, int, str]:
    env = {**os.environ, "TVM_NUM_THREADS": str(tvm_num_threads),
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(compute_roles)], env=env, capture_output=True,
                          text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    result = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
    _, outcome, threads = result.split()
    return outcome, int(threads), done.stdout


def test_one_thread_gives_a_clear_error_instead_of_a_hang():
    outcome, threads, output = _run(tvm_num_threads=1, compute_roles=1)
    assert (outcome, threads) == ("error", 1), output
    assert "2 warp roles" in output and "TVM_NUM_THREADS=2" in output and "at least 2 cores" in output


def test_enough_threads_run_and_match_numpy():
    outcome, threads, output = _run(tvm_num_threads=2, compute_roles=1)
    assert (outcome, threads) == ("ok", 2), output


def test_more_roles_than_cores_give_a_clear_error_or_run_correctly():
    # Three roles ask for three threads; TVM caps its pool at the number of cores, so on a two-core machine the
    # call must raise (it used to hang), and with three cores or more it must compute the right result.
    outcome, threads, output = _run(tvm_num_threads=3, compute_roles=2)
    if threads < 3:
        assert outcome == "error", output
        assert "3 warp roles" in output and "TVM_NUM_THREADS=3" in output
    else:
        assert outcome == "ok", output


def test_generated_function_checks_the_pool_before_the_roles_start():
    out = WarpSpecialize("llvm")(tvm.IRModule({"main": examples.streaming_kernel(tiles=4, tile=4)}))
    text = out.script()
    assert text.index('T.call_packed("runtime.NumThreads") >= 2') < text.index("T.parallel(2)")


def test_require_concurrent_threads_names_threads_roles_and_cores():
    threads = tvm.get_global_func("runtime.NumThreads")()
    require_concurrent_threads(threads)
    with pytest.raises(RuntimeError, match=rf"TVM_NUM_THREADS={threads + 1} .*runs {threads} thread\(s\); this "
                                           rf"machine has {os.cpu_count()} logical cores"):
        require_concurrent_threads(threads + 1)
