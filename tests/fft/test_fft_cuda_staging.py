"""One-kernel CUDA plans of several transforms per block stage their rows through shared memory (issue #13).

Before, every thread loaded its own transform's floats straight from global memory (n = 16: 32 scalar loads
`input[blockIdx.x*4096 + threadIdx.x*32 + j]`, each warp-wide load on 32 cache lines). A staged plan copies the
block's contiguous rows in vectors of one complex element, consecutive threads on consecutive vectors, into shared
rows padded to an odd number of vectors, and back out after its last pass (`tuning.CUDA_STAGE_*`). Checked here
without a GPU: the rule's choice, the generated CUDA (vector copies indexed by `threadIdx.x * 2`, no scalar global
access, the padded rows), nvcc for sm_80 and sm_90 without spills within static shared memory, and the meaning on
llvm (threads serialized, shared memory in global memory: `testing.cuda_schedule_for_llvm`) with canary-guarded
buffers and batches that leave a tail block; on a GPU the same plans run against numpy.
"""

import re

import numpy as np
import pytest
import tvm

from tvm_tailsplit import fft as tfft
from tvm_tailsplit.cuda import compile_cuda_source, cuda_ptx
from tvm_tailsplit.fft.schedule import stage_vector_floats, staged_row_floats
from tvm_tailsplit.fft.template import lane_groups
from tvm_tailsplit.fft.tuning import CUDA_STAGE_MIN_LANES, CUDA_STATIC_SHARED_LIMIT
from tvm_tailsplit.testing import cuda_schedule_for_llvm, run_guarded

from .fft_reference import plan_input_and_reference, relative_error, tolerance

C2R = dict(kind="c2r", direction="backward")
STAGED_PLANS = [  # batches that leave a tail block of fewer transforms
    dict(n=2, batch=131),
    dict(n=3, batch=131, dtype="complex128"),
    dict(n=16, batch=300),  # one codelet pass: 128 transforms per block, a tail of 44
    dict(n=16, batch=70, dtype="complex128"),
    dict(n=31, batch=67),
    dict(n=64, batch=37),  # two passes: 16 transforms per block
    dict(n=64, batch=19, dtype="complex128"),
    dict(n=128, batch=11),
    dict(n=256, batch=5),
    dict(n=256, batch=3, dtype="complex128"),
    dict(n=512, batch=5),
    dict(n=32, batch=37, kind="r2c"),
    dict(n=31, batch=11, kind="r2c", dtype="complex128"),  # odd real rows: scalar copies of the input
    dict(n=64, batch=9, kind="r2c"),
    dict(n=32, batch=37, **C2R),
    dict(n=31, batch=11, dtype="complex128", **C2R),
    dict(n=256, batch=3, **C2R),
]
VECTOR = {"complex64": "float2", "complex128": "double2"}


def plan_id(params):
    return "-".join(f"{k}={v}" for k, v in params.items() if k != "direction")


def _plan(params):
    return tfft.plan(target={"kind": "cuda", "arch": "sm_90"}, **params)


BOTH = ("input", "output")


@pytest.mark.parametrize("n, batch, dtype, staged", [
    (16, 10**6, "complex64", BOTH), (64, 10**6, "complex64", BOTH), (256, 10**6, "complex64", BOTH),
    (16, 10**6, "complex128", BOTH), (512, 10**6, "complex128", ()), (1024, 10**6, "complex64", ("input",)),
    (16, 1, "complex64", ())])
def test_blocks_of_several_transforms_stage_their_rows(n, batch, dtype, staged):
    plan = tfft.plan(n, batch, dtype=dtype, target="cuda")
    # both rows: at least CUDA_STAGE_MIN_LANES transforms per block, scratch and rows within static shared memory
    # (blocks of one transform stage their input alone: test_fft_cuda_input_staging.py)
    assert plan.staged == staged
    assert staged != BOTH or (plan.lanes >= CUDA_STAGE_MIN_LANES and plan.workspace_bytes <= CUDA_STATIC_SHARED_LIMIT)
    assert ("copy their input and output rows through shared memory" in plan.describe()) == (staged == BOTH)


@pytest.mark.parametrize("floats, vector, row", [(32, 2, 34), (34, 2, 34), (128, 2, 130), (31, 1, 31), (30, 2, 30)])
def test_staged_rows_are_an_odd_number_of_vectors(floats, vector, row):
    assert stage_vector_floats(floats) == vector and staged_row_floats(floats) == row
    assert row // vector % 2 == 1 and row >= floats


@pytest.mark.parametrize("params", [p for p in STAGED_PLANS if p["n"] in (16, 64, 256)], ids=plan_id)
def test_staged_cuda_accesses_global_memory_in_coalesced_vectors(params):
    plan = _plan(params)
    assert plan.staged
    source = plan.cuda_source("sm_90")
    vector = VECTOR[plan.dtype]
    # no scalar access to the caller's arrays: every one is a vector copy, consecutive threads on consecutive
    # vectors (threadIdx.x * 2 floats), not a transform's row apart (the old threadIdx.x * 32 at n = 16)
    assert "input_ptr[" not in source and "output_ptr[" not in source
    for name in ("input_ptr", "output_ptr"):
        accesses = re.findall(rf"\*\({vector}\*\)\({name} \+ ([^;]*?)\)\)?(?: =|;)", source)
        assert accesses, name
        assert all("((int)threadIdx.x) * 2)" in index for index in accesses), accesses
    # one barrier after the copy in, one before the copy out, one between consecutive passes
    kernels = len(lane_groups(plan.batch, plan.lanes))
    assert source.count("__syncthreads()") == kernels * (len(plan.passes.passes) + 1)
    # the shared rows padded to an odd number of vectors, one array for the input's rows and one for the output's
    declared = [int(size) for size in re.findall(r"__shared__ alignas\(\d+\) \w+ _ptr\w*\[(\d+)\];", source)]
    for _, _, _, width in lane_groups(plan.batch, plan.lanes):
        for layout in (plan.input_layout, plan.output_layout):
            assert width * staged_row_floats(layout.floats()) in declared


@pytest.mark.parametrize("params", STAGED_PLANS, ids=plan_id)
def test_staged_schedule_with_serialized_threads_matches_numpy_with_guarded_buffers(params):
    plan = _plan(params)
    assert plan.staged and plan.batch % plan.lanes  # a full block and a tail block
    executable = tvm.compile(cuda_schedule_for_llvm(plan.module), target="llvm")
    x, reference = plan_input_and_reference(params)
    out = np.zeros(plan.output_shape, plan.real_dtype)
    result = run_guarded(executable, plan.module["main"], [x, out, *plan._constants], {})[1]
    result = result if plan.kind == "c2r" else result[..., 0] + 1j * result[..., 1]
    assert relative_error(result, reference) <= tolerance(params["n"], plan.dtype)


NVCC_PLANS = [STAGED_PLANS[2], STAGED_PLANS[3], STAGED_PLANS[5], STAGED_PLANS[8], STAGED_PLANS[11],
              STAGED_PLANS[14]]


@pytest.mark.nvcc
@pytest.mark.parametrize("params", NVCC_PLANS, ids=plan_id)
def test_staged_cuda_compiles_without_spills_within_static_shared_memory(params):
    plan = _plan(params)
    for arch in ("sm_80", "sm_90"):
        usages = compile_cuda_source(plan.cuda_source(arch), arch)
        assert len(usages) == len(lane_groups(plan.batch, plan.lanes))
        for usage in usages:
            assert usage.spill_store_bytes == 0 and usage.spill_load_bytes == 0 and usage.stack_frame_bytes == 0
            assert 0 < usage.shared_memory_bytes <= CUDA_STATIC_SHARED_LIMIT


@pytest.mark.nvcc
@pytest.mark.parametrize("dtype, vector", [("complex64", "v2"), ("complex128", "v4")])
def test_staged_codelet_moves_complex_elements_as_vectors(dtype, vector):
    # n = 16: one codelet pass, no tables. Every global access is a vector of one complex element (8 or 16 bytes,
    # consecutive threads on consecutive vectors), and nvcc pairs the codelet's re/im accesses to the shared rows
    # into one 8- or 16-byte access: rows an odd number of such vectors apart put a warp's 32 rows in distinct
    # banks (scalar 4-byte accesses at a 34-float stride would meet two to a bank)
    plan = _plan(dict(n=16, batch=300, dtype=dtype))
    for arch in ("sm_80", "sm_90"):
        ptx = cuda_ptx(plan.cuda_source(arch), arch)
        memory = re.findall(r"\b(ld|st)\.(global|shared)(?:\.nc)?\.(v\d\.)?\w+", ptx)
        assert memory and all(width == f"{vector}." for _, space, width in memory if space == "global"), memory
        shared = [width for _, space, width in memory if space == "shared"]
        assert shared and all(width for width in shared), shared


@pytest.mark.gpu
@pytest.mark.parametrize("params", STAGED_PLANS, ids=plan_id)
def test_staged_plans_run_against_numpy_on_the_gpu(params):
    plan = tfft.plan(target="cuda", **params)
    x, reference = plan_input_and_reference(params)
    result = plan(x)
    assert relative_error(result, reference) <= tolerance(params["n"], plan.dtype)
