"""The mma.sync tensor-core matmul (tvm_tailsplit.split.mma_schedule) through TailSplit.

Without a GPU: the marked schedule (before tensorize, without the software pipeline, whose barriers llvm cannot
run) and its TailSplit + merged form mean the matmul on llvm (threads as serial loops, shared and warp buffers
global); after TailSplit every mark is a condition-free main tile and is tensorized; the CUDA source holds
mma.sync, ldmatrix and cp.async and compiles with nvcc for sm_80 and sm_90 without spills or local memory. On a
GPU: the issue's shapes and a sweep of small ones against numpy."""

import numpy as np
import pytest
import tvm

from tvm_tailsplit import TailSplit
from tvm_tailsplit.cuda import compile_cuda_source, cuda_source
from tvm_tailsplit.ir_utils import EMIT_INSN_PRAGMA, drop_loop_annotation
from tvm_tailsplit.split import analysis
from tvm_tailsplit.split import mma_schedule as ms
from tvm_tailsplit.split.merge_cases import merge_equal_cases
from tvm_tailsplit.split.mma_pipeline import MMA_PIPELINE, prepare_mma
from tvm_tailsplit.testing import cuda_schedule_for_llvm, run_guarded

LLVM_SCOPES = ("shared", "shared.dyn", "warp")


def inputs(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, (m, k)).astype("float16"), rng.uniform(-1, 1, (k, n)).astype("float16")


def run_on_llvm(mod, m, n, k):
    llvm = drop_loop_annotation(cuda_schedule_for_llvm(mod, scopes=LLVM_SCOPES), EMIT_INSN_PRAGMA)
    a, b = inputs(m, n, k)
    got = run_guarded(tvm.compile(llvm, target="llvm"), llvm["main"], [a, b, np.zeros((m, n), "float32")], {})[-1]
    np.testing.assert_allclose(got, a.astype("float32") @ b.astype("float32"), rtol=1e-4, atol=1e-4)


def split_and_merge(mod):
    return merge_equal_cases(TailSplit(strategy=ms.TAILSPLIT_STRATEGY)(mod))


def test_marked_and_split_schedules_mean_the_matmul():
    """33 x 17 x 40: one partial thread block in M and N (tiles dropped by the guard chain), K padded 40 -> 64."""
    mod = ms.matmul_mma_cuda(33, 17, 40, pipeline=False)
    assert analysis.conditions_under_marks(mod) > 0
    split = split_and_merge(mod)
    assert analysis.conditions_under_marks(split) == 0
    run_on_llvm(mod, 33, 17, 40)
    run_on_llvm(split, 33, 17, 40)


def test_padding_to_whole_blocks_leaves_no_guard_and_means_the_matmul():
    """pad_to_blocks (the tail benchmark's (b)): 33 x 17 x 40 padded to one whole 128 x 128 thread block, no
    condition under any mark, so tensorize maps every tile without TailSplit."""
    mod = ms.matmul_mma_cuda(33, 17, 40, pipeline=False, pad_to_blocks=True)
    assert analysis.conditions_under_marks(mod) == 0
    run_on_llvm(mod, 33, 17, 40)


def test_symbolic_m_split_means_the_matmul():
    """M symbolic: the padded tile count (m + 15) // 16 is a symbol of TailSplit's atoms, every guard is decided
    above the marks; the split function, specialized to several M, computes the matmul."""
    split = split_and_merge(ms.matmul_mma_cuda(None, 24, 40, pipeline=False))
    assert analysis.conditions_under_marks(split) == 0
    func = split["main"]
    a = func.params[0]
    for m in (1, 17, 33):  # binding A's shape binds m
        specialized = func.specialize({a: tvm.tirx.decl_buffer((m, 40), a.dtype, a.name)})
        run_on_llvm(tvm.IRModule({"main": specialized}), m, 24, 40)


def test_copy_lanes_rule():
    assert [ms.copy_lanes(n) for n in (4096, 4000, 129, 255, 40, 6, 17)] == [8, 8, 1, 1, 8, 2, 1]
    assert ms.BLOCK_TILE == (128, 128) and ms.BLOCK_K == 32


@pytest.fixture(scope="module")
def prepared_1000():
    """1000 x 1000 x 1000 after TailSplit, the merge and tensorize_marked, and the report."""
    report = []
    return prepare_mma(ms.matmul_mma_cuda(1000, 1000, 1000), report=report), report


def test_every_mark_is_a_tensorized_main_tile(prepared_1000):
    _, report = prepared_1000
    assert report and all(r.action == "tensorized" for r in report), [str(r) for r in report]
    # the merge leaves one tile per stage: the guard chain's cases of whole tiles share it
    assert sorted(r.instruction for r in report) == sorted(ms.MMA_MARKS.values())


@pytest.fixture(scope="module")
def source_1000():
    return cuda_source(ms.matmul_mma_cuda(1000, 1000, 1000), "sm_80", tir_pipeline=MMA_PIPELINE)


def test_cuda_source_has_mma_ldmatrix_cp_async(source_1000):
    for instruction in ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "ldmatrix.sync.aligned",
                        "cp.async.cg.shared.global", "cp.async.commit_group", "cp.async.wait_group"):
        assert instruction in source_1000, instruction
    # the fragments and accumulators of a thread: 4 + 4 tiles of 8 halves, 16 tiles of 8 floats (registers)
    assert "half A_pad_shared_dyn_warp_ptr[64]" in source_1000
    assert "float C_pad_warp_ptr[128]" in source_1000


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_compiles_without_spills_or_local_memory(source_1000, arch):
    usages = {u.kernel: u for u in compile_cuda_source(source_1000, arch, ("-diag-suppress", "177"))}
    for usage in usages.values():
        print(usage)
    main = usages["main_kernel"]
    assert 0 < main.registers <= 255
    assert (main.spill_store_bytes, main.spill_load_bytes, main.stack_frame_bytes) == (0, 0, 0)


# ------------------------------------------------------------------------------------------------- on a GPU

ISSUE_SHAPES = [(4000, 4000, 4000), (1000, 4096, 4096), (127, 255, 129)]
SYMBOLIC_MS = (1, 16, 33, 127, 1000)


def run_on_gpu(executable, m, n, k, seed=0):
    device = tvm.cuda(0)
    a, b = inputs(m, n, k, seed)
    c = tvm.runtime.empty((m, n), "float32", device)
    executable["main"](tvm.runtime.tensor(a, device), tvm.runtime.tensor(b, device), c)
    want = a.astype("float32") @ b.astype("float32")
    np.testing.assert_allclose(c.numpy(), want, rtol=1e-2, atol=1e-2 * max(1.0, np.sqrt(k) / 8))


def gpu_executable(m, n, k):
    device = tvm.cuda(0)
    target = tvm.target.Target({"kind": "cuda", "arch": "sm_" + device.compute_version.replace(".", "")})
    return tvm.compile(ms.matmul_mma_cuda(m, n, k), target=target, tir_pipeline=MMA_PIPELINE)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", ISSUE_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_issue_shapes_on_the_gpu(shape):
    run_on_gpu(gpu_executable(*shape), *shape)


@pytest.mark.gpu
def test_symbolic_m_one_kernel_on_the_gpu():
    executable = gpu_executable(None, 4096, 4096)
    for m in SYMBOLIC_MS:
        run_on_gpu(executable, m, 4096, 4096, seed=m)


def sweep_pairs() -> list[tuple[int, int]]:
    """(N, K) for the sweep of M, N, K in 1..40: N runs over 1..40 and K over the permutation ``7 N mod 40 + 1``,
    so every residue of N modulo the 16-column tile and of K modulo the 32-deep slice (and every copy width) is
    covered with 40 kernels instead of 1600; M runs over 1..40 in each, one kernel per pair (M symbolic)."""
    return [(n, 7 * n % 40 + 1) for n in range(1, 41)]


def test_sweep_covers_every_residue():
    pairs = sweep_pairs()
    assert {n % 16 for n, _ in pairs} == set(range(16))
    assert {k % 32 for _, k in pairs} == set(range(32))
    assert sorted(k for _, k in pairs) == list(range(1, 41))


@pytest.mark.gpu
def test_small_sweep_on_the_gpu():
    for n, k in sweep_pairs():
        executable = gpu_executable(None, n, k)
        for m in range(1, 41):
            run_on_gpu(executable, m, n, k, seed=m * 1601 + n * 41 + k)
