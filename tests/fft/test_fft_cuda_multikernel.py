"""Multi-kernel CUDA plans (scratch beyond shared memory), checked on llvm and with nvcc.

A Cooley-Tukey chain runs in few kernels over columns (four-step / six-step, `multikernel.choose_kernel_groups`):
65536 points in 2 kernels (one per pass before: 6), 2^20 in at most 3 (before: 7); r2c and c2r add one kernel per
pre- or post-processing pass. Other large plans (Rader or Bluestein at the top) run one kernel per pass over
memory. On llvm, the scheduled CUDA module runs with
its thread loops serialized and shared memory in global memory (`cuda_schedule_for_llvm`): the same kernels, in
launch order, into a canary-guarded output, against numpy.fft.
"""

import re

import numpy as np
import pytest

from tvm_tailsplit import cuda
from tvm_tailsplit import fft as tfft
from tvm_tailsplit.cuda import compile_cuda_source
from tvm_tailsplit.fft import multikernel, planner
from tvm_tailsplit.fft.tuning import CUDA_SECTOR_BYTES, CUDA_STATIC_SHARED_LIMIT, CUDA_THREADS

from .fft_reference import plan_input_and_reference, relative_error, run_cuda_plan_on_llvm, tolerance

COLUMN_PLANS = [  # c2c chains: kernels over columns
    dict(n=16384, batch=2),
    dict(n=65536, batch=1),
    dict(n=65536, batch=2, dtype="complex128"),
    dict(n=2 ** 18, batch=2),
    dict(n=2 ** 20, batch=1),
    dict(n=3 ** 9, batch=1, dtype="complex128"),
    dict(n=2 ** 12 * 5 ** 3, batch=1, dtype="complex128"),
    dict(n=10 ** 6, batch=1),
    dict(n=20000, batch=3),
    dict(n=12288, batch=2, dtype="complex128"),
    dict(n=65536, batch=1, kind="r2c"),  # the real transforms' extra passes: one kernel each
    dict(n=40000, batch=2, kind="c2r", direction="backward"),
    dict(n=3 ** 9, batch=2, kind="r2c", dtype="complex128"),
    dict(n=64 * 1009, batch=1),  # a Rader leaf under the chain; 1009 columns: the last block of 16 guarded
]
PASS_PLANS = [  # one kernel per pass over memory
    dict(n=40009, batch=1),  # Rader
]
MULTI_KERNEL_PLANS = COLUMN_PLANS + PASS_PLANS
# kernels of the rules' plans: one per pass over memory before the kernels over columns (bench/results)
KERNELS = {16384: (5, 2), 65536: (6, 2), 2 ** 18: (6, 2), 2 ** 20: (7, 2)}


def plan_id(params):
    return "-".join(f"{k}={v}" for k, v in params.items() if k != "direction")


def test_large_c2c_plans_run_in_few_kernels_over_columns():
    assert tfft.plan(4096, 2, target="cuda").kernels == 1
    for n, (per_pass, kernels) in KERNELS.items():
        plan = tfft.plan(n, 1, target="cuda")
        assert len(plan.passes.passes) == per_pass
        assert plan.kernels == len(plan.kernel_groups) == kernels <= 3, n
    plan = tfft.plan(16384, 2, target="cuda")
    assert plan.workspace_bytes == 2 * 2 * 16384 * 4  # one buffer between the two kernels, global memory
    assert "over 256 columns" in plan.describe()
    r2c = tfft.plan(65536, 1, kind="r2c", target="cuda")
    assert r2c.kernels == 4  # before: 7 (the chain's 5, edges, pairs)
    # a kernel of one pass over one column is said so (it read "passes 5-5 over 1 columns")
    assert "; pass 5 over 1 column, 1 per block" in r2c.describe() and "-5 " not in r2c.describe()
    for params in PASS_PLANS:
        plan = tfft.plan(target="cuda", **params)
        assert plan.kernel_groups is None and plan.kernels == len(plan.passes.passes)


@pytest.mark.parametrize("params", COLUMN_PLANS, ids=plan_id)
def test_kernels_over_columns_fit_shared_memory_and_read_whole_sectors(params):
    plan = tfft.plan(target="cuda", **params)
    groups = plan.kernel_groups
    assert groups[0].start == 0 and groups[-1].stop == len(plan.passes.passes)
    assert all(a.stop == b.start for a, b in zip(groups, groups[1:], strict=False))
    owners = [{name for name, _ in g.shared} for g in groups]
    for group, own in zip(groups, owners, strict=True):
        shared = multikernel.shared_bytes(plan.passes, group, plan.real_dtype)
        assert shared <= plan.cuda_limits.shared == 163 * 1024  # sm_80's
        # fewer blocks fit on a multiprocessor: more threads per block
        spans = max(1, -(-shared // CUDA_STATIC_SHARED_LIMIT))
        assert group.threads == min(plan.cuda_limits.max_threads, CUDA_THREADS * spans)
        assert group.columns_per_block <= group.columns  # the last block of a transform guarded where not divisible
        # consecutive threads take consecutive columns: a block reads at least one 32-byte sector of each row
        assert group.columns_per_block * 2 * np.dtype(plan.real_dtype).itemsize >= CUDA_SECTOR_BYTES or \
            group.columns_per_block == group.columns
        others = set().union(*(o for o in owners if o is not own))
        assert not own & others
        for p in plan.passes.passes[:group.start] + plan.passes.passes[group.stop:]:
            assert not own & set(p.reads + p.writes)


@pytest.mark.parametrize("params", MULTI_KERNEL_PLANS, ids=plan_id)
def test_multi_kernel_plan_with_serialized_threads_matches_numpy(params):
    plan = tfft.plan(target="cuda", **params)
    assert plan.kernels > 1
    x, reference = plan_input_and_reference(params)
    assert relative_error(run_cuda_plan_on_llvm(plan, x), reference) <= tolerance(params["n"], plan.dtype)


@pytest.mark.parametrize("params", [dict(n=65536, batch=2), dict(n=3 ** 9, batch=2, dtype="complex128")],
                         ids=plan_id)
def test_six_step_plans_with_a_smaller_shared_memory_match_numpy(params, monkeypatch):
    # with 8 KiB of shared memory per block no single cut fits: two cuts, three kernels (the middle one's columns
    # are both digits of the leading loops and the last loop modulo the deeper cut)
    monkeypatch.setitem(cuda.SHARED_MEMORY_PER_BLOCK, 80, 8 * 1024)
    planner._cached_plan.cache_clear()  # neither reuse nor leave behind a plan of the real limit's rule
    try:
        plan = tfft.plan(target="cuda", **params)
    finally:
        planner._cached_plan.cache_clear()
    assert plan.kernels == 3
    middle = plan.kernel_groups[1]
    assert middle.digits and middle.modulus > 1
    x, reference = plan_input_and_reference(params)
    assert relative_error(run_cuda_plan_on_llvm(plan, x), reference) <= tolerance(params["n"], plan.dtype)


@pytest.mark.parametrize(("n", "fits"), [(40009, 13314), (10007, 53260)], ids=["rader", "bluestein"])
def test_a_global_scratch_beyond_32_bit_indices_is_refused_naming_the_batch(n, fits):
    # one kernel per pass over memory: each scratch buffer is one global allocation for the whole batch, up to twice
    # its data (Rader 40009's sub-transforms, Bluestein 10007's m = 20160); a batch within the input's 32-bit limit
    # planned, and its first call stopped in TVM's FlattenBuffer on an int32 literal (an internal error)
    with pytest.raises(ValueError, match=rf"batch={fits + 1}: the global scratch .* plan at most {fits} transforms"):
        tfft.plan(n, fits + 1, target="cuda")
    plan = tfft.plan(n, fits, target="cuda")
    assert plan.kernels > 1 and not plan.kernel_groups
    assert "__global__" in plan.cuda_source()  # the largest batch that fits builds


@pytest.mark.nvcc
@pytest.mark.parametrize("params", [COLUMN_PLANS[1], COLUMN_PLANS[2], COLUMN_PLANS[4], COLUMN_PLANS[5],
                                    COLUMN_PLANS[10], COLUMN_PLANS[13], PASS_PLANS[0]], ids=plan_id)
def test_multi_kernel_cuda_compiles_with_nvcc(params):
    plan = tfft.plan(target="cuda", **params)
    source = plan.cuda_source("sm_90")
    if plan.kernel_groups:
        # one barrier between consecutive passes of a kernel, at the kernel's top level (not in a loop or guard)
        barriers = sum(g.stop - g.start - 1 for g in plan.kernel_groups)
        assert source.count("__syncthreads()") == barriers
        assert len(re.findall(r"^  __syncthreads\(\);$", source, re.MULTILINE)) == barriers
        for group in plan.kernel_groups:
            assert f"__launch_bounds__({group.threads})" in source
    for arch in ("sm_80", "sm_90"):
        usages = compile_cuda_source(plan.cuda_source(arch), arch)
        assert len(usages) == plan.kernels
        assert all(u.spill_store_bytes == 0 and u.spill_load_bytes == 0 for u in usages)
        for usage in usages:
            print(f"ptxas {plan_id(params)}: {usage}")


@pytest.mark.gpu
@pytest.mark.parametrize("params", MULTI_KERNEL_PLANS, ids=plan_id)
def test_multi_kernel_cuda_plans_run_against_numpy(params):
    plan = tfft.plan(target="cuda", **params)
    x, reference = plan_input_and_reference(params)
    assert relative_error(plan(x), reference) <= tolerance(params["n"], plan.dtype)
