"""The CUDA target: a GPU-scheduled tail-tiled kernel passes through TailSplit (thread-bound loops are decided
by a guard chain above the mark, never copied), generates CUDA, and compiles with nvcc for sm_80 and sm_90.
Its meaning is checked on llvm with the thread loops run serially; on a machine with a GPU it also runs."""

import numpy as np
import pytest
import tvm

from tvm_tailsplit import TailSplit
from tvm_tailsplit.cuda import compile_cuda_source, cuda_source
from tvm_tailsplit.ir_utils import EMIT_INSN_PRAGMA, drop_loop_annotation
from tvm_tailsplit.split import analysis
from tvm_tailsplit.split.examples import gpu_vector_add_one
from tvm_tailsplit.testing import (
    assert_same_results,
    grids_as_launched,
    guarded_device_tensor,
    threads_as_serial_loops,
)

SIZES = [1000, 256, 255, 257, 7]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("strategy", ["full", "partial"])
def test_gpu_schedule_split_means_the_same(n, strategy):
    mod = gpu_vector_add_one(n)
    after = TailSplit(strategy=strategy)(mod)
    assert analysis.conditions_under_marks(after) == 0
    assert_same_results(threads_as_serial_loops(mod), threads_as_serial_loops(after))


@pytest.mark.parametrize("strategy", ["full", "partial"])
def test_symbolic_length_split_means_the_same_at_every_length_as_launched(strategy):
    """One kernel for every length ``n``, run as TVM's CUDA runtime launches it (``grids_as_launched``: a grid
    extent of 0 launches one block). TailSplit decided the guard chains for block indices inside the grid; at
    ``n = 0`` the launched block 0 fell into the tail case, whose full vectors ran unguarded and wrote 256 floats
    past the empty ``B``. Launch dimensions now range over ``max(extent, 1)`` in the planner."""
    mod = gpu_vector_add_one(None)
    after = TailSplit(strategy=strategy)(mod)
    assert analysis.conditions_under_marks(after) == 0
    before_run, after_run = (threads_as_serial_loops(grids_as_launched(m)) for m in (mod, after))
    executables = tuple(tvm.compile(drop_loop_annotation(m, EMIT_INSN_PRAGMA), target="llvm")
                        for m in (before_run, after_run))
    for n in range(0, 2 * 256 + 9):
        assert_same_results(before_run, after_run, {"n": n}, trials=1, executables=executables)


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_split_kernel_compiles_with_nvcc(arch):
    after = TailSplit()(gpu_vector_add_one(1000))
    source = cuda_source(after, arch)
    assert "blockIdx.x) < 3" in source  # the guard chain decides the tail block above the mark
    usages = compile_cuda_source(source, arch)
    assert usages and all(u.registers > 0 for u in usages)
    for usage in usages:
        print(usage)


@pytest.mark.gpu
def test_symbolic_length_split_kernel_runs_on_the_gpu_at_every_length():
    """The symbolic-length kernel on the GPU, ``n = 0`` included (its grid extent 0 launches one block), with
    canaries around ``B``."""
    after = TailSplit()(gpu_vector_add_one(None))
    device = tvm.cuda(0)
    arch = "sm_" + device.compute_version.replace(".", "")
    executable = tvm.compile(after, target=tvm.target.Target({"kind": "cuda", "arch": arch}))
    for n in (0, 1, 7, 255, 256, 257, 1000):
        a = np.random.default_rng(n).uniform(-1, 1, n).astype("float32")
        b = guarded_device_tensor((n,), "float32", device, guard_bytes=4096)
        executable["main"](tvm.runtime.tensor(a, device), b.tensor)
        np.testing.assert_allclose(b.numpy(f"B at n = {n}"), a + 1, rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("n", SIZES)
def test_split_kernel_runs_on_the_gpu(n):
    after = TailSplit()(gpu_vector_add_one(n))
    device = tvm.cuda(0)
    arch = "sm_" + device.compute_version.replace(".", "")
    executable = tvm.compile(after, target=tvm.target.Target({"kind": "cuda", "arch": arch}))
    a = np.random.default_rng(n).uniform(-1, 1, n).astype("float32")
    b = tvm.runtime.empty((n,), "float32", device)
    executable["main"](tvm.runtime.tensor(a, device), b)
    np.testing.assert_allclose(b.numpy(), a + 1, rtol=0, atol=0)
