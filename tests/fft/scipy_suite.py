"""scipy's own FFT test suite with the generated operator as scipy.fft's global backend.

Run: `make scipy-fft-suite`, or `python -m tests.fft.scipy_suite [pytest arguments]` from the repository root.
It runs scipy/fft/tests/test_basic.py, test_helper.py and test_multithreading.py (shipped inside scipy) with
numpy arrays only, after `scipy.fft.set_global_backend(<tvm_tailsplit.fft>)` and
`scipy.fft.register_backend("scipy")` (scipy computes what the backend returns NotImplemented for: long
double, DCT/DST). The backend is wrapped in a counter, and the summary lists, per scipy.fft function, how many
calls the generated operator computed and how many fell back to scipy (worker processes of the
multiprocessing tests run the backend too, uncounted: `scipy_suite_worker` is preloaded into their
forkserver). The process exits with pytest's status.
"""

from __future__ import annotations

import collections
import multiprocessing
import pathlib
import sys
from typing import Any

import pytest
import scipy.fft

from tvm_tailsplit import fft as tfft

SUITE = ("test_basic.py", "test_helper.py", "test_multithreading.py")


class CountingBackend:
    """tvm_tailsplit.fft as a scipy.fft backend, counting the calls it computes and those it declines."""

    __ua_domain__ = tfft.__ua_domain__

    def __init__(self) -> None:
        self.computed: collections.Counter[str] = collections.Counter()
        self.declined: collections.Counter[str] = collections.Counter()

    def __ua_function__(self, method: Any, args: tuple, kwargs: dict) -> Any:
        result = tfft.__ua_function__(method, args, kwargs)
        (self.declined if result is NotImplemented else self.computed)[method.__name__] += 1
        return result


class SuitePlugin:
    """Sets the backend globally for the session and prints the dispatch counts at the end."""

    def __init__(self) -> None:
        self.backend = CountingBackend()

    def pytest_configure(self, config: pytest.Config) -> None:
        scipy.fft.set_global_backend(self.backend)
        scipy.fft.register_backend("scipy")
        # scipy's conftest starts worker processes with 'forkserver': they do not inherit the backend set here
        multiprocessing.set_forkserver_preload(["tests.fft.scipy_suite_worker"])

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        write = terminalreporter.write_line
        write("scipy.fft calls computed by the generated operator (tvm_tailsplit.fft backend):")
        write("  " + ", ".join(f"{name} {count}" for name, count in sorted(self.backend.computed.items())))
        write("scipy.fft calls the backend returned NotImplemented for (computed by scipy):")
        write("  " + (", ".join(f"{name} {count}" for name, count in sorted(self.backend.declined.items()))
                      or "none"))


def main(arguments: list[str], selection: tuple[str, ...] = SUITE) -> int:
    """Run the `selection` (files or node ids under scipy/fft/tests) with the backend; pytest's exit status."""
    tests = pathlib.Path(scipy.fft.__file__).parent / "tests"
    paths = [str(tests / name) for name in selection]
    return pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", str(tests), *paths, *arguments],
                       plugins=[SuitePlugin()])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
