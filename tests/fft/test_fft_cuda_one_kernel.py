"""One-kernel CUDA plans (scratch in shared memory): every pass binds the same threads, one barrier between passes.

Issue #13: a plan whose scratch exceeds 48 KiB (dynamic shared memory) bound `threadIdx.x` with a different extent
in each pass, and TVM compiled that kernel with one thread, which computed garbage (plan(2879, 2, target="cuda"):
relative error 1.33 on an H100). The generated CUDA is checked here without a GPU: one thread extent per kernel,
exactly one `__syncthreads()` between consecutive passes and none inside a pass, nvcc compiles it without spills.
Its meaning is checked on llvm: the scheduled CUDA module with its threads serialized, shared memory in global
memory and its barriers dropped (exact, as the barriers separate the passes), against numpy.fft. The matrix covers
each breakdown (codelet, Cooley-Tukey, Rader, Bluestein) with static (<= 48 KiB) and dynamic shared scratch, c2c,
r2c and c2r (even and odd n), complex64 and complex128; multi-kernel plans are in test_fft_cuda_multikernel.py
(Rader and Bluestein ones here). On a GPU the same plans run against numpy.
"""

import math
import re

import pytest
import tvm

from tvm_tailsplit import fft as tfft
from tvm_tailsplit.cuda import compile_cuda_source
from tvm_tailsplit.fft.template import assign_buffers, lane_groups
from tvm_tailsplit.fft.tuning import CUDA_STATIC_SHARED_LIMIT
from tvm_tailsplit.ir_utils import map_loops

from .fft_reference import plan_input_and_reference, relative_error, run_cuda_plan_on_llvm, tolerance

C2R = dict(kind="c2r", direction="backward")
STATIC_PLANS = [  # scratch <= 48 KiB: static shared memory
    dict(n=16, batch=3),  # one codelet, no scratch
    dict(n=16, batch=300),  # 128 transforms per block, a tail block of 44
    dict(n=64, batch=37, dtype="complex128"),  # 16 transforms per block (8 instances each), a tail of 5
    dict(n=32, batch=2, kind="r2c", dtype="complex128"),
    dict(n=32, batch=2, **C2R),
    dict(n=1000, batch=2, dtype="complex128"),  # Cooley-Tukey
    dict(n=1000, batch=2, kind="r2c"),
    dict(n=1000, batch=2, dtype="complex128", **C2R),
    dict(n=97, batch=3),  # Rader
    dict(n=1009, batch=2, kind="r2c"),
    dict(n=97, batch=2, dtype="complex128", **C2R),
    dict(n=593, batch=2, dtype="complex128"),  # Bluestein (719: its staged input row makes it dynamic)
    dict(n=719, batch=2, kind="r2c"),
    dict(n=719, batch=2, **C2R),
]
DYNAMIC_PLANS = [  # 48 KiB < scratch <= 163 KiB: dynamic shared memory
    dict(n=8192, batch=2),  # Cooley-Tukey
    dict(n=4096, batch=2, kind="r2c", dtype="complex128"),
    dict(n=8192, batch=2, **C2R),
    dict(n=2003, batch=2, dtype="complex128"),  # Rader
    dict(n=3001, batch=2, kind="r2c"),
    dict(n=2003, batch=2, **C2R),
    dict(n=2879, batch=2),  # Bluestein (the plans)
    dict(n=4099, batch=2),
    dict(n=2879, batch=2, kind="r2c"),
    dict(n=2879, batch=2, **C2R),
]
MULTI_KERNEL_PLANS = [  # scratch > 163 KiB: one kernel per pass
    dict(n=8191, batch=1),  # Rader
    dict(n=4099, batch=2, dtype="complex128"),  # Bluestein
    dict(n=2879, batch=2, dtype="complex128", **C2R),
]
ONE_KERNEL_PLANS = STATIC_PLANS + DYNAMIC_PLANS


def plan_id(params):
    return "-".join(f"{k}={v}" for k, v in params.items() if k != "direction")


def _thread_extents(mod: tvm.IRModule) -> set[int]:
    extents = set()

    def visit(loop):
        if loop.kind == tvm.tirx.ForKind.THREAD_BINDING and loop.thread_binding.thread_tag == "threadIdx.x":
            extents.add(int(loop.extent))
        return loop

    map_loops(mod, visit)
    return extents


def test_the_matrix_spans_static_and_dynamic_shared_memory():
    for plans, dynamic in ((STATIC_PLANS, False), (DYNAMIC_PLANS, True)):
        for params in plans:
            plan = tfft.plan(target="cuda", **params)
            assert plan.kernels == 1, params
            assert (plan.workspace_bytes > CUDA_STATIC_SHARED_LIMIT) == dynamic, (params, plan.workspace_bytes)
    for params in MULTI_KERNEL_PLANS:
        assert tfft.plan(target="cuda", **params).kernels > 1


@pytest.mark.parametrize("params", ONE_KERNEL_PLANS + MULTI_KERNEL_PLANS, ids=plan_id)
def test_no_pass_reads_the_scratch_it_writes(params):
    # why no barrier is needed inside a pass: its instances only read buffers that the pass does not write (the
    # physical scratch buffers, shared by logical ones of disjoint live ranges), so each thread reads elements
    # that earlier passes wrote, behind the barrier before the pass
    plan = tfft.plan(target="cuda", **params)
    physical = assign_buffers(plan.passes)
    for p in plan.passes.passes:
        reads = {physical.get(b, b) for b in p.reads}
        writes = {physical.get(b, b) for b in p.writes}
        assert not reads & writes, (p.name, p.reads, p.writes)


@pytest.mark.parametrize("params", ONE_KERNEL_PLANS, ids=plan_id)
def test_one_kernel_binds_one_thread_extent_with_a_barrier_between_passes(params):
    plan = tfft.plan(target="cuda", **params)
    passes = len(plan.passes.passes)
    extents = _thread_extents(plan.module)
    assert len(extents) == 1, extents  # one kernel, one extent of threadIdx.x for all its passes
    width = extents.pop()
    # codelet instances of the largest pass, for every transform of a lane group
    work = plan.lanes * max(math.prod(p.loops) for p in plan.passes.passes)
    assert width == min(plan.variant.cuda_threads, work)
    source = plan.cuda_source("sm_80")
    # one kernel per kind of lane group (the full groups, and a tail group of batch % lanes transforms)
    kernels = len(lane_groups(plan.batch, plan.lanes))
    assert source.count("__global__ void") == 2 * kernels  # declaration and definition of each kernel
    if width > 1:
        assert "threadIdx.x" in source and f"__launch_bounds__({width})" in source
    # exactly one barrier between consecutive passes (and after and before the copies of staged rows,
    # test_fft_cuda_staging.py), each at the top level of the kernel (not in a loop or guard)
    barriers = kernels * (passes - 1 + len(plan.staged))
    assert source.count("__syncthreads()") == barriers
    assert len(re.findall(r"^  __syncthreads\(\);$", source, re.MULTILINE)) == barriers
    scope = "extern __shared__" if plan.workspace_bytes > CUDA_STATIC_SHARED_LIMIT else "__shared__"
    assert plan.workspace_bytes == 0 or scope in source


@pytest.mark.parametrize("params", ONE_KERNEL_PLANS + MULTI_KERNEL_PLANS, ids=plan_id)
def test_cuda_schedule_with_serialized_threads_matches_numpy(params):
    plan = tfft.plan(target="cuda", **params)
    x, reference = plan_input_and_reference(params)
    assert relative_error(run_cuda_plan_on_llvm(plan, x), reference) <= tolerance(params["n"], plan.dtype)


# Bluestein static; Cooley-Tukey, Rader and the two Bluestein plans of the issue in dynamic shared memory
NVCC_PLANS = [STATIC_PLANS[9], DYNAMIC_PLANS[0], DYNAMIC_PLANS[3], DYNAMIC_PLANS[6], DYNAMIC_PLANS[7]]


@pytest.mark.nvcc
@pytest.mark.parametrize("params", NVCC_PLANS, ids=plan_id)
def test_one_kernel_cuda_compiles_without_spills(params):
    plan = tfft.plan(target="cuda", **params)
    for arch in ("sm_80", "sm_90"):
        usages = compile_cuda_source(plan.cuda_source(arch), arch)
        assert len(usages) == 1 and usages[0].spill_store_bytes == 0 and usages[0].spill_load_bytes == 0
        print(f"ptxas {plan_id(params)}: {usages[0]}; shared memory {plan.workspace_bytes} bytes")


@pytest.mark.gpu
@pytest.mark.parametrize("params", ONE_KERNEL_PLANS + MULTI_KERNEL_PLANS, ids=plan_id)
def test_cuda_plans_run_against_numpy_on_the_gpu(params):
    plan = tfft.plan(target="cuda", **params)
    x, reference = plan_input_and_reference(params)
    assert relative_error(plan(x), reference) <= tolerance(params["n"], plan.dtype)


@pytest.mark.parametrize("n, batch, lanes", [(16, 10**6, 128), (16, 100, 64), (16, 1, 1), (64, 10**6, 16),
                                             (256, 10**6, 2), (1024, 10**6, 1), (1000, 10**6, 1), (4096, 10**5, 1)])
def test_cuda_blocks_hold_transforms_to_fill_their_threads(n, batch, lanes):
    # the rules' lanes on CUDA: a power of two, the largest pass's instances of all lanes within CUDA_THREADS,
    # at most the batch, the block's scratch within static shared memory
    plan = tfft.plan(n, batch, target="cuda")
    assert plan.lanes == lanes
    work = max(math.prod(p.loops) for p in plan.passes.passes)
    assert lanes * work <= max(work, plan.variant.cuda_threads) and plan.workspace_bytes * (lanes > 1) <= \
        CUDA_STATIC_SHARED_LIMIT


@pytest.mark.parametrize("n, batch", [(256, 4), (512, 4), (1024, 1), (16, 128), (64, 32)])
def test_every_physical_scratch_buffer_keeps_its_own_shared_array(n, batch):
    # TVM's StorageRewrite (which relies on ThreadSync's barriers) merged the two scratch buffers of n = 256 and
    # n = 512 (two transforms per block) into one array, although the middle pass reads one and writes the other
    # in a single round of threads: one warp's writes could overwrite what another warp had still to read. One-kernel
    # plans compile without it: one static array per physical scratch buffer (and per staged rows)
    plan = tfft.plan(n, batch, target="cuda")
    assert plan.kernels == 1 and batch % plan.lanes == 0
    source = plan.cuda_source("sm_80")
    arrays = re.findall(r"__shared__ alignas\(\d+\) \w+ _ptr\w*\[\d+\];", source)
    assert len(arrays) == len(set(assign_buffers(plan.passes).values())) + len(plan.staged)
