"""CUDA: the plans generate CUDA that nvcc compiles for sm_80 and sm_90; on a GPU they run against numpy."""

import math

import numpy as np
import pytest

from tvm_tailsplit import fft as tfft
from tvm_tailsplit.cuda import compile_cuda_source
from tvm_tailsplit.fft import planner

from .fft_reference import random_complex, random_real, relative_error, tolerance

CUDA_PLANS = [
    dict(n=64, batch=4),
    dict(n=97, batch=3),
    dict(n=4096, batch=2),
    dict(n=1024, batch=2, kind="r2c"),
    dict(n=1000, batch=2, kind="c2r", direction="backward", dtype="complex128"),
]


def plan_id(params):
    return "-".join(f"{k}={v}" for k, v in params.items())


@pytest.mark.nvcc
@pytest.mark.parametrize("params", CUDA_PLANS, ids=plan_id)
def test_generated_cuda_compiles_with_nvcc(params):
    plan = tfft.plan(target="cuda", **params)
    for arch in ("sm_80", "sm_90"):
        source = plan.cuda_source(arch)
        assert "__syncthreads()" in source and "threadIdx.x" in source
        # one block per lane group (TVM drops an index of extent 1)
        assert ("blockIdx.x" in source) == (math.ceil(plan.batch / plan.lanes) > 1)
        usages = compile_cuda_source(source, arch)
        assert usages and all(u.spill_store_bytes == 0 for u in usages)
        for usage in usages:
            print(f"ptxas {plan_id(params)}: {usage}; dynamic shared memory {plan.workspace_bytes} bytes")


def test_cuda_plan_describes_one_kernel_with_shared_scratch():
    plan = tfft.plan(4096, 2, target="cuda")
    assert plan.lanes == 1
    # two ping-pong buffers of complex64 and the staged input row (8192 floats, skewed by 2 every 64) in shared memory
    assert plan.staged == ("input",) and plan.workspace_bytes == 2 * 4096 * 8 + 4 * (8192 + 2 * 127)
    assert "CUDA blocks of 1 transform copy their input row through shared memory" in plan.describe()
    assert "target=cuda" in plan.describe()


@pytest.mark.gpu
@pytest.mark.parametrize("params", CUDA_PLANS, ids=plan_id)
def test_cuda_plans_run_against_numpy(params):
    plan = tfft.plan(target="cuda", **params)
    kind, dtype, n, batch = params.get("kind", "c2c"), params.get("dtype", "complex64"), params["n"], params["batch"]
    if kind == "c2c":
        x = random_complex((batch, n), dtype)
        reference = np.fft.fft(x.astype(np.complex128))
    elif kind == "r2c":
        x = random_real((batch, n), "float32" if dtype == "complex64" else "float64")
        reference = np.fft.rfft(x.astype(np.float64))
    else:
        x = random_complex((batch, n // 2 + 1), dtype)
        reference = np.fft.irfft(x.astype(np.complex128), n=n)
    assert relative_error(plan(x), reference) <= tolerance(n, dtype)


def test_strided_cuda_plans_refuse_numpy_arrays_by_name():
    # numpy input is copied to the device compact, which the strided layout's kernel cannot read
    for layout in (dict(istride=2, idist=40), dict(ostride=2, odist=40)):
        plan = tfft.plan(16, 3, target="cuda", **layout)
        with pytest.raises(ValueError, match="istride/idist/ostride/odist runs on device tensors"):
            plan(np.zeros((3, 16), np.complex64))


def test_calling_a_cuda_plan_without_a_gpu_says_so(monkeypatch):
    # it raised TVM's InternalError "Device API cuda is not enabled"
    monkeypatch.setattr(planner, "gpu_available", lambda: False)
    plan = tfft.plan(16, 2, target={"kind": "cuda", "arch": "sm_90"})
    with pytest.raises(RuntimeError, match=r"runs on a CUDA GPU \(target sm_90\) and this machine has none"):
        plan(np.zeros((2, 16), np.complex64))
