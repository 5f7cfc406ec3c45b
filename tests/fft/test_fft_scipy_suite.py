"""A fast subset of scipy's own FFT tests with tvm_tailsplit.fft as scipy.fft's global backend, run in a child
process so that the global backend does not leak into the other tests. The whole suite is
`make scipy-fft-suite` (tens of minutes on 2 cores, mostly compiling plans for the 2000 sizes of
test_identity_extensive)."""

import subprocess
import sys

SUBSET = (
    "test_basic.py::TestFFT::test_fft",
    "test_basic.py::TestFFT::test_fft_n",
    "test_basic.py::TestFFT::test_ifft",
    "test_basic.py::TestFFT::test_rfft",
    "test_basic.py::TestFFT::test_irfft2",
    "test_basic.py::TestFFT::test_hfft",
    "test_basic.py::test_multiprocess",
    "test_multithreading.py::test_invalid_workers",
)


def test_scipy_fft_suite_subset_passes_with_the_backend():
    code = f"import sys; from tests.fft.scipy_suite import main; sys.exit(main(['-p', 'no:randomly'], {SUBSET!r}))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " failed" not in summary and " passed" in summary
    assert "computed by the generated operator" in run.stdout and "fft " in run.stdout
