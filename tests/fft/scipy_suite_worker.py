"""Imported by the forkserver of scipy's multiprocessing FFT tests (`scipy_suite` preloads it): the worker
processes forked from it use tvm_tailsplit.fft as scipy.fft's global backend, like the test process."""

import scipy.fft

from tvm_tailsplit import fft as tfft

scipy.fft.set_global_backend(tfft)
scipy.fft.register_backend("scipy")
