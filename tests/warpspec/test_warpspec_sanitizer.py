"""compute-sanitizer on the Hopper GEMM (issue #14): racecheck (shared-memory hazards), synccheck (barrier misuse)
and memcheck (out-of-bounds and misaligned accesses) report nothing for the warp-specialized kernel, its persistent
form and the ablation. Each runs in a child process under the sanitizer (which instruments the process it starts),
on a small shape with a symbolic K that is not a multiple of the tile (TMA's zero fill), and checks its result
against numpy there, so that a run that computed nothing cannot pass."""

import pathlib
import shutil
import subprocess
import sys

import pytest

FORMS = ("warp_specialized", "persistent", "ablation")
TOOLS = ("racecheck", "synccheck", "memcheck")
SECONDS = 600  # the sanitizer slows a kernel down by 10-1000x; the child compiles and runs one small GEMM

# the child imports the GPU check of test_warpspec_hopper from this directory as the package `warpspec_tests`
# (test_warpspec_hopper imports its neighbours relatively: as a top-level module it raised "attempted relative
# import with no known parent package")
IMPORT_CHECK = """
import sys
import types
package = types.ModuleType("warpspec_tests")
package.__path__ = [sys.argv[2]]
sys.modules["warpspec_tests"] = package
from warpspec_tests.test_warpspec_hopper import _assert_gemm_on_the_gpu
"""
CHILD = IMPORT_CHECK + """
import tvm
from tvm_tailsplit.warpspec import WarpSpecialize, examples, unspecialized_hopper_kernel

form = sys.argv[1]
m, n, k = 256, 512, 200
func = examples.hopper_gemm_kernel(m, n, None, zero_fill_k=True, ctas=3 if form == "persistent" else None)
if form == "ablation":
    mod = tvm.IRModule({"main": unspecialized_hopper_kernel(func)})
else:
    mod = WarpSpecialize("cuda", hopper=True)(tvm.IRModule({"main": func}))
_assert_gemm_on_the_gpu(mod, m, n, k, seed=0)
print("child: result matches numpy", flush=True)
"""


def test_the_child_imports_the_gpu_check():
    """The children's import of ``_assert_gemm_on_the_gpu`` works in a process of their own (no GPU needed)."""
    done = subprocess.run([sys.executable, "-c", IMPORT_CHECK + "print(_assert_gemm_on_the_gpu.__name__)", "form",
                           str(pathlib.Path(__file__).parent)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "_assert_gemm_on_the_gpu", done.stderr[-3000:]


@pytest.mark.gpu
@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("form", FORMS)
def test_compute_sanitizer_reports_nothing_on_the_hopper_gemm(form, tool):
    if shutil.which("compute-sanitizer") is None:
        pytest.skip("compute-sanitizer is not on PATH (it comes with the CUDA toolkit)")
    command = ["compute-sanitizer", "--tool", tool, "--error-exitcode", "99", sys.executable, "-c", CHILD, form,
               str(pathlib.Path(__file__).parent)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=SECONDS)
    output = done.stdout + done.stderr
    summary = [line for line in output.splitlines() if "SUMMARY" in line]
    print(form, tool, summary)
    assert "child: result matches numpy" in output, output[-3000:]
    assert done.returncode == 0, output[-3000:]
    assert any("0 errors" in line or "0 hazards" in line for line in summary), output[-3000:]
