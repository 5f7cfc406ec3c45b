"""Multi-kernel CUDA plans (scratch beyond shared memory): one kernel per pass, checked on llvm and with nvcc.

On llvm, the scheduled CUDA module runs with its thread loops serialized (`cuda_schedule_for_llvm`): the
same kernels, in launch order, against numpy.fft.
"""

import pytest

from tvm_tailsplit import fft as tfft
from tvm_tailsplit.cuda import compile_cuda_source

from .fft_reference import plan_input_and_reference, relative_error, run_cuda_plan_on_llvm, tolerance

MULTI_KERNEL_PLANS = [
    dict(n=16384, batch=2),
    dict(n=65536, batch=1),
    dict(n=20000, batch=3),
    dict(n=40009, batch=1),
    dict(n=65536, batch=1, kind="r2c"),
    dict(n=40000, batch=2, kind="c2r", direction="backward"),
    dict(n=12288, batch=2, dtype="complex128"),
]


def plan_id(params):
    return "-".join(f"{k}={v}" for k, v in params.items())


def test_cuda_plans_switch_to_one_kernel_per_pass_beyond_shared_memory():
    assert tfft.plan(4096, 2, target="cuda").kernels == 1
    plan = tfft.plan(16384, 2, target="cuda")
    assert plan.kernels == len(plan.passes.passes) > 1
    assert plan.workspace_bytes == 2 * 2 * 16384 * 8  # two ping-pong buffers of the whole batch, global memory
    assert "one per pass over memory" in plan.describe()


@pytest.mark.parametrize("params", MULTI_KERNEL_PLANS, ids=plan_id)
def test_multi_kernel_plan_with_serialized_threads_matches_numpy(params):
    plan = tfft.plan(target="cuda", **params)
    assert plan.kernels > 1
    x, reference = plan_input_and_reference(params)
    assert relative_error(run_cuda_plan_on_llvm(plan, x), reference) <= tolerance(params["n"], plan.dtype)


@pytest.mark.nvcc
@pytest.mark.parametrize("params", MULTI_KERNEL_PLANS[:3], ids=plan_id)
def test_multi_kernel_cuda_compiles_with_nvcc(params):
    plan = tfft.plan(target="cuda", **params)
    for arch in ("sm_80", "sm_90"):
        usages = compile_cuda_source(plan.cuda_source(arch), arch)
        assert len(usages) == plan.kernels
        assert all(u.spill_store_bytes == 0 for u in usages)
        for usage in usages:
            print(f"ptxas {plan_id(params)}: {usage}")


@pytest.mark.gpu
@pytest.mark.parametrize("params", MULTI_KERNEL_PLANS, ids=plan_id)
def test_multi_kernel_cuda_plans_run_against_numpy(params):
    plan = tfft.plan(target="cuda", **params)
    x, reference = plan_input_and_reference(params)
    assert relative_error(plan(x), reference) <= tolerance(params["n"], plan.dtype)
