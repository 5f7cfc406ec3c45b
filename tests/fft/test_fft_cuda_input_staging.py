"""One-kernel CUDA plans of one transform per block stage their input row through shared memory (issue #13).

Before, the first pass read its codelet's elements straight from global memory, its fastest-changing thread index
being the pass's last loop digit: neighbouring threads a codelet stride apart (n = 1024: a warp-wide load on 16
sectors of 32 bytes where 8 would do; 27 at n = 1000, 32 at n = 4096). With `Variant.stage_input` (the rule
`tuning.CUDA_STAGE_INPUT`) the block copies its contiguous row to shared memory in vectors of one complex element,
consecutive threads on consecutive vectors, behind one barrier; the first pass reads it there, and the last pass
stores to global memory as before (already consecutive threads on consecutive complex elements). Checked here
without a GPU: the rule's choice (shared memory per block, strided input), a pass that the block's threads run in
one round in dynamic shared memory, the search's axis, the generated CUDA (the sectors of a warp's first loads and last
stores, the barrier), nvcc for sm_80 and sm_90 without spills, and the meaning on llvm (threads serialized, shared
memory in global memory) against numpy with canary-guarded outputs; on a GPU the same plans run against numpy.
"""

import dataclasses
import math
import re

import numpy as np
import pytest
import tvm

from tvm_tailsplit import fft as tfft
from tvm_tailsplit.cuda import CudaLimits, compile_cuda_source, cuda_ptx
from tvm_tailsplit.fft import planner
from tvm_tailsplit.fft.search import axes
from tvm_tailsplit.fft.spec import FFTSpec
from tvm_tailsplit.fft.template import stage_vector_floats, staged_float
from tvm_tailsplit.fft.tuning import CUDA_STAGE_SKEW_VECTORS, CUDA_STATIC_SHARED_LIMIT, CUDA_THREADS
from tvm_tailsplit.fft.variants import Variant, estimate_variant

from .fft_reference import plan_input_and_reference, relative_error, run_cuda_plan_on_llvm, tolerance

C2R = dict(kind="c2r", direction="backward")
SM_90 = {"kind": "cuda", "arch": "sm_90"}
STAGED_PLANS = [  # one transform per block, one kernel, the input row staged
    dict(n=1000, batch=2),  # Cooley-Tukey 5·5·5·8, a guarded last round of the copy
    dict(n=1024, batch=3),
    dict(n=4096, batch=2),  # dynamic shared memory (96 KiB), 384 threads
    dict(n=1009, batch=2),  # Rader: the first pass gathers the input through the permutation
    dict(n=4099, batch=2),  # Bluestein
    dict(n=1000, batch=2, dtype="complex128"),
    dict(n=1024, batch=2, kind="r2c"),
    dict(n=1009, batch=2, kind="r2c"),  # an odd real row: scalar copies
    dict(n=4096, batch=2, kind="r2c", dtype="complex128"),
    dict(n=1000, batch=2, **C2R),
    dict(n=1024, batch=2, dtype="complex128", **C2R),
    dict(n=1024, batch=2, dtype="complex128"),  # 48.5 KiB: dynamic shared memory
]
ONE_ROUND = dict(n=1024, batch=3, dtype="complex128")
SECTOR = 32
VECTOR = {"float32": "float2", "float64": "double2"}


def plan_id(params):
    return "-".join(f"{k}={v}" for k, v in params.items() if k not in ("direction", "target"))


def _warp_sectors(index: str, itemsize: int, floats: int) -> int:
    """The 32-byte sectors that threads 0-31 of block 0 touch with an access of `floats` floats at the CUDA index
    expression `index` (every other loop variable 0)."""
    expression = index.replace("((int)threadIdx.x)", "THREAD").replace("((int)blockIdx.x)", "0")
    expression = re.sub(r"\b(?!THREAD\b)[A-Za-z_]\w*\b", "0", expression).replace("/", "//")
    sectors = set()
    for thread in range(32):
        start = eval(expression, {"THREAD": thread}) * itemsize  # noqa: S307 - an integer expression of the CUDA
        sectors.update(range(start // SECTOR, (start + floats * itemsize - 1) // SECTOR + 1))
    return len(sectors)


def _accesses(source: str, name: str) -> list[tuple[str, int]]:
    """(index, floats) of every access to `name` in the CUDA source: vectors `*(float2*)(name + index)` and scalars
    `name[index]`, in source order."""
    found = []
    for match in re.finditer(rf"\*\((?:float2|double2)\*\)\({name} \+ |{name}\[", source):
        depth, position = 1, match.end()
        while depth:
            depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(source[position], 0)
            position += 1
        found.append((source[match.end():position - 1], 2 if match.group().startswith("*") else 1))
    return found


@pytest.mark.parametrize("params, arch, staged", [
    (dict(n=1000, batch=8388), "sm_90", ("input",)),
    (dict(n=1024, batch=8192), "sm_80", ("input",)),
    (dict(n=4096, batch=2048), "sm_90", ("input",)),
    (dict(n=12000, batch=699), "sm_90", ()),  # 188 KiB of scratch: its 94 KiB row does not fit in 227 KiB
    (dict(n=12000, batch=699, kind="r2c"), "sm_90", ("input",)),
    # 32 KiB of scratch and a 16 KiB row: dynamic shared memory (`cuda.scope_dynamic_shared_loads` lets TVM lower
    # a pass that the block's threads run in one round)
    (dict(n=1024, batch=8192, dtype="complex128"), "sm_90", ("input",)),
    (dict(n=1024, batch=8, idist=1030), "sm_90", ()),  # rows apart: read in place
    (dict(n=16, batch=1), "sm_90", ()),  # one pass (no scratch): each element read once, where its codelet needs it
])
def test_blocks_of_one_transform_stage_their_input_row(params, arch, staged):
    plan = tfft.plan(target={"kind": "cuda", "arch": arch}, **params)
    assert plan.kernels == 1 and plan.lanes == 1 and plan.staged == staged
    assert plan.variant.stage_input == bool(staged)
    if staged:
        row = plan.input_layout.floats() * np.dtype(plan.real_dtype).itemsize
        assert plan.workspace_bytes >= plan._scratch_bytes() + row
        assert plan.workspace_bytes <= plan.cuda_limits.shared
        assert "CUDA blocks of 1 transform copy their input row through shared memory" in plan.describe()


def _one_round_plan(target) -> planner.Plan:
    # n = 1024 complex128: 32 KiB of scratch and a 16 KiB staged input row, dynamic shared memory; at 128 threads
    # its passes of 128 codelet instances run in one round, their loads from shared memory bound at the kernel's
    # top level, where TVM's MergeSharedMemoryAllocations alone stops (`cuda.scope_dynamic_shared_loads`)
    plan = tfft.plan(1024, 3, dtype="complex128", target=target)
    one_round = planner.Plan(plan.spec, plan.batch, plan.target, plan.input_layout, plan.output_layout,
                             dataclasses.replace(plan.variant, cuda_threads=CUDA_THREADS))
    assert one_round.staged == ("input",) and one_round.workspace_bytes > CUDA_STATIC_SHARED_LIMIT
    assert CUDA_THREADS in {math.prod(p.loops) for p in one_round.passes.passes}
    return one_round


def test_a_plan_whose_passes_run_one_round_in_dynamic_shared_memory_compiles_and_means_the_fft():
    plan = _one_round_plan(SM_90)
    source = plan.cuda_source()
    assert "extern __shared__" in source and source.count("for (int scope = 0; scope < 1; ++scope)") == 1
    x, reference = plan_input_and_reference(ONE_ROUND)
    assert relative_error(run_cuda_plan_on_llvm(plan, x), reference) <= tolerance(1024, plan.dtype)


@pytest.mark.nvcc
def test_the_one_round_plan_compiles_with_nvcc_without_spills():
    usages = compile_cuda_source(_one_round_plan(SM_90).cuda_source(), "sm_90")
    assert len(usages) == 1 and usages[0].spill_store_bytes == usages[0].spill_load_bytes == 0


@pytest.mark.gpu
def test_the_one_round_plan_runs_against_numpy_on_the_gpu():
    plan = _one_round_plan("cuda")  # the GPU's architecture: 48.5 KiB of dynamic shared memory on any
    x, reference = plan_input_and_reference(ONE_ROUND)
    assert relative_error(plan(x), reference) <= tolerance(1024, plan.dtype)


def test_stage_input_is_a_variant_field_that_the_cuda_search_tries():
    spec = FFTSpec(1024)
    limits = CudaLimits.of(tvm.target.Target(SM_90))
    estimate = estimate_variant(spec, 8192, limits)
    assert estimate.stage_input and not estimate_variant(spec, 8192, None).stage_input  # llvm: no such choice
    # the field is part of the variant's identity (plan cache and wisdom keep `to_dict`); wisdom recorded before it
    # reads back as the plan it timed (the input read in place)
    fields = estimate.to_dict()
    assert fields["stage_input"] is True and Variant(**fields) == estimate
    del fields["stage_input"]
    assert not Variant(**fields).stage_input
    with pytest.raises(TypeError, match="stage_input must be a bool"):
        dataclasses.replace(estimate, stage_input=1)
    assert axes(estimate, estimate, 8192, True, 1, False)["staging"] == [{"stage_input": False}]
    several = estimate_variant(FFTSpec(64), 8192, limits)  # blocks of 16 transforms stage both rows
    assert several.lanes > 1 and "staging" not in axes(several, several, 8192, True, 1, False)
    assert "staging" not in axes(estimate, estimate, 8192, False, 1, False)


@pytest.mark.parametrize("params", [dict(n=1000, batch=2), dict(n=1024, batch=3), dict(n=4096, batch=2),
                                    dict(n=1000, batch=2, dtype="complex128"), dict(n=1024, batch=2, kind="r2c"),
                                    dict(n=1000, batch=2, **C2R), STAGED_PLANS[11]], ids=plan_id)
def test_first_loads_are_whole_sectors_per_warp_and_last_stores_stay_coalesced(params):
    plan = tfft.plan(target=SM_90, **params)
    assert plan.staged == ("input",)
    itemsize = np.dtype(plan.real_dtype).itemsize
    source = plan.cuda_source("sm_90")
    # every access to the input is the copy: vectors of one complex element (two reals), threadIdx.x-linear, so a
    # warp reads 32 consecutive vectors: 256 bytes (complex64) or 512 (complex128), 8 or 16 whole sectors
    loads = _accesses(source, "input_ptr")
    vector = stage_vector_floats(plan.input_layout.floats())
    assert loads and all(floats == vector for _, floats in loads), loads
    assert all("((int)threadIdx.x) * 2)" in index for index, _ in loads), loads
    assert f"*({VECTOR[plan.real_dtype]}*)(input_ptr + " in source
    assert {_warp_sectors(index, itemsize, floats) for index, floats in loads} == {32 * 2 * itemsize // SECTOR}
    # one barrier after the copy, one between consecutive passes
    assert source.count("__syncthreads()") == len(plan.passes.passes)
    # the read in place, for comparison: the first pass's first load of a warp touches sectors it uses only in part
    in_place = planner.Plan(plan.spec, plan.batch, plan.target, plan.input_layout, plan.output_layout,
                            dataclasses.replace(plan.variant, stage_input=False))
    first, floats = next(access for access in _accesses(in_place.cuda_source("sm_90"), "input_ptr")
                         if "threadIdx" in access[0])
    assert _warp_sectors(first, itemsize, floats) * SECTOR > 32 * floats * itemsize
    stores = _accesses(source, "output_ptr")
    if plan.kind != "c2r":  # every complex element stored as one vector of its two parts (`template`)
        assert stores and all(floats == 2 for _, floats in stores), stores
        assert f"*({VECTOR[plan.real_dtype]}*)(output_ptr + " in source
    if plan.kind == "c2c":
        # the last pass's stores: consecutive threads on consecutive complex elements, a warp's store 8 (16) whole
        # sectors
        assert all("((int)threadIdx.x) * 2)" in index for index, _ in stores), stores
        assert {_warp_sectors(index, itemsize, 2) for index, _ in stores} == {32 * 2 * itemsize // SECTOR}


@pytest.mark.parametrize("floats", [2048, 2002, 1009, 64, 66])
def test_a_row_of_one_transform_is_skewed_by_whole_vectors(floats):
    vector = stage_vector_floats(floats)
    places = [staged_float(offset, floats, True) for offset in range(floats)]
    assert len(set(places)) == floats and places == sorted(places)
    assert all(places[i + 1] == places[i] + 1 for i in range(0, floats - 1, vector) if vector == 2)  # whole vectors
    assert all(place % vector == offset % vector for offset, place in enumerate(places))  # aligned
    assert places[-1] - (floats - 1) == vector * ((floats - 1) // (vector * CUDA_STAGE_SKEW_VECTORS))
    assert [staged_float(offset, floats, False) for offset in range(floats)] == list(range(floats))


def test_first_pass_reads_the_skewed_row_in_few_banks():
    # n = 1024: the first pass reads a warp's elements 32 complex elements apart (16 floats between its threads'
    # groups): in place in the row they met 8 to a bank; skewed, at most 4
    plan = tfft.plan(1024, 8192, target=SM_90)
    source = plan.cuda_source("sm_90")
    row = re.search(rf"__shared__ alignas\(\d+\) float (\w+)\[{staged_float(2047, 2048, True) + 1}\];", source)
    reads = [index for index, _ in _accesses(source, row.group(1)) if "threadIdx" in index]
    assert len(reads) == 2 * 8 + 1  # the copy's vector store, the first pass's 8 complex elements per thread
    ways = []
    for index in reads:
        expression = index.replace("((int)threadIdx.x)", "THREAD")
        expression = re.sub(r"\b(?!THREAD\b)[A-Za-z_]\w*\b", "0", expression)
        banks: dict[int, set] = {}
        for thread in range(32):
            word = eval(expression, {"THREAD": thread})  # noqa: S307 - an integer expression of the CUDA
            banks.setdefault(word % 32, set()).add(word // 32)
        ways.append(max(map(len, banks.values())))
    assert max(ways) <= 4, ways


@pytest.mark.parametrize("params", STAGED_PLANS, ids=plan_id)
def test_staged_input_with_serialized_threads_matches_numpy_with_guarded_output(params):
    plan = tfft.plan(target="cuda", **params)
    assert plan.staged == ("input",)
    x, reference = plan_input_and_reference(params)
    assert relative_error(run_cuda_plan_on_llvm(plan, x), reference) <= tolerance(params["n"], plan.dtype)


def test_staged_sm_90_plan_of_12000_with_serialized_threads_matches_numpy():
    params = dict(n=12000, batch=1, kind="r2c")
    plan = tfft.plan(target=SM_90, **params)
    assert plan.kernels == 1 and plan.staged == ("input",)
    x, reference = plan_input_and_reference(params)
    assert relative_error(run_cuda_plan_on_llvm(plan, x), reference) <= tolerance(params["n"], plan.dtype)


@pytest.mark.nvcc
@pytest.mark.parametrize("params", [STAGED_PLANS[0], STAGED_PLANS[2], STAGED_PLANS[3], STAGED_PLANS[4],
                                    STAGED_PLANS[8], STAGED_PLANS[9], STAGED_PLANS[11]], ids=plan_id)
def test_staged_input_compiles_without_spills(params):
    plan = tfft.plan(target="cuda", **params)
    vector = {"float32": "v2.u32", "float64": "v4.u32"}[plan.real_dtype]  # nvcc moves the copy's vectors as words
    for arch in ("sm_80", "sm_90"):
        source = plan.cuda_source(arch)
        usages = compile_cuda_source(source, arch)
        assert len(usages) == 1 and usages[0].spill_store_bytes == usages[0].spill_load_bytes == 0
        assert usages[0].stack_frame_bytes == 0
        # the input's loads (the copy) and the output's stores are 8- or 16-byte vectors; the scalar global loads
        # left are the tables' (twiddles, Rader and Bluestein kernels)
        memory = re.findall(r"\b(ld|st)\.global(?:\.nc)?\.((?:v\d\.)?\w+)", cuda_ptx(source, arch))
        assert any(access == ("ld", vector) for access in memory), memory
        stores = {width for op, width in memory if op == "st"}
        assert stores == ({"v2.f32"} if plan.real_dtype == "float32" else {"v2.f64"}) or plan.kind == "c2r", stores


@pytest.mark.gpu
@pytest.mark.parametrize("params", STAGED_PLANS + [dict(n=12000, batch=3), dict(n=12000, batch=3, kind="r2c")],
                         ids=plan_id)
def test_staged_input_plans_run_against_numpy_on_the_gpu(params):
    plan = tfft.plan(target="cuda", **params)  # the GPU's architecture (12000: one kernel on sm_90, two on sm_80)
    x, reference = plan_input_and_reference(params)
    assert relative_error(plan(x), reference) <= tolerance(params["n"], plan.dtype)
    if plan.kind == "c2c":  # in place: the staged row is read before the last pass overwrites the input
        y = tvm.runtime.tensor(x, tvm.cuda(0))
        plan(y, out=y)
        assert relative_error(y.numpy().view(plan.dtype)[..., 0], reference) <= tolerance(params["n"], plan.dtype)
