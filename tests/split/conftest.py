"""Fixtures shared by the workload tests."""

import pytest

from tvm_tailsplit.split import workloads as wl


@pytest.fixture(scope="module")
def target():
    """This machine's llvm target, with the workloads' intrinsics registered."""
    wl.register_workload_intrinsics()
    return wl.llvm_target()
