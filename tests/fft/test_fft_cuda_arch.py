"""CUDA plans follow the target's architecture (issue #13): the shared memory per block of
`cuda.SHARED_MEMORY_PER_BLOCK` (`cuda.CudaLimits`), 163 KiB on sm_80, 99 KiB on sm_86, 227 KiB on sm_90. A transform
whose scratch lies between 163 and 227 KiB (n = 12000 complex64: 187.5 KiB) is one kernel on sm_90 and two kernels
over columns on sm_80; a Rader transform of 8191 points (192 KiB) one kernel on sm_90 and one kernel per pass over
memory on sm_80; 7000 complex128 (218.75 KiB) one kernel of 640 threads per block on sm_90. The sm_90 plans compile
with nvcc without spills and mean the same as numpy.fft (their threads serialized on llvm; on a GPU, run). Plans of
different architectures are different problems to the plan cache and the wisdom. A one-kernel plan's block runs 128
threads per 48 KiB of its shared memory (`schedule.cuda_block_threads`).
"""

import dataclasses
import logging
import math
import re

import pytest

from tvm_tailsplit import cuda
from tvm_tailsplit import fft as tfft
from tvm_tailsplit.cuda import CudaLimits, compile_cuda_source, cuda_target, device_arch
from tvm_tailsplit.fft import planner
from tvm_tailsplit.fft.tuning import CUDA_STATIC_SHARED_LIMIT, CUDA_THREADS
from tvm_tailsplit.fft.wisdom import problem_key

from .fft_reference import plan_input_and_reference, relative_error, run_cuda_plan_on_llvm, tolerance

KIB = 1024
BETWEEN = dict(n=12000, batch=2)  # 187.5 KiB of scratch: a chain 2·2·2·3·5·5·5·... (kernels over columns on sm_80)
RADER = dict(n=8191, batch=1)  # 192 KiB of scratch: Rader at the top (one kernel per pass on sm_80)
NEAR_LIMIT = dict(n=7000, batch=2, dtype="complex128")  # 218.75 KiB of 227, 640 threads per block
SM_90_PLANS = [BETWEEN, RADER, NEAR_LIMIT]
SM_90_IDS = ["chain", "rader", "near-limit"]


def plan_for(arch: str, params: dict):
    return tfft.plan(target={"kind": "cuda", "arch": arch}, **params)


@pytest.mark.parametrize("arch, shared", [("sm_80", 163 * KIB), ("sm_86", 99 * KIB), ("sm_89", 99 * KIB),
                                          ("sm_90", 227 * KIB), ("sm_90a", 227 * KIB), ("sm_100a", 227 * KIB),
                                          ("sm_120", 99 * KIB), ("sm_75", 64 * KIB)])
def test_cuda_limits_follow_the_architecture(arch, shared):
    limits = CudaLimits.of(cuda_target(arch))
    assert limits == CudaLimits(arch, 1024, shared)
    assert plan_for(arch, dict(n=64, batch=4)).cuda_limits == limits


def test_an_unknown_architecture_gets_the_default_limits_with_a_warning(caplog, monkeypatch):
    monkeypatch.setattr(cuda, "_warned_architectures", set())
    with caplog.at_level(logging.WARNING, logger="tvm_tailsplit.cuda"):
        limits = CudaLimits.of(cuda_target("sm_61"))
        CudaLimits.of(cuda_target("sm_61"))
    default = CudaLimits.of(cuda_target(cuda.DEFAULT_ARCH))
    assert limits == CudaLimits("sm_61", default.max_threads, default.shared)
    assert len([r for r in caplog.records if "'sm_61'" in r.getMessage()]) == 1  # once per architecture


@pytest.mark.parametrize("params, sm_80_kernels", [(BETWEEN, 2), (RADER, 14)], ids=["chain", "rader"])
def test_scratch_between_163_and_227_kib_is_one_kernel_on_sm_90_only(params, sm_80_kernels):
    sm_80, sm_90 = plan_for("sm_80", params), plan_for("sm_90", params)
    scratch = sm_90._scratch_bytes()
    assert 163 * KIB < scratch <= 227 * KIB
    assert sm_90.kernels == 1 and not sm_90.variant.kernel_per_pass
    assert sm_90.workspace_bytes == scratch > CUDA_STATIC_SHARED_LIMIT  # one block's dynamic shared memory
    assert sm_80.kernels == sm_80_kernels and sm_80.variant.kernel_per_pass
    # 4 spans of 48 KiB: 4 x 128 threads per block (`schedule.cuda_block_threads`); sm_80's kernels scale their own
    assert sm_90.variant.cuda_threads == 4 * CUDA_THREADS
    assert sm_80.variant == dataclasses.replace(sm_90.variant, kernel_per_pass=True, cuda_threads=CUDA_THREADS)
    assert "sm_90: at most 232448 bytes of shared memory per block" in sm_90.describe()
    # the sm_90 plan's variant does not fit an sm_80 block
    with pytest.raises(ValueError, match="at most 166912 on sm_80"):
        planner.Plan(sm_80.spec, sm_80.batch, sm_80.target, sm_80.input_layout, sm_80.output_layout, sm_90.variant)


@pytest.mark.parametrize("params", [BETWEEN, NEAR_LIMIT], ids=["chain", "near-limit"])
def test_the_source_of_an_sm_90_plan_is_refused_for_an_architecture_it_does_not_fit(params):
    # the 187.5 and 218.75 KiB blocks of these sm_90 plans were generated for sm_80 (163 KiB) and sm_86 (99 KiB),
    # a source that compiles and fails at launch
    sm_90 = plan_for("sm_90", params)
    for arch in ("sm_80", "sm_86"):
        with pytest.raises(ValueError, match=rf"arch '{arch}': the plan's kernels use \d+ bytes of shared memory per "
                           rf"block \(planned for sm_90\), more than the \d+ of {arch}"):
            sm_90.cuda_source(arch)
    assert "extern \"C\" __global__" in sm_90.cuda_source("sm_90a")
    # a plan that fits every architecture gives its source for each, a multi-kernel one too
    assert plan_for("sm_80", BETWEEN).cuda_source("sm_86")
    assert plan_for("sm_80", dict(n=64, batch=4)).cuda_source("sm_75")


def test_one_kernel_threads_scale_with_shared_memory():
    assert plan_for("sm_80", dict(n=8192, batch=2)).variant.cuda_threads == 3 * CUDA_THREADS  # 128 KiB
    assert plan_for("sm_80", dict(n=1000, batch=2)).variant.cuda_threads == CUDA_THREADS  # 15.6 KiB
    # with its 32 KiB row, 96 KiB: 384 threads
    assert plan_for("sm_80", dict(n=4096, batch=2, kind="r2c", dtype="complex128")).variant.cuda_threads == 384
    # rows apart (no staged row), 64 KiB: 256 threads, which run its pass of 256 codelet instances in one round,
    # with no loop or guard around its loads from dynamic shared memory (`cuda.scope_dynamic_shared_loads` lets
    # TVM's MergeSharedMemoryAllocations lower them)
    plan = plan_for("sm_80", dict(n=4096, batch=2, kind="r2c", dtype="complex128", idist=4100))
    assert not plan.staged and plan.variant.cuda_threads == 2 * CUDA_THREADS
    assert 2 * CUDA_THREADS in {math.prod(p.loops) for p in plan.passes.passes}
    assert "for (int scope = 0; scope < 1; ++scope)" in plan.cuda_source()


def test_plans_of_different_architectures_are_different_problems():
    sm_80, sm_90 = plan_for("sm_80", BETWEEN), plan_for("sm_90", BETWEEN)
    assert sm_80 is not sm_90 and plan_for("sm_90", BETWEEN) is sm_90
    keys = {problem_key(p.spec, p.batch, p.input_layout, p.output_layout, p.target, 1) for p in (sm_80, sm_90)}
    assert len(keys) == 2  # the wisdom's key holds the target's arch


@pytest.mark.parametrize("params", SM_90_PLANS, ids=SM_90_IDS)
def test_the_sm_90_one_kernel_plan_with_serialized_threads_matches_numpy(params):
    plan = plan_for("sm_90", params)
    x, reference = plan_input_and_reference(params)
    assert relative_error(run_cuda_plan_on_llvm(plan, x), reference) <= tolerance(params["n"], plan.dtype)


@pytest.mark.nvcc
@pytest.mark.parametrize("params", SM_90_PLANS, ids=SM_90_IDS)
def test_the_sm_90_one_kernel_plan_compiles_without_spills(params):
    plan = plan_for("sm_90", params)
    source = plan.cuda_source()  # the plan's own architecture
    assert "extern __shared__" in source
    threads = {int(t) for t in re.findall(r"__launch_bounds__\((\d+)\)", source)}
    assert threads == {plan.variant.cuda_threads}
    usages = compile_cuda_source(source, "sm_90")
    assert len(usages) == 1 and usages[0].spill_store_bytes == 0 and usages[0].spill_load_bytes == 0
    print(f"ptxas {params}: {usages[0]}; dynamic shared memory {plan.workspace_bytes} bytes")


@pytest.mark.gpu
@pytest.mark.parametrize("params", SM_90_PLANS, ids=SM_90_IDS)
def test_plans_for_this_gpus_architecture_run_against_numpy(params):
    # on an H100 (sm_90) one kernel with 187.5 / 192 KiB of dynamic shared memory per block: TVM's runtime must
    # raise the kernel's dynamic shared memory limit for the launch to succeed
    plan = plan_for(device_arch(), params)
    assert (plan.kernels == 1) == (plan._scratch_bytes() <= plan.cuda_limits.shared)
    x, reference = plan_input_and_reference(params)
    assert relative_error(plan(x), reference) <= tolerance(params["n"], plan.dtype)


@pytest.mark.parametrize("present", ["sm_90", None])
def test_the_named_cuda_target_follows_the_gpu_present(monkeypatch, present):
    # "cuda" plans for the GPU of this machine (an H100 user gets 227 KiB blocks), sm_80 where there is none
    monkeypatch.setattr(planner, "device_arch", lambda: present)
    planner._named_target.cache_clear()
    try:
        assert planner._resolve_target("cuda").attrs["arch"] == (present or cuda.DEFAULT_ARCH)
    finally:
        monkeypatch.undo()
        planner._named_target.cache_clear()
    assert planner._resolve_target("cuda").attrs["arch"] == (device_arch() or cuda.DEFAULT_ARCH)
