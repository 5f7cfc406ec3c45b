"""The mma.sync tensor-core matmul (tvm_tailsplit.split.mma_schedule) through TailSplit.

Without a GPU: the marked schedule (before tensorize, mostly without the software pipeline; the pipelined one runs
with synchronous copies) and its TailSplit + merged form mean the matmul on llvm (threads as serial loops, shared
and warp buffers global); so do the accumulator stores once tensorized (main tiles with TVM's element-wise store,
tail tiles with mma_tails.emit_predicated_store), over M, N, K covering every residue modulo the tiles and for a
symbolic M (M = 0 with the grid launched as TVM's CUDA runtime launches it: one block, nothing written); after
TailSplit every mark is a main tile or a store tail and is mapped; the CUDA source holds mma.sync, ldmatrix and
cp.async with a src-size operand (zero fill), no padded global buffer and one kernel, and compiles with nvcc for
sm_80 and sm_90 without spills or local memory. Every tiling of ``TILINGS`` (thin tiles of the tiling rule) does
the same on llvm and nvcc; the rule's choices are pinned. On a GPU: the issue's shapes (unpadded and padded output),
each tiling, the rule's tilings of decode-like M, and sweeps of small shapes against numpy."""

import re

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import s_tir
from tvm.s_tir.tensor_intrin.cuda import get_mma_store_intrin
from tvm.script import tirx as T

from tvm_tailsplit import TailSplit
from tvm_tailsplit.cuda import (
    DEFAULT_MULTIPROCESSORS,
    FILL_FRACTION,
    SYMBOLIC_M,
    compile_cuda_source,
    cuda_source,
    cuda_target,
)
from tvm_tailsplit.ir_utils import EMIT_INSN_PRAGMA, drop_loop_annotation, map_loops, with_loop
from tvm_tailsplit.split import analysis, workloads
from tvm_tailsplit.split import mma_schedule as ms
from tvm_tailsplit.split.conditions import MARK_KEY
from tvm_tailsplit.split.merge_cases import merge_equal_cases
from tvm_tailsplit.split.mma_pipeline import MMA_PIPELINE, prepare_mma
from tvm_tailsplit.split.mma_tails import emit_predicated_store
from tvm_tailsplit.split.tail_forms import register_tail_intrinsics
from tvm_tailsplit.split.tensorize import tensorize_marked
from tvm_tailsplit.testing import (
    cuda_schedule_for_llvm,
    evaluate,
    grids_as_launched,
    guarded_device_tensor,
    host_after_packed_api,
    host_launches,
    run_guarded,
)

LLVM_SCOPES = ("shared", "shared.dyn", "warp")
# TVM's store of a 16 x 16 accumulator tile written element by element (use_mma_store_intrinic=False): the main
# tiles' store as llvm can run it, with the tail form the CUDA store's mark has
LLVM_STORE = "tailsplit_test_mma_store_16x16_f32_elementwise"
s_tir.TensorIntrin.register(LLVM_STORE, *get_mma_store_intrin("float32", 8, "global", False), override=True)
register_tail_intrinsics(LLVM_STORE, variable_length=emit_predicated_store)


def inputs(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, (m, k)).astype("float16"), rng.uniform(-1, 1, (k, n)).astype("float16")


def compiled_for_llvm(mod):
    """``(executable, function)`` of ``mod`` compiled for llvm, threads as serial loops."""
    llvm = drop_loop_annotation(cuda_schedule_for_llvm(mod, scopes=LLVM_SCOPES), EMIT_INSN_PRAGMA)
    return tvm.compile(llvm, target="llvm"), llvm["main"]


def run_on_llvm(mod, m, n, k, compiled=None):
    """``mod`` (or its ``compiled_for_llvm`` form) on random inputs of ``m x k`` and ``k x n``, ``C`` guarded by
    canaries, against numpy."""
    executable, func = compiled or compiled_for_llvm(mod)
    a, b = inputs(m, n, k)
    got = run_guarded(executable, func, [a, b, np.zeros((m, n), "float32")], {})[-1]
    np.testing.assert_allclose(got, a.astype("float32") @ b.astype("float32"), rtol=1e-4, atol=1e-4)


def split_and_merge(mod):
    return merge_equal_cases(TailSplit(strategy=ms.TAILSPLIT_STRATEGY)(mod))


def stores_mapped(mod, report=None):
    """The split module with its accumulator stores mapped (main tiles by ``LLVM_STORE``, tails by
    ``emit_predicated_store``) and every other mark left as code."""

    def remark(loop):
        value = loop.annotations.get(MARK_KEY)
        if value is None:
            return loop
        annotations = {key: v for key, v in loop.annotations.items() if key != MARK_KEY}
        if str(value) == ms.MMA_MARKS["store"]:
            annotations[MARK_KEY] = LLVM_STORE
        return with_loop(loop, annotations=annotations)

    return tensorize_marked(map_loops(split_and_merge(mod), remark), report=report)


@pytest.mark.parametrize("padded_output", [False, True])
def test_marked_and_split_schedules_mean_the_matmul(padded_output):
    """33 x 17 x 40 padded to instruction tiles (``pad_to_blocks=False``): one partial thread block in M and N (tiles
    dropped by the guard chains), K padded 40 -> 64.
    Unpadded, the split runs with its stores mapped (``stores_mapped``): left as scalar code, the store tails make
    TVM 0.27's CompactBufferAllocation write the store's tile loops into the accumulator's compacted offsets,
    outside those loops (MakePackedAPI: "variables (ax1_0, ax0_0) are used")."""
    mod = ms.matmul_mma_cuda(33, 17, 40, pipeline=False, pad_to_blocks=False, padded_output=padded_output)
    assert analysis.conditions_under_marks(mod) > 0
    split = split_and_merge(mod)
    assert analysis.conditions_under_marks(split) == 0
    run_on_llvm(mod, 33, 17, 40)
    run_on_llvm(split if padded_output else stores_mapped(mod), 33, 17, 40)


def tail_triples() -> list[tuple[int, int, int]]:
    """(M, N, K) with each of M, N, K running over 1..40 (K and N by the permutations ``13 i`` and ``7 i`` mod 40):
    every residue modulo the 16 x 16 tile, the 32-deep slice and every copy width, in 40 kernels."""
    return [(i, 7 * i % 40 + 1, 13 * i % 40 + 1) for i in range(1, 41)]


def test_tail_triples_cover_every_residue():
    triples = tail_triples()
    for axis in range(3):
        assert sorted(t[axis] for t in triples) == list(range(1, 41))


def test_tail_forms_mean_the_matmul():
    """Every store tail of the unpadded form is mapped by the predicated store, and the kernel (stores mapped, the
    rest as code, threads serialized) computes the matmul with nothing written outside C."""
    tails = 0
    for m, n, k in [*tail_triples(), (32, 48, 40), (128, 128, 8)]:  # and M, N whole tiles with a K tail
        report = []
        mapped = stores_mapped(ms.matmul_mma_cuda(m, n, k, pipeline=False), report)
        actions = {r.action for r in report}
        assert actions <= {"tensorized", "variable_length"}, [str(r) for r in report]
        tails += "variable_length" in actions
        run_on_llvm(mapped, m, n, k)
    assert tails >= 30  # every shape with M or N not a multiple of 16 has store tails


@pytest.mark.parametrize("pad_to_blocks", [True, False], ids=["block-padded", "guard-chains"])
def test_symbolic_m_tail_forms_mean_the_matmul(pad_to_blocks):
    """One symbolic-M kernel, split and its stores mapped once, specialized to many M (every residue of M modulo
    the 16-row tile and the 128-row block, several blocks)."""
    mapped = stores_mapped(ms.matmul_mma_cuda(None, 24, 40, pipeline=False, pad_to_blocks=pad_to_blocks))
    func = mapped["main"]
    a = func.params[0]
    for m in (1, 7, 15, 16, 17, 64, 127, 128, 129, 200):
        specialized = func.specialize({a: tvm.tirx.decl_buffer((m, 40), a.dtype, a.name)})
        run_on_llvm(tvm.IRModule({"main": specialized}), m, 24, 40)


def without_host_condition(func):
    """``func`` with each ``if tvm_thread_invariant(...)`` replaced by its then-case (the kernel launched always)."""

    def unwrap(stmt):
        condition = stmt.condition
        invariant = isinstance(condition, tvm.ir.Call) and condition.op.name == "tirx.tvm_thread_invariant"
        return stmt.then_case if invariant and stmt.else_case is None else stmt

    return func.with_body(tvm_ffi.structural_map(func.body, (tvm.tirx.IfThenElse, unwrap), order="post"))


@pytest.mark.parametrize("host_condition", [True, False], ids=["launched-for-m>0", "launched-always"])
def test_symbolic_m_of_zero_writes_nothing_when_the_grid_runs_one_block(host_condition):
    """M = 0: TVM's CUDA runtime launches the grid extent 0 as 1 (``testing.grids_as_launched``), and the guard
    chains, decided for block indices inside the grid, stored tiles of that block into the empty C (rows 0..15 of
    a 0-row C, out of bounds). TailSplit now plans launch dimensions over ``max(extent, 1)``, so the kernel
    launched at M = 0 writes nothing, and the host launches it only for M > 0; C's canaries stay intact either
    way."""
    tiling = ms.choose_tiling(None, 24, 40)  # 16 x 32 tiles: a stray store lands in C's guards
    func = stores_mapped(ms.matmul_mma_cuda(None, 24, 40, pipeline=False, tiling=tiling))["main"]
    func = func if host_condition else without_host_condition(func)
    a = func.params[0]
    specialized = func.specialize({a: tvm.tirx.decl_buffer((0, 40), a.dtype, a.name)})
    executable, _ = compiled_for_llvm(grids_as_launched(tvm.IRModule({"main": specialized})))
    tensors = [guarded_device_tensor(shape, dtype, tvm.cpu(), guard_bytes=4096) for shape, dtype in
               (((0, 40), "float16"), ((40, 24), "float16"), ((0, 24), "float32"))]
    executable["main"](*[t.tensor for t in tensors])
    for name, tensor in zip("ABC", tensors, strict=True):
        tensor.numpy(f"buffer {name}")


def test_symbolic_m_kernel_is_launched_for_m_above_zero_only():
    """The host skips the launch at M = 0 (``mma_schedule._launched_for_rows``)."""
    tiling = ms.choose_tiling(None, 24, 40)
    host, _ = host_after_packed_api(ms.matmul_mma_cuda(None, 24, 40, tiling=tiling), cuda_target("sm_90"),
                                    MMA_PIPELINE)
    ((condition, kernels),) = host_launches(host)  # the CUDA host code launches the kernel for M > 0 only
    assert kernels == ["main_kernel"] and [evaluate(condition, {"m": m}) for m in (0, 1, 17)] == [0, 1, 1]


@pytest.mark.nvcc
@pytest.mark.parametrize("m,n", [(33, 1), (33, 16), (None, 16), (1, 32), (16, 64)])
def test_a_single_tile_extent_compiles_and_means_the_matmul(m, n):
    """An M or N of one 16-wide tile under the default tiling (warp tiles of 4 x 4): the pipeline stopped in TVM's
    LowerMatchBuffer ('elem_offset ... + ax1_0 * 8 does not satisfy the offset_factor 16': transform_layout folded
    the warp tile loop into the register index of a one-tile fragment). Such an operand is padded to two tiles;
    the kernel compiles with nvcc, without spills, and means the matmul (threads serialized on llvm)."""
    func = ms.matmul_mma_cuda(m, n, 40)
    (usage,) = compile_cuda_source(cuda_source(func, "sm_80", tir_pipeline=MMA_PIPELINE), "sm_80",
                                   ("-diag-suppress", "177"))
    assert usage.spill_store_bytes == 0 and usage.spill_load_bytes == 0 and usage.stack_frame_bytes == 0
    mapped = stores_mapped(ms.matmul_mma_cuda(m, n, 40, pipeline=False))
    for rows in (m,) if m else (1, 16, 17):
        specialized = mapped["main"]
        if m is None:
            a = specialized.params[0]
            specialized = specialized.specialize({a: tvm.tirx.decl_buffer((rows, 40), a.dtype, a.name)})
        run_on_llvm(tvm.IRModule({"main": specialized}), rows, n, 40)


def test_the_rule_tiling_of_one_row_compiles_for_cuda():
    """The rule's tiling of a decode shape (one 16-row warp tile) compiles as it did: no operand padded further."""
    cuda_source(ms.matmul_mma_cuda(1, 64, 40, tiling=ms.choose_tiling(1, 64, 40)), "sm_80", tir_pipeline=MMA_PIPELINE)


def test_padding_to_whole_blocks_leaves_no_guard_and_means_the_matmul():
    """pad_to_blocks with padded_output (the tail benchmark's (b)): 33 x 17 x 40 padded to one whole 128 x 128
    thread block, no condition under any mark, so tensorize maps every tile without TailSplit."""
    mod = ms.matmul_mma_cuda(33, 17, 40, pipeline=False, pad_to_blocks=True, padded_output=True)
    assert analysis.conditions_under_marks(mod) == 0
    run_on_llvm(mod, 33, 17, 40)


@pytest.mark.parametrize("pad_to_blocks", [True, False], ids=["block-padded", "guard-chains"])
def test_symbolic_m_split_means_the_matmul(pad_to_blocks):
    """M symbolic: the padded tile or block count ((m + 15) // 16, (m + 127) // 128) is a symbol of TailSplit's
    atoms, every guard is decided above the marks; the split function, specialized to several M, computes the
    matmul."""
    split = split_and_merge(ms.matmul_mma_cuda(None, 24, 40, pipeline=False, pad_to_blocks=pad_to_blocks))
    assert analysis.conditions_under_marks(split) == 0
    func = split["main"]
    a = func.params[0]
    for m in (1, 17, 33):  # binding A's shape binds m
        specialized = func.specialize({a: tvm.tirx.decl_buffer((m, 40), a.dtype, a.name)})
        run_on_llvm(tvm.IRModule({"main": specialized}), m, 24, 40)


def test_copy_lanes_rule():
    assert [ms.copy_lanes(n) for n in (4096, 4000, 129, 255, 40, 6, 17)] == [8, 8, 1, 1, 8, 2, 1]
    assert [ms.copy_lanes(4096, per_thread) for per_thread in (32, 8, 4, 2)] == [8, 8, 4, 2]
    assert ms.DEFAULT_TILING.block_tile == (128, 128) and ms.DEFAULT_TILING.block_k == 32


# ------------------------------------------------------------------------------------------------ the tilings

# tilings of the rule's candidates besides the default (``tile_tiling`` for a deep K): the decode-like 16 x 32 (one
# warp row of two warps, 128-deep slices, 4 stages), a 16-row tile of two tiles per warp in N, and two-warp-row
# tiles with unequal warp tiles (2 x 1, 4 x 2)
TILINGS = {f"{rows}x{cols}": ms.tile_tiling(rows, cols, 4096) for rows, cols in ((16, 32), (16, 128), (64, 32),
                                                                                    (128, 64))}
ISSUE_TILINGS = {(4000, 4000, 4000): "128x128x32/3 w2x2 t4x4", (1000, 4096, 4096): "128x128x32/3 w2x2 t4x4",
                 (None, 4096, 4096): "128x128x32/3 w2x2 t4x4", (127, 255, 129): "16x32x32/4 w1x2 t1x1",
                 (1, 4096, 4096): "16x32x128/4 w1x2 t1x1", (16, 4096, 4096): "16x32x128/4 w1x2 t1x1",
                 (33, 4096, 4096): "64x32x64/4 w2x2 t2x1", (200, 4096, 4096): "128x64x32/3 w2x2 t4x2"}


def test_tiling_rule():
    """The rule's tiling of the issue's shapes and of a static decode-like M: large and symbolic M keep the default
    128 x 128; M <= 16 at N = 4096 gets 16 x 32 tiles, 128 thread blocks (of 132 SMs) instead of 32; M = 33 one row
    of 64 x 32 tiles (B streamed once); the small 127 x 255 x 129 the tile with the most blocks and no K padding
    beyond whole 32-deep slices."""
    assert {shape: ms.choose_tiling(*shape).name() for shape in ISSUE_TILINGS} == ISSUE_TILINGS
    assert ms.choose_tiling(1000, 4096, 4096) == ms.DEFAULT_TILING == ms.tile_tiling(128, 128, 4096)
    for m in (1, 16, 33):
        rows, cols = ms.choose_tiling(m, 4096, 4096).block_tile
        assert -(-m // rows) * (4096 // cols) >= FILL_FRACTION * DEFAULT_MULTIPROCESSORS
    assert ms.choose_tiling(1, 4096, 4096, sm_count=16).block_tile == (16, 128)  # 32 blocks fill 16 SMs
    assert ms.choose_tiling(16, 4096, 129).block_k == 32  # 129 -> 160: a deeper slice would pad K further
    # a symbolic M is tiled as M = SYMBOLIC_M; N = 24 fills no GPU: the tile with the most blocks, least padded
    assert ms.choose_tiling(None, 24, 40) == ms.choose_tiling(SYMBOLIC_M, 24, 40)
    assert ms.choose_tiling(None, 24, 40).block_tile == (16, 32)


def test_candidate_tilings_are_valid():
    for m in (1, 16, 17, 33, 64, 127, 1000, None):
        for rows, cols in ms.candidate_tiles(m):
            tiling = ms.tile_tiling(rows, cols, 4096)
            assert tiling.block_tile == (rows, cols) and tiling.threads <= 128
            assert tiling.shared_bytes <= ms.SHARED_BYTES_LIMIT


def test_the_largest_warp_tiles_that_fit_the_registers_are_accepted():
    assert sum(ms.MmaTiling(warp_tiles=(4, 4)).registers_at_mma) == 128 + 32  # the default: 187 registers (sm_80)
    assert sum(ms.MmaTiling(warps=(1, 1), warp_tiles=(5, 5)).registers_at_mma) == 240


@pytest.mark.parametrize(("fields", "message"), [
    ({"warps": (0, 2)}, "MmaTiling.warps must be a pair of positive ints"),
    ({"warp_tiles": (4,)}, "MmaTiling.warp_tiles must be a pair"),
    ({"block_k_steps": 1}, "MmaTiling.block_k_steps must be an int >= 2"),
    ({"stages": 1}, "MmaTiling.stages must be an int >= 2"),
    ({"warps": (8, 8)}, "MmaTiling.warps .*2048 threads"),
    ({"warps": (1, 3), "warp_tiles": (1, 1)}, "MmaTiling.warps .*96 threads do not split the 512-element slice of A"),
    ({"stages": 9}, "MmaTiling.stages 9: .* bytes of shared memory"),
    # 256 accumulators: nvcc compiled it with 255 registers and 2652 bytes of spill stores (sm_80)
    ({"warp_tiles": (8, 4)}, r"MmaTiling.warp_tiles \(8, 4\): 256 fp32 accumulators and 48 fragment registers .* "
                             "more than the 255 registers"),
    ({"warps": (1, 1), "warp_tiles": (6, 5)}, r"MmaTiling.warp_tiles \(6, 5\): 240 fp32 accumulators and 44"),
])
def test_tiling_checks_name_the_field(fields, message):
    with pytest.raises(ValueError, match=message):
        ms.MmaTiling(**fields)


def launched_shared_bytes(mod):
    """The dynamic shared memory the host code launches ``mod``'s one kernel with (no GPU needed)."""
    host, _ = host_after_packed_api(mod, cuda_target("sm_80"), MMA_PIPELINE)
    sizes = [int(call.args[-1]) for call in host_calls(host, "tirx.call_ffi_kernel")]
    assert len(sizes) == 1
    return sizes[0]


def host_calls(host, name):
    calls = []
    tvm_ffi.structural_walk(host.body, (tvm.ir.expr.Call, lambda call: calls.append(call)
                                        if isinstance(call.op, tvm.ir.Op) and call.op.name == name else None))
    return calls


@pytest.mark.parametrize("tiling", [ms.DEFAULT_TILING, ms.MmaTiling((2, 1), (1, 3), 2, 3),
                                    ms.MmaTiling((1, 2), (1, 1), 3, 2), ms.MmaTiling((2, 2), (4, 3), 3, 5)],
                         ids=lambda tiling: tiling.name())
def test_shared_bytes_are_the_launched_shared_memory(tiling):
    """``MmaTiling.shared_bytes`` (what the shared-memory check reads) is what the kernel is launched with: rows
    padded as storage_align pads them (``shared_row``). It counted ``SHARED_ROW_PAD`` halves per row, short by
    24 halves per row where the slice depth or the block's columns are not multiples of 32 (48 -> 72, not 56),
    so that the check passed tilings whose kernels need more than an sm_80 thread block has."""
    rows, cols = tiling.block_tile  # whole blocks (a smaller C compacts the slices) and every stage used
    mod = ms.matmul_mma_cuda(2 * rows, 2 * cols, tiling.block_k * tiling.stages, tiling=tiling)
    assert launched_shared_bytes(mod) == tiling.shared_bytes


def _guarded_in_pipelined_loops(mod: tvm.IRModule) -> set[str]:
    """The ops of the calls under a guard (an ``if`` or a block predicate) inside the software-pipelined loops of
    ``mod`` (after ``prepare_mma``)."""
    guarded: set[str] = set()

    def calls_in(node):
        def on_call(call):
            if isinstance(call.op, tvm.ir.Op):
                guarded.add(call.op.name)

        tvm_ffi.structural_walk(node, (tvm.ir.expr.Call, on_call))

    def on_if(node):
        calls_in(node.then_case)
        if node.else_case is not None:
            calls_in(node.else_case)

    def on_realize(node):
        if not (isinstance(node.predicate, tvm.tirx.IntImm) and node.predicate.value == 1):
            calls_in(node.block.body)

    def on_loop(loop):
        if loop.annotations is not None and "software_pipeline_stage" in loop.annotations:
            tvm_ffi.structural_walk(loop.body, [(tvm.tirx.IfThenElse, on_if), (s_tir.SBlockRealize, on_realize)])

    tvm_ffi.structural_walk(mod["main"].body, (tvm.tirx.For, on_loop))
    return guarded


@pytest.mark.parametrize("m,n,k", [(200, 136, 64), (None, 136, 64)], ids=["200x136x64", "Mx136x64"])
def test_partial_blocks_compute_whole_tiles_in_the_pipelined_loops(m, n, k):
    """Padded to whole thread blocks (the default), no fragment load or mma of the pipelined loops is guarded:
    the loops are the divisible kernel's, only the copies (zero fill) and the store (outside them) know the
    tails. With ``pad_to_blocks=False`` TailSplit's chains put guards around them inside the loops; on an H100
    that kernel took 1.4x the divisible kernel's time at 4000^3."""
    tiling = ms.choose_tiling(m or 1024, n, k)
    mma_ops = {"tirx.ptx_legacy.ldmatrix", "tirx.ptx_legacy.mma"}
    assert not _guarded_in_pipelined_loops(prepare_mma(ms.matmul_mma_cuda(m, n, k, tiling=tiling))) & mma_ops
    chains = prepare_mma(ms.matmul_mma_cuda(m, n, k, pad_to_blocks=False, tiling=tiling))
    assert _guarded_in_pipelined_loops(chains) >= mma_ops


def test_symbolic_m_kernel_is_launched_with_one_shared_memory_size():
    """A symbolic M: the ``A`` tile was compacted to ``min((m + 15) // 16, 8)`` row groups, so the kernel's
    dynamic shared memory was a function of ``m``. TVM 0.27's CUDA runtime raises a kernel's limit above 48 KiB
    only at its first launch, for that launch's size, so on an H100 a launch at M = 1 followed by one at
    M = 1000 failed (``CUDA_ERROR_INVALID_VALUE``). Every launch now asks for one constant size, the static
    kernel's at whole blocks."""
    tiling = ms.choose_tiling(None, 512, 512)
    host, _ = host_after_packed_api(ms.matmul_mma_cuda(None, 512, 512, tiling=tiling), cuda_target("sm_90"),
                                    MMA_PIPELINE)
    (size,) = [call.args[-1] for call in host_calls(host, "tirx.call_ffi_kernel")]
    assert isinstance(size, tvm.tirx.IntImm), size
    rows = tiling.block_tile[0]
    assert size.value == launched_shared_bytes(ms.matmul_mma_cuda(4 * rows, 512, 512, tiling=tiling))


def test_shared_memory_check_counts_the_row_alignment():
    # 128 x 96 x 48, 6 stages: 6 x 28416 bytes (rows of 72 halves) = 170496 > 166912; counted as 56 halves: 145920
    with pytest.raises(ValueError, match=r"MmaTiling.stages 6: 170496 bytes of shared memory, more than 166912"):
        ms.MmaTiling((2, 2), (4, 3), 3, 6)
    assert [ms.shared_row(length) for length in (16, 32, 48, 64, 96, 112, 128)] == [40, 40, 72, 72, 104, 136, 136]


@pytest.mark.parametrize(("build", "message"), [
    (lambda: ms.matmul_mma_cuda(64, 64, 64, pipeline="yes"), "matmul_mma_cuda: pipeline must be a bool, got str"),
    (lambda: ms.matmul_mma_cuda(64, 64, 64, padded_output=1), "matmul_mma_cuda: padded_output must be a bool"),
    (lambda: ms.matmul_mma_cuda_dispatch(64, 64, pad_to_blocks="no"),
     "matmul_mma_cuda_dispatch: pad_to_blocks must be a bool, got str 'no'"),
])
def test_the_mma_builders_refuse_flags_that_are_not_bools(build, message):
    # pipeline="no" was truthy: it pipelined without a word
    with pytest.raises(TypeError, match=message):
        build()


@pytest.mark.parametrize(("args", "message"), [((8, 32, 64), "rows must be a positive multiple of 16, got 8"),
                                               ((16, 40, 64), "cols must be a positive multiple of 16, got 40"),
                                               ((16, 32, 0), "k must be a positive int, got 0")])
def test_tile_tiling_names_a_bad_argument(args, message):
    with pytest.raises(ValueError, match=f"tile_tiling: {message}"):
        ms.tile_tiling(*args)


def test_tile_tiling_takes_every_block_tile_of_whole_16_x_16_tiles():
    """Every ``rows x cols`` of whole 16 x 16 tiles up to 128 x 128 gets a tiling of that block tile, or, where its
    warp tiles would not fit a thread's registers, a ValueError of tile_tiling naming the tile. The warps were 2 in
    M and up to 4 in N whatever the tile counts, so 16 x 48 took 3 warps (96 threads, which split no 16 x 64 slice:
    "MmaTiling.warps (1, 3): ...", a field the caller never set) and 48 x 16 was refused as "not whole 16 x 16
    tiles per warp"; the warps now divide the tile counts (powers of two)."""
    refused = []
    for rows in range(16, 129, 16):
        for cols in range(16, 129, 16):
            try:
                tiling = ms.tile_tiling(rows, cols, 64)
            except ValueError as error:
                assert re.match(rf"tile_tiling: no tiling of a {rows} x {cols} block tile: MmaTiling.warp_tiles .* "
                                "more than the 255 registers", str(error)), str(error)
                refused.append((rows, cols))
                continue
            assert tiling.block_tile == (rows, cols) and tiling.threads <= ms.BLOCK_WARPS * 32
    # an odd tile count (5 or 7 tiles) is one warp's: 5 x 7, 7 x 5, 7 x 7, 4 x 7 warp tiles (224 accumulators or more)
    assert refused == [(80, 112), (112, 80), (112, 112), (128, 112)]
    with pytest.raises(ValueError, match=r"tile_tiling: no tiling of a 256 x 256 block tile: MmaTiling.warp_tiles"):
        ms.tile_tiling(256, 256, 64)


@pytest.mark.parametrize(("rows", "cols"), [(16, 48), (48, 16), (96, 80)])
def test_block_tiles_of_odd_tile_counts_mean_the_matmul(rows, cols):
    tiling = ms.tile_tiling(rows, cols, 64)
    shape = (rows + 9, 2 * cols - 5, 70)
    run_on_llvm(stores_mapped(ms.matmul_mma_cuda(*shape, pipeline=False, tiling=tiling)), *shape)


@pytest.mark.parametrize(("args", "message"), [((0, 64, 64), "m must be a positive int or None, got 0"),
                                               ((None, 0, 64), "n must be a positive int, got 0"),
                                               ((None, 64.5, 64), "n must be a positive int, got 64.5"),
                                               ((None, 64, None), "k must be a positive int, got None"),
                                               ((1, 64, 64, 0), "sm_count must be a positive int, got 0")])
def test_choose_tiling_names_a_bad_argument(args, message):
    with pytest.raises(ValueError, match=f"choose_tiling: {message}"):
        ms.choose_tiling(*args)
    if len(args) == 3 and args[0] is None:  # the intervals of the rule check through it
        with pytest.raises(ValueError, match=f"choose_tiling: {message}"):
            ms.tiling_intervals(*args[1:])


@pytest.mark.parametrize("name", list(TILINGS))
def test_tilings_split_tensorize_and_mean_the_matmul(name):
    """Each tiling on shapes with tails in M, N and K (partial thread blocks, dropped tiles, store tails): every
    guard decided above the marks, every store a tensorized main tile or a predicated tail, the kernel (threads as
    serial loops) the matmul; padded to whole blocks ((b)) no guard under a mark, the same result."""
    tiling = TILINGS[name]
    rows, cols = tiling.block_tile
    for m, n, k in ((33, 17, 40), (rows + 5, cols + 19, 3), (1, 2 * cols - 7, tiling.block_k + 1)):
        mod = ms.matmul_mma_cuda(m, n, k, pipeline=False, tiling=tiling)
        assert analysis.conditions_under_marks(split_and_merge(mod)) == 0
        report = []
        mapped = stores_mapped(mod, report)
        assert {r.action for r in report} <= {"tensorized", "variable_length"}, [str(r) for r in report]
        run_on_llvm(mapped, m, n, k)
    padded = ms.matmul_mma_cuda(33, 17, 40, pipeline=False, pad_to_blocks=True, padded_output=True, tiling=tiling)
    assert analysis.conditions_under_marks(padded) == 0
    run_on_llvm(padded, 33, 17, 40)


def test_thin_tiling_every_small_m():
    """The decode-like 16 x 32 tiling, one symbolic-M kernel split, its stores mapped and compiled once (its
    allocations stay within int32, unlike the default tiling's: those tests specialize M), run for every M in 1..20
    (each residue of the 16-row tile, one and two thread-block rows) with N and K tails."""
    compiled = compiled_for_llvm(stores_mapped(ms.matmul_mma_cuda(None, 45, 20, pipeline=False,
                                                                  tiling=TILINGS["16x32"])))
    for m in range(1, 21):
        run_on_llvm(None, m, 45, 20, compiled=compiled)


@pytest.fixture(scope="module")
def prepared_1000():
    """1000 x 1000 x 1000 after TailSplit, the merge and tensorize_marked, and the report."""
    report = []
    return prepare_mma(ms.matmul_mma_cuda(1000, 1000, 1000), report=report), report


def test_every_mark_is_a_tensorized_main_tile(prepared_1000):
    """Every mark is mapped: each stage's main tile tensorized once (the merge leaves one tile per stage: the guard
    chain's cases of whole tiles share it), and only the store has tail tiles (8 rows and 8 columns of 1000 are a
    tail; the other stages run whole tiles on zero-filled operands)."""
    _, report = prepared_1000
    tensorized = [r.instruction for r in report if r.action == "tensorized"]
    tails = [r for r in report if r.action != "tensorized"]
    assert sorted(tensorized) == sorted(ms.MMA_MARKS.values()), [str(r) for r in report]
    assert tails and all(r.action == "variable_length" and r.instruction == ms.MMA_MARKS["store"] for r in tails)


SOURCE_SHAPES = {"127x255x129": (127, 255, 129), "1000": (1000, 1000, 1000), "Mx4096x4096": (None, 4096, 4096)}


@pytest.fixture(scope="module")
def sources():
    """The CUDA source of each of ``SOURCE_SHAPES`` (unpadded form), generated once for the module on first use."""
    cache = {}

    def source(name):
        if name not in cache:
            cache[name] = cuda_source(ms.matmul_mma_cuda(*SOURCE_SHAPES[name]), "sm_80", tir_pipeline=MMA_PIPELINE)
        return cache[name]

    return source


@pytest.fixture(scope="module")
def source_1000(sources):
    return sources("1000")


def test_cuda_source_has_mma_ldmatrix_cp_async(source_1000):
    for instruction in ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "ldmatrix.sync.aligned",
                        "cp.async.cg.shared.global", "cp.async.commit_group", "cp.async.wait_group"):
        assert instruction in source_1000, instruction
    # the fragments and accumulators of a thread: 4 + 4 tiles of 8 halves, 16 tiles of 8 floats (registers)
    assert "half A_pad_shared_dyn_warp_ptr[64]" in source_1000
    assert "float C_pad_warp_ptr[128]" in source_1000


# the accumulator store of a tail tile: one fragment element of C under its own bound
PREDICATED_STORE = re.compile(r"if \([^\n]*local_id[^\n]*\) \{\n\s*C_ptr\[")


@pytest.mark.parametrize("name", list(SOURCE_SHAPES))
def test_unpadded_source_has_no_padded_global_buffer(sources, name):
    """One kernel writing C itself: no padded C_pad in global memory and no copy-back kernel; the tail tiles'
    stores are predicated per fragment element (each shape has a tail in M or N)."""
    source = sources(name)
    assert "C_pad_ptr" not in source and "main_kernel_1" not in source
    assert "A_pad_ptr" not in source and "B_pad_ptr" not in source
    assert "float* __restrict__ C_ptr" in source
    assert PREDICATED_STORE.search(source)


@pytest.mark.parametrize("name", ["1000", "Mx4096x4096"])
def test_loads_zero_fill_through_cp_async_src_size(sources, name):
    """Rows whose length is a multiple of 8 halves: the edge chunks are zero-filled by cp.async's src-size
    operand (one instruction), not TVM's predicated cp.async plus a shared-memory store of zeros."""
    source = sources(name)
    assert "cp.async.cg.shared.global [%0], [%1], 16, %2;" in source
    assert "ptx_cp_async_legacy_pred" not in source and "st.shared.v4.u32" not in source


def test_padded_output_keeps_the_padded_form():
    """``padded_output=True``: the result goes through the padded C_pad and a copy-back kernel (the variant (b) of
    the benchmark compares against)."""
    source = cuda_source(ms.matmul_mma_cuda(127, 255, 129, padded_output=True), "sm_80", tir_pipeline=MMA_PIPELINE)
    assert "C_pad_ptr" in source and "main_kernel_1" in source


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", list(SOURCE_SHAPES))
def test_compiles_without_spills_or_local_memory(sources, name, arch):
    usages = {u.kernel: u for u in compile_cuda_source(sources(name), arch, ("-diag-suppress", "177"))}
    for usage in usages.values():
        print(usage)
    assert set(usages) == {"main_kernel"}
    main = usages["main_kernel"]
    assert 0 < main.registers <= 255
    assert (main.spill_store_bytes, main.spill_load_bytes, main.stack_frame_bytes) == (0, 0, 0)


# each of TILINGS on a shape with tails in M, N and K, and the rule's tiling of the benchmark's small shape
TILING_SOURCES = {**{name: (tiling, (33, 1000, 1000)) for name, tiling in TILINGS.items()},
                  "rule-127x255x129": (ms.choose_tiling(127, 255, 129), (127, 255, 129))}


@pytest.fixture(scope="module")
def tiling_sources():
    """The CUDA source of each of ``TILING_SOURCES`` (TailSplit, tensorize, pipelined), generated on first use."""
    cache = {}

    def source(name):
        if name not in cache:
            tiling, shape = TILING_SOURCES[name]
            cache[name] = cuda_source(ms.matmul_mma_cuda(*shape, tiling=tiling), "sm_80", tir_pipeline=MMA_PIPELINE)
        return cache[name]

    return source


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", list(TILING_SOURCES))
def test_tilings_compile_to_mma_without_spills(tiling_sources, name, arch):
    """Every tiling: mma.sync, ldmatrix and cp.async, the warp's accumulators and fragments in registers (8 per
    16 x 16 tile, the fragments double-buffered), predicated tail stores, one kernel; nvcc without spills (the
    registers are printed: ``pytest -s``)."""
    tiling = TILING_SOURCES[name][0]
    source = tiling_sources(name)
    for instruction in ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "ldmatrix.sync.aligned",
                        "cp.async.commit_group"):
        assert instruction in source, instruction
    rows, cols = tiling.warp_tiles
    registers = dict(re.findall(r"alignas\(64\) \w+ (C_pad_warp|A_pad_shared_dyn_warp)_ptr\[(\d+)\];", source))
    # at most the warp tile's (buffer compaction keeps the tiles a warp can reach inside the padded M)
    assert 0 < int(registers["C_pad_warp"]) <= 8 * rows * cols
    assert 0 < int(registers["A_pad_shared_dyn_warp"]) <= 16 * rows
    assert PREDICATED_STORE.search(source)
    usages = {u.kernel: u for u in compile_cuda_source(source, arch, ("-diag-suppress", "177"))}
    print(tiling.name(), *usages.values())
    assert set(usages) == {"main_kernel"}
    main = usages["main_kernel"]
    assert 0 < main.registers <= 255
    assert (main.spill_store_bytes, main.spill_load_bytes, main.stack_frame_bytes) == (0, 0, 0)


@pytest.mark.parametrize(("tiling", "shape"), [(ms.DEFAULT_TILING, (33, 17, 20)), (TILINGS["16x32"], (None, 45, 20)),
                                              (TILINGS["16x32"], (5, 45, 200))], ids=["default-K20", "16x32-K20",
                                                                                      "16x32-K200"])
def test_fewer_slices_than_stages_compile(tiling, shape):
    """K of fewer slices than the pipeline has stages (1 of 3; 1 and 2 of 4): the pipeline is cut to one stage
    more than the slices, so TVM's cp.async.wait_group counts stay constants and CUDA code generation accepts it."""
    k = shape[2]
    assert ms.pipeline_stages(tiling, k) == -(-k // tiling.block_k) + 1 < tiling.stages
    source = cuda_source(ms.matmul_mma_cuda(*shape, tiling=tiling), "sm_80", tir_pipeline=MMA_PIPELINE)
    assert "cp.async.wait_group" in source and "mma.sync" in source


# the kernel's cp.async copies (calls of TVM's cp.async helpers), commits and waits, in source order
CP_ASYNC_EVENT = re.compile(r"tvm_builtin_ptx_cp_async_(?:\w*_shared_global_\d+\(|commit_group\w*\(\);|"
                            r"wait_group\w*\(\);)")


def waits_before_commit(source: str) -> list[int]:
    """The source lines of the ``cp.async.wait_group`` calls that follow copies no ``commit_group`` has closed (in
    source order: the prologue, one iteration of the pipelined loop, the epilogue). A wait covers committed groups
    only, so what such a copy writes to shared memory may still be in flight after the wait and the barrier."""
    found, open_copies = [], False
    kernel = source[source.index("__global__"):]
    for number, line in enumerate(kernel.splitlines()):
        for event in CP_ASYNC_EVENT.findall(line):
            if "commit_group" in event:
                open_copies = False
            elif "wait_group" in event:
                if open_copies:
                    found.append(number)
            else:
                open_copies = True
    return found


@pytest.mark.parametrize(("tiling", "shape"), [
    (ms.DEFAULT_TILING, (33, 24, 24)),  # one slice: the pipeline cut to 2 stages
    (ms.MmaTiling(stages=2), (40, 40, 104)),  # 2 stages asked for, 4 slices
    (ms.tile_tiling(16, 32, 4096), (5, 48, 1000)),  # 4 stages over 8 slices of 128
    (ms.DEFAULT_TILING, (127, 256, 136)),  # 3 stages over 5 slices
], ids=["default-1-slice", "2-stages", "16x32-s4", "default-s3"])
def test_every_wait_covers_the_copies_before_it(tiling, shape):
    """A pipeline of 2 stages (asked for, or cut to 2 for one slice: every K <= block_k) had k1's first fragment
    loads in stage 0 beside the asynchronous copies they read, and TVM's InjectSoftwarePipeline then waited
    (``cp.async.wait_group 0``) before committing those copies: the first ldmatrix raced the copies of the first
    slice. The consumers now sit in stage 1 (``mma_schedule.k0_pipeline``): each wait follows the commit of the
    copies before it."""
    source = cuda_source(ms.matmul_mma_cuda(*shape, tiling=tiling), "sm_80", tir_pipeline=MMA_PIPELINE)
    assert "cp.async.cg.shared.global" in source and "cp.async.wait_group" in source
    assert waits_before_commit(source) == []


def test_waits_before_commit_finds_an_uncommitted_copy():
    copy = "tvm_builtin_ptx_cp_async_cg_src_size_async_cg_shared_global_16(dst, src, 16);"
    commit = "tvm_builtin_ptx_cp_async_commit_group_async_commit_group();"
    wait = "tvm_builtin_ptx_cp_async_wait_group_async_wait_group_0();"
    kernel = "\n".join(["__global__ void k() {", copy, wait, commit, copy, commit, wait, "}"])
    assert waits_before_commit(kernel) == [2]


@pytest.mark.parametrize(("tiling", "shape"), [
    (ms.tile_tiling(16, 32, 4096), (5, 45, 200)),  # 2 slices of 128: 3 stages
    (ms.MmaTiling((1, 2), (1, 1), 3, 4), (40, 33, 100)),  # 4 stages over 3 slices of 48 (all of them in flight)
    (ms.MmaTiling((1, 1), (1, 1), 2, 3), (17, 24, 40)),  # 3 stages over 2 slices
    (ms.DEFAULT_TILING, (33, 9, 15)),  # one slice: cut to 2 stages
    (ms.MmaTiling((1, 1), (1, 1), 2, 2), (17, 24, 100)),  # 2 stages over 4 slices (k0_pipeline's stage-1 consumers)
], ids=["16x32-s3", "w1x2-k3-s4", "16x16-s3", "default-1-slice", "16x16-s2"])
def test_pipelined_schedule_means_the_matmul(tiling, shape):
    """The software-pipelined schedule (TVM's InjectSoftwarePipeline runs on llvm too: its shared buffers and
    fragments multi-versioned, prologue and epilogue) with the copies synchronous (no
    ``software_pipeline_async_stages``: cp.async is CUDA's) and the threads serialized, each warp running its
    pipeline with every thread's copies: the matmul, C canary-guarded."""
    mod = ms.matmul_mma_cuda(*shape, tiling=tiling)
    run_on_llvm(drop_loop_annotation(stores_mapped(mod), "software_pipeline_async_stages"), *shape)


# ------------------------------------------------------------------------------------------------- on a GPU

ISSUE_SHAPES = [(4000, 4000, 4000), (1000, 4096, 4096), (127, 255, 129)]
SYMBOLIC_MS = (1, 16, 33, 127, 1000)


def run_on_gpu(executable, m, n, k, seed=0):
    """Run on the GPU with C inside canaries (``guarded_device_tensor``): a store outside C (a missing tail
    predicate) changes one."""
    device = tvm.cuda(0)
    a, b = inputs(m, n, k, seed)
    c = guarded_device_tensor((m, n), "float32", device, canary=-7.0)
    executable["main"](tvm.runtime.tensor(a, device), tvm.runtime.tensor(b, device), c.tensor)
    want = a.astype("float32") @ b.astype("float32")
    np.testing.assert_allclose(c.numpy("C"), want, rtol=1e-2, atol=1e-2 * max(1.0, np.sqrt(k) / 8))


@T.prim_func
def one_past(a: T.Buffer((4,), "float32"), c: T.Buffer((3,), "float32")):
    for i in range(4):  # writes c[3]: one element past c
        c[i] = a[i] * T.float32(2)


def test_guarded_device_tensor_catches_a_store_outside():
    """The canaries of ``run_on_gpu``, checked on the CPU device with a kernel that stores one element past C."""
    executable = tvm.compile(tvm.IRModule({"main": one_past}), target="llvm")
    c = guarded_device_tensor((3,), "float32", tvm.cpu(), canary=-7.0)
    executable["main"](tvm.runtime.tensor(np.ones(4, "float32")), c.tensor)
    with pytest.raises(AssertionError, match="out-of-bounds write after C: 1 canary"):
        c.numpy("C")
    assert (c.whole.numpy()[c.guard_elements:][:3] == 2).all()


def gpu_executable(m, n, k, padded_output=False, tiling=ms.DEFAULT_TILING):
    device = tvm.cuda(0)
    target = tvm.target.Target({"kind": "cuda", "arch": "sm_" + device.compute_version.replace(".", "")})
    return tvm.compile(ms.matmul_mma_cuda(m, n, k, padded_output=padded_output, tiling=tiling), target=target,
                       tir_pipeline=MMA_PIPELINE)


@pytest.mark.gpu
@pytest.mark.parametrize("padded_output", [False, True], ids=["unpadded", "padded"])
@pytest.mark.parametrize("shape", ISSUE_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_issue_shapes_on_the_gpu(shape, padded_output):
    run_on_gpu(gpu_executable(*shape, padded_output=padded_output), *shape)


@pytest.mark.gpu
@pytest.mark.parametrize("padded_output", [False, True], ids=["unpadded", "padded"])
def test_symbolic_m_one_kernel_on_the_gpu(padded_output):
    executable = gpu_executable(None, 4096, 4096, padded_output=padded_output)
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


# the GPU sweeps compile one kernel per pair or triple (several seconds of TVM each, one core): in this many tests
# each, which the GPU session's pytest-xdist processes run side by side
GPU_SWEEP_CHUNKS = 4


@pytest.mark.gpu
@pytest.mark.parametrize("chunk", range(GPU_SWEEP_CHUNKS))
def test_small_sweep_on_the_gpu(chunk):
    """The unpadded form (canary-guarded C) over M, N, K in 1..40 (``sweep_pairs``, M symbolic; every
    ``GPU_SWEEP_CHUNKS``-th pair from ``chunk``), and M = 0 (no kernel runs; C, empty, inside canaries)."""
    failures = []  # every pair runs (a GPU session is short): the failures are listed at the end
    for n, k in sweep_pairs()[chunk::GPU_SWEEP_CHUNKS]:
        try:
            executable = gpu_executable(None, n, k)
            for m in range(0, 41):
                run_on_gpu(executable, m, n, k, seed=m * 1601 + n * 41 + k)
        except Exception as error:  # noqa: BLE001 - reported below with its pair
            failures.append(f"N={n}, K={k}: {str(error).splitlines()[-1][:200]}")
    assert not failures, "\n".join(failures)


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(TILING_SOURCES))
def test_tilings_on_the_gpu(name):
    tiling, shape = TILING_SOURCES[name]
    run_on_gpu(gpu_executable(*shape, tiling=tiling), *shape)


@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 16, 33])
def test_rule_tilings_of_decode_shapes_on_the_gpu(m):
    """A static decode-like M with the rule's thin tiling (16 x 32 or 64 x 32 tiles, 128 thread blocks)."""
    run_on_gpu(gpu_executable(m, 4096, 4096, tiling=ms.choose_tiling(m, 4096, 4096)), m, 4096, 4096)


@pytest.mark.gpu
def test_thin_tiling_small_sweep_on_the_gpu():
    """The 16 x 32 tiling (M symbolic) over M in 0..40 and every fourth of ``sweep_pairs``."""
    for n, k in sweep_pairs()[::4]:
        executable = gpu_executable(None, n, k, tiling=TILINGS["16x32"])
        for m in range(0, 41):
            run_on_gpu(executable, m, n, k, seed=m * 1601 + n * 41 + k)


@pytest.mark.gpu
@pytest.mark.parametrize("chunk", range(GPU_SWEEP_CHUNKS))
def test_tail_triples_on_the_gpu(chunk):
    """The unpadded form with static shapes: ``tail_triples`` (each of M, N, K over 1..40; every
    ``GPU_SWEEP_CHUNKS``-th from ``chunk``)."""
    for m, n, k in tail_triples()[chunk::GPU_SWEEP_CHUNKS]:
        run_on_gpu(gpu_executable(m, n, k), m, n, k, seed=m * 1601 + n * 41 + k)


@pytest.mark.parametrize(("build", "message"), [
    (lambda: ms.matmul_mma_cuda(0, 64, 64), "matmul_mma_cuda: m must be a positive int or None, got 0"),
    (lambda: ms.matmul_mma_cuda(16, 64, -1), "matmul_mma_cuda: k must be a positive int, got -1"),
    (lambda: ms.matmul_mma_cuda_dispatch(0, 64), "matmul_mma_cuda_dispatch: n must be a positive int, got 0"),
])
def test_matmul_builders_name_a_bad_size(build, message):
    with pytest.raises(ValueError, match=message):
        build()


@pytest.mark.parametrize("tiling", [(16, 32), "16x32x128/4", None])
def test_matmul_mma_cuda_names_a_tiling_that_is_not_an_mma_tiling(tiling):
    # a block tile or a tiling's name passed by hand failed deep inside with "'tuple' object has no attribute
    # 'block_k'"
    with pytest.raises(TypeError, match=r"matmul_mma_cuda: tiling must be an MmaTiling .*, got "):
        ms.matmul_mma_cuda(16, 32, 32, tiling=tiling)


def test_sizes_past_32_bit_indices_are_refused():
    """The kernel computes A's, B's and C's element indices in 32-bit ints (``blockIdx.y * 524288`` at K = 4096):
    M = 600000 x K = 4096 wrapped around (a wrong result or a fault, without a word). A static size past the
    limit is refused by name; a symbolic M is checked by the host before the launch (``max_rows``)."""
    assert ms.max_rows(4096, 4096, ms.DEFAULT_TILING) == 524288  # (524288 - 1) * 4096 + 4096 = 2 ** 31
    ms.matmul_mma_cuda(524288, 4096, 4096, pipeline=False)
    with pytest.raises(ValueError, match=r"matmul_mma_cuda: m = 524289 with n = 4096, k = 4096: .* 32-bit element "
                                         r"indices .* \(the largest m is 524288\)"):
        ms.matmul_mma_cuda(524289, 4096, 4096)
    with pytest.raises(ValueError, match=r"matmul_mma_cuda_dispatch: n = 50000, k = 50000: .* indices of B pass"):
        ms.matmul_mma_cuda_dispatch(50000, 50000)
    tiling = ms.choose_tiling(None, 24, 40)
    limit = ms.max_rows(24, 40, tiling)
    host, _ = host_after_packed_api(ms.matmul_mma_cuda(None, 24, 40, tiling=tiling), cuda_target("sm_90"),
                                    MMA_PIPELINE)
    checks = []
    tvm_ffi.structural_walk(host.body, (tvm.tirx.AssertStmt, lambda node: checks.append(node)
                                        if "m must be at most" in str(node.message_parts) else None))
    (check,) = checks
    assert [evaluate(check.condition, {"m": m}) for m in (0, limit, limit + 1)] == [1, 1, 0]


def test_the_mma_pipeline_refuses_a_module_for_another_target():
    # its intrinsics are CUDA's (mma.sync, ldmatrix, cp.async): on llvm TVM failed deep inside with "IntImm can
    # only take scalar"; the llvm pipeline is "tailsplit"
    with pytest.raises(ValueError, match=r'tailsplit_mma: function main is compiled for llvm; .*"tailsplit" on llvm'):
        tvm.compile(workloads.matmul_fp32(9, 17, 3), target="llvm", tir_pipeline="tailsplit_mma")
