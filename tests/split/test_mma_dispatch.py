"""The tensor-core matmul for a symbolic M with the tiling rule's kernel for every M
(``mma_schedule.tiling_intervals``, ``matmul_mma_cuda_dispatch``).

The intervals are the rule itself, checked for every M up to ``SYMBOLIC_M`` on several shapes and SM counts.
Without a GPU, on a small shape with seven intervals: the host runs exactly the rule's case for every M in
0..1000 (none for 0); TailSplit, the merge and the stores mapped over all the cases at once leave every mark a
main tile or a store tail; the dispatched function means the matmul on llvm (threads as serial loops, C
canary-guarded) on both sides of every boundary, and so does its padded form (the tail benchmark's (b)). For
CUDA (1024 x 256, six intervals): each case is a kernel launched with its own tiling's threads, holding the whole
tensor-core pipeline (mma.sync, ldmatrix, cp.async), and nvcc compiles each as it compiles the tiling's kernel
alone. On a GPU:
M on both sides of every boundary of 4096 x 4096, against numpy."""

from __future__ import annotations

import re

import pytest
import tvm
from tvm import tirx

from tvm_tailsplit.cuda import SYMBOLIC_M, compile_cuda_source, cuda_source, cuda_target, executable_cuda_source
from tvm_tailsplit.split import analysis
from tvm_tailsplit.split import mma_schedule as ms
from tvm_tailsplit.split.mma_pipeline import MMA_PIPELINE
from tvm_tailsplit.testing import dispatched_labels, evaluate, host_after_packed_api, host_launches

from .test_mma_workload import run_on_gpu, run_on_llvm, stores_mapped, sweep_pairs

# N, K and SM count of the llvm checks: seven intervals of M, the last open at 897
SMALL = (100, 40, 8)


@pytest.mark.parametrize(("n", "k", "sm_count"), [(4096, 4096, 132), (1000, 1000, 132), (255, 129, 132),
                                                  (45, 20, 4), SMALL, (64, 40, 8), (4096, 4096, 16)])
def test_intervals_are_the_rule(n, k, sm_count):
    intervals = ms.tiling_intervals(n, k, sm_count)
    assert intervals[0][0] == 1 and intervals[-1][1] is None
    for (_, last, tiling), (first, _, following) in zip(intervals, intervals[1:], strict=False):
        assert first == last + 1 and following != tiling
    for first, last, tiling in intervals:
        for m in range(first, SYMBOLIC_M + 1 if last is None else last + 1):
            assert ms.choose_tiling(m, n, k, sm_count) == tiling, m
    assert intervals[-1][2] == ms.choose_tiling(None, n, k, sm_count)


def test_decode_shapes_get_thin_tiles():
    """N = K = 4096 on 132 SMs: 16-row tiles up to M = 16, the 128 x 128 tile from M = 385."""
    blocks = [(first, last, tiling.block_tile) for first, last, tiling in ms.tiling_intervals(4096, 4096)]
    assert blocks == [(1, 16, (16, 32)), (17, 32, (32, 32)), (33, 64, (64, 32)), (65, 128, (64, 64)),
                      (129, 384, (128, 64)), (385, None, (128, 128))]


@pytest.fixture(scope="module")
def small_dispatch():
    """The dispatched SMALL matmul without the software pipeline, split, merged and its stores mapped."""
    report = []
    mapped = stores_mapped(ms.matmul_mma_cuda_dispatch(*SMALL[:2], pipeline=False, sm_count=SMALL[2]), report)
    return mapped, report


def label(tiling: ms.MmaTiling) -> str:
    return "t{}x{}".format(*tiling.block_tile)


def test_every_case_splits_and_maps(small_dispatch):
    """Every mark of every case is a tensorized main tile or a store tail (no guard is left under a mark)."""
    _, report = small_dispatch
    assert {r.action for r in report} <= {"tensorized", "variable_length"}, [str(r) for r in report]
    labels = {re.search(r"_(t\d+x\d+)", r.block).group(1) for r in report}
    assert labels == {label(tiling) for _, _, tiling in ms.tiling_intervals(*SMALL)} and len(labels) == 7


def test_the_host_picks_the_rules_kernel_for_every_m(small_dispatch):
    """For every M in 0..1000 exactly the case of the rule's tiling runs (none for M = 0)."""
    func = small_dispatch[0]["main"]
    labels = {label(tiling) for _, _, tiling in ms.tiling_intervals(*SMALL)}
    for value in range(0, 1001):
        want = [] if value == 0 else [label(ms.choose_tiling(min(value, SYMBOLIC_M), *SMALL))]
        assert dispatched_labels(func, func.params[0].shape[0], value, labels) == want, value


def test_every_m_runs_its_interval_kernel_on_llvm(small_dispatch):
    """The dispatched function specialized to M on both sides of every boundary, and M = 900 (above the last),
    each compiled for llvm (threads as serial loops; the llvm form of a symbolic M overflows int32 in TVM's
    lowering of the whole-warp buffers, as in ``test_mma_workload``): the matmul, C canary-guarded."""
    func = small_dispatch[0]["main"]
    a = func.params[0]
    boundaries = [first for first, _, _ in ms.tiling_intervals(*SMALL)]
    for m in sorted({1, 900} | set(boundaries) | {b - 1 for b in boundaries[1:]}):
        specialized = func.specialize({a: tirx.decl_buffer((m, SMALL[1]), a.dtype, a.name)})
        run_on_llvm(tvm.IRModule({"main": specialized}), m, *SMALL[:2])


def test_padded_dispatch_means_the_matmul_on_llvm():
    """(b): pad_einsum to whole thread-block tiles of each case's tiling, with the padded C copied back; no mark
    carries a guard."""
    mod = ms.matmul_mma_cuda_dispatch(*SMALL[:2], pipeline=False, pad_to_blocks=True, padded_output=True,
                                      sm_count=SMALL[2])
    assert analysis.conditions_under_marks(mod) == 0
    func = mod["main"]
    a = func.params[0]
    for m in (1, 33, 129, 900):
        specialized = func.specialize({a: tirx.decl_buffer((m, SMALL[1]), a.dtype, a.name)})
        run_on_llvm(tvm.IRModule({"main": specialized}), m, *SMALL[:2])


@pytest.fixture(scope="module")
def dispatch_build():
    """The N = 1024, K = 256 dispatch (six intervals) compiled for sm_90: its lowered host function and CUDA."""
    host, executable = host_after_packed_api(ms.matmul_mma_cuda_dispatch(1024, 256), cuda_target("sm_90"),
                                             MMA_PIPELINE)
    return host, executable_cuda_source(executable)


@pytest.fixture(scope="module")
def dispatch_source(dispatch_build):
    return dispatch_build[1]


def test_the_lowered_host_launches_the_rules_kernel_for_every_m(dispatch_build):
    """The host code TVM lowers the dispatch to: each case's ``if`` launches its kernel alone, and for every M in
    0..1000 exactly the kernel of the rule's tiling is launched (none for 0)."""
    launches = host_launches(dispatch_build[0])
    tilings = [tiling for _, _, tiling in ms.tiling_intervals(1024, 256)]
    names = ["main_kernel" + (f"_{index}" if index else "") for index in range(len(tilings))]
    assert [kernels for _, kernels in launches] == [[name] for name in names]
    for value in range(0, 1001):
        running = [kernels[0] for condition, kernels in launches if evaluate(condition, {"m": value})]
        want = [] if value == 0 else [names[tilings.index(ms.choose_tiling(min(value, SYMBOLIC_M), 1024, 256))]]
        assert running == want, value


def test_each_case_is_a_kernel_with_its_tilings_threads(dispatch_source):
    kernels = dict((name, int(threads)) for threads, name in
                   re.findall(r"__launch_bounds__\((\d+)\) (\w+)\(", dispatch_source))
    tilings = [tiling for _, _, tiling in ms.tiling_intervals(1024, 256)]
    assert sorted(kernels.values()) == sorted(t.threads for t in tilings) and len(kernels) == len(tilings)
    definitions = re.split(r"extern \"C\" __global__ void __launch_bounds__\(\d+\) \w+\([^)]*\) \{", dispatch_source)
    assert len(definitions) == len(tilings) + 1
    for body in definitions[1:]:  # each kernel is the whole tensor-core pipeline
        for instruction in ("mma.sync.aligned.m16n8k16", "ldmatrix.sync.aligned", "cp.async."):
            assert re.search(instruction.replace(".", "[._]"), body), instruction  # the cp.async of a helper


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_dispatch_compiles_as_its_kernels_alone(dispatch_source, arch):
    """nvcc compiles every case; a kernel that spills spills exactly as its tiling's kernel alone does (the
    dispatch costs no registers): on sm_90 ptxas spills 8 bytes in the 128 x 32 tiling of a symbolic M with or
    without the dispatch (README, "A symbolic M with the rule's tiling for every M")."""
    usages = {u.kernel: u for u in compile_cuda_source(dispatch_source, arch)}
    intervals = ms.tiling_intervals(1024, 256)
    assert sorted(usages) == sorted(["main_kernel"] + [f"main_kernel_{i}" for i in range(1, len(intervals))])
    for index, (_, _, tiling) in enumerate(intervals):
        usage = usages["main_kernel" + (f"_{index}" if index else "")]
        print(tiling.name(), usage)
        if usage.spill_store_bytes or usage.spill_load_bytes:
            (alone,) = compile_cuda_source(cuda_source(ms.matmul_mma_cuda(None, 1024, 256, tiling=tiling), arch,
                                                       tir_pipeline=MMA_PIPELINE), arch)
            assert (usage.registers, usage.spill_store_bytes, usage.spill_load_bytes) == (
                alone.registers, alone.spill_store_bytes, alone.spill_load_bytes), (tiling.name(), usage, alone)


def gpu_dispatch(n: int, k: int, padded_output: bool = False):
    arch = "sm_" + tvm.cuda(0).compute_version.replace(".", "")
    return tvm.compile(ms.matmul_mma_cuda_dispatch(n, k, padded_output=padded_output),
                       target=tvm.target.Target({"kind": "cuda", "arch": arch}), tir_pipeline=MMA_PIPELINE)


@pytest.mark.gpu
@pytest.mark.parametrize("padded_output", [False, True], ids=["unpadded", "padded"])
def test_dispatch_on_the_gpu(padded_output):
    """One compiled function for every M of 4096 x 4096: both sides of every boundary and the issue's M."""
    executable = gpu_dispatch(4096, 4096, padded_output)
    boundaries = [first for first, _, _ in ms.tiling_intervals(4096, 4096)]
    for m in sorted({1, 16, 33, 127, 1000, 2000} | {b - 1 for b in boundaries[1:]} | set(boundaries)):
        run_on_gpu(executable, m, 4096, 4096, seed=m)


@pytest.mark.gpu
def test_dispatch_small_sweep_on_the_gpu():
    """M in 1..40 x the first 10 of ``sweep_pairs`` (N, K in 1..40), the dispatch of each pair."""
    for n, k in sweep_pairs()[:10]:
        executable = gpu_dispatch(n, k)
        for m in range(1, 41):
            run_on_gpu(executable, m, n, k, seed=m * 1601 + n * 41 + k)
