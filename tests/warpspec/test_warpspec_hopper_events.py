"""The generated sm_90a CUDA of the Hopper GEMMs, simulated event by event on the CPU (`cuda_events`).

Each kernel (warp-specialized with static, symbolic and zero-filled K; the persistent form; the unspecialized
ablation) runs safely in random interleavings with TMA copies landing late, and stores every C element once from
the register holding the products of its A row and B row over every K step. Planted bugs in the generated text
(the audit's mutations) are each reported with their kind, so the checks bite.
"""

import functools
import re

import pytest
import tvm
from tvm.script import tirx as T

from tvm_tailsplit import TailSplit
from tvm_tailsplit.cuda import compile_cuda_source, cuda_source
from tvm_tailsplit.warpspec import (
    WARP_SPECIALIZED_PIPELINE,
    WarpSpecialize,
    WarpSpecializeInputError,
    analyze,
    check,
    examples,
    tile_plan,
)
from tvm_tailsplit.warpspec.ablation import unspecialized_hopper_kernel
from tvm_tailsplit.warpspec.hopper import hopper_protocol
from tvm_tailsplit.warpspec.protocol import ARRIVE, WAIT
from tvm_tailsplit.warpspec.transactions import transaction_protocol

from .cuda_events import (
    COVERAGE,
    DEADLOCK,
    DESCRIPTOR,
    EARLY_READ,
    FRAGMENT,
    HALF_BYTES,
    MISALIGNED,
    REGISTERS,
    STAGE_RACE,
    SWIZZLE_ATOM_BYTES,
    TRANSACTION,
    TRAP,
    UNRETIRED_STORE,
    KernelFault,
    Ring,
    check_descriptor_encoder,
    gemm_rings,
    simulate_gemm,
    transpile,
)


@functools.cache
def _source(m: int, n: int, k: int | None, zero_fill: bool = False, ctas: int | None = None,
            specialized: bool = True, tail_split: bool = False) -> str:
    mod = tvm.IRModule({"main": examples.hopper_gemm_kernel(m, n, k, zero_fill_k=zero_fill, ctas=ctas)})
    if tail_split:
        mod = TailSplit(strategy="partial")(mod)
    mod = (WarpSpecialize("cuda", hopper=True)(mod) if specialized
           else tvm.IRModule({"main": unspecialized_hopper_kernel(mod["main"])}))
    return cuda_source(mod, "sm_90a", tir_pipeline=WARP_SPECIALIZED_PIPELINE)


def _simulate(source: str, m: int, n: int, k: int, grid: tuple[int, int], seed: int = 0) -> None:
    check_descriptor_encoder(source)
    assert simulate_gemm(transpile(source), m, n, k, grid, seed) == m * n


@pytest.mark.parametrize("seed", [0, 1])
def test_warp_specialized_kernel_over_a_grid_of_ctas(seed):
    _simulate(_source(256, 512, 256), 256, 512, 256, (2, 2), seed)


@pytest.mark.parametrize("k,zero_fill", [(64, False), (512, False), (0, True), (8, True), (200, True)])
def test_symbolic_k_kernel(k, zero_fill):
    """Fewer K tiles than stages, more (stages are reused, groups stay in flight), none, a partial one."""
    _simulate(_source(128, 256, None, zero_fill), 128, 256, k, (1, 1), seed=k)


@pytest.mark.parametrize("k,kernel_k,ctas", [(200, None, 3), (320, 320, 1)])
def test_persistent_kernel(k, kernel_k, ctas):
    """4 tiles on 3 CTAs (CTA 0 runs two) or all on one: the running step `tt * N_k + ko` carries stages and
    phases from tile to tile."""
    _simulate(_source(256, 512, kernel_k, zero_fill=kernel_k is None, ctas=ctas), 256, 512, k, (ctas, 1), seed=k)


@pytest.mark.parametrize("k", [72, 320])
def test_unspecialized_ablation(k):
    _simulate(_source(128, 256, None, zero_fill=True, specialized=False), 128, 256, k, (1, 1), seed=k)


@pytest.mark.parametrize("tail_split", [False, True], ids=["guarded", "tailsplit"])
@pytest.mark.parametrize("form", ["warp_specialized", "persistent", "ablation"])
def test_ragged_output(form, tail_split):
    """200 x 300 on 128 x 256 tiles: a main tile, tail tiles in rows, columns and both (the bottom band of the last
    row of tiles holds 8 rows); K = 136, two full K tiles and a zero-filled one."""
    ctas = 3 if form == "persistent" else None
    source = _source(200, 300, None, zero_fill=True, ctas=ctas, specialized=form != "ablation",
                     tail_split=tail_split)
    _simulate(source, 200, 300, 136, (ctas, 1) if ctas else (2, 2), seed=7)


def test_a_ragged_store_without_its_row_guard_is_a_coverage_fault():
    """The guard of the output's rows dropped from the bottom band's stores (TVM simplifies `by * 128 + 64 + row <
    200` to `(tx >> 8) + by < 2`): the rows past M of the last row of tiles are written."""
    source = _source(200, 300, None, zero_fill=True)
    unguarded = source.replace("if ((((((int)threadIdx.x) >> 8) + ((int)blockIdx.y)) < 2) && ", "if (")
    assert unguarded != source
    with pytest.raises(KernelFault, match="of the 60000 C elements stored") as fault:
        _simulate(unguarded, 200, 300, 136, (2, 2))
    assert fault.value.kind == COVERAGE


def _planted(source: str, old: str, new: str, count: int = 1) -> str:
    assert old in source, f"the mutation's text {old!r} is no longer generated: update the mutation"
    return source.replace(old, new, count)


# A planted bug's kind can depend on the interleaving (a flipped parity reads early if the consumer comes first,
# else waits for a phase that never comes), and some interleavings hide it (a stage released twice harms only when
# the producer refills it early): the seeds are fixed, tried in turn until one reports the bug, and the kinds
# listed are those the bug can give.
PLANTED_SEEDS = range(6)


def _first_fault(source: str, m: int, n: int, k: int, grid: tuple[int, int]) -> KernelFault:
    """The fault of the first of `PLANTED_SEEDS` whose simulation reports one (the test fails if none does)."""
    for seed in PLANTED_SEEDS:
        try:
            _simulate(source, m, n, k, grid, seed)
        except KernelFault as fault:
            return fault
    pytest.fail(f"no fault in the simulations of seeds {list(PLANTED_SEEDS)}")


SYMBOLIC_K_MUTATIONS = {
    "consumer full-barrier parity flipped": (
        "((ko_r1 & 7) >> 2))", "(((ko_r1 & 7) >> 2) ^ 1))", 1, {EARLY_READ, DEADLOCK}),
    "producer skips the empty-barrier waits": (
        "if (4 <= ko_r0) {", "if (4 <= ko_r0 && 0) {", -1, {STAGE_RACE, DEADLOCK}),
    "consumer releases the stage it reads instead of the previous one": (
        "[(((ko_r1 + 3) & 3) + 8)]", "[((ko_r1 & 3) + 8)]", 1, {STAGE_RACE, DEADLOCK}),
    "no wait_group 1 before the release": (
        "tvm_builtin_ptx_wgmma_wait_group_wait_group_sync_aligned_1();", "", 1, {STAGE_RACE}),
    "expect_tx short by 32 bytes": ("(uint)49152", "(uint)49120", 1, {TRANSACTION}),
    "K step descriptor 16 bytes short": ("+ 528)])), 1, 64, 3)", "+ 520)])), 1, 64, 3)", 1, {DESCRIPTOR}),
    "descriptor without swizzle": ("+ 528)])), 1, 64, 3)", "+ 528)])), 1, 64, 0)", 1, {DESCRIPTOR}),
    "fragment registers 1 and 2 swapped in a store": (
        "make_float2(acc_r1_ptr[0], acc_r1_ptr[1]);", "make_float2(acc_r1_ptr[0], acc_r1_ptr[2]);", 1, {FRAGMENT}),
    "register pair stored one element off": ("- 16384)) = make_float2(", "- 16383)) = make_float2(", 1, {MISALIGNED}),
    "fragment registers 1 and 2 swapped in a wgmma": (
        "(acc_r1_ptr[0], acc_r1_ptr[1], acc_r1_ptr[2],", "(acc_r1_ptr[0], acc_r1_ptr[2], acc_r1_ptr[1],", 1,
        {FRAGMENT}),
    "empty barrier expects 129 arrivals": ("[8]))), (uint)128)", "[8]))), (uint)129)", 1, {DEADLOCK}),
    "consumer warpgroups take 240 registers": (
        "setmaxnreg_inc_sync_aligned_u32_232", "setmaxnreg_inc_sync_aligned_u32_240", -1, {REGISTERS}),
    "ring checked at a shared address off the swizzle atom": (
        "buf_dyn_shmem_ptr)[512]))) & (uint)1023)", "buf_dyn_shmem_ptr)[520]))) & (uint)1023)", 1, {TRAP}),
    "descriptor encoder with the 64-byte swizzle layout": (
        "case 3: _desc.bitfield.layout_type_ = uint8_t(1)", "case 3: _desc.bitfield.layout_type_ = uint8_t(2)", 1,
        {DESCRIPTOR}),
}


@pytest.mark.parametrize("name", SYMBOLIC_K_MUTATIONS)
def test_planted_bug_in_the_symbolic_k_kernel_is_reported(name):
    old, new, count, kinds = SYMBOLIC_K_MUTATIONS[name]
    planted = _planted(_source(128, 256, None), old, new, count)
    fault = _first_fault(planted, 128, 256, 512, (1, 1))
    assert fault.kind in kinds, str(fault)


PERSISTENT_MUTATIONS = {
    "no release of a tile's last stage": (
        "tvm_builtin_ptx_mbarrier_arrive_nocount_arrive_shared_b64(tvm_builtin_cuda_cvta_generic_to_shared("
        "(&(((uint64_t*)buf_dyn_shmem_ptr)[(tt_r1 + 8)]))));", "", {DEADLOCK}),
    "in-loop release also at ko = 0 (released twice)": (
        "&& (1 <= ko_r1)) {", "&& (0 <= ko_r1)) {", {STAGE_RACE, DEADLOCK, FRAGMENT}),
    "no drain before the stores": ("tvm_builtin_ptx_wgmma_wait_group_wait_group_sync_aligned_0();", "",
                                   {UNRETIRED_STORE}),
    "consumer parity of the running step off by a tile": (
        "((((tt_r1 * 5) + ko_r1) & 7) >> 2));", "((((tt_r1 * 4) + ko_r1) & 7) >> 2));", {EARLY_READ, DEADLOCK}),
}


@pytest.mark.parametrize("name", PERSISTENT_MUTATIONS)
def test_planted_bug_in_the_persistent_kernel_is_reported(name):
    """All 4 tiles on one CTA (the most tile-to-tile carries), K = 320: 5 K steps a tile, 20 in all."""
    old, new, kinds = PERSISTENT_MUTATIONS[name]
    planted = _planted(_source(256, 512, 320, ctas=1), old, new)
    fault = _first_fault(planted, 256, 512, 320, (1, 1))
    assert fault.kind in kinds, str(fault)


def test_a_missing_cta_or_a_doubled_store_is_a_coverage_fault():
    with pytest.raises(KernelFault, match="32768 of the 131072 C elements stored"):
        simulate_gemm(transpile(_source(256, 512, 256)), 256, 512, 256, (1, 1), seed=0)
    source = _source(128, 256, None)
    store = re.search(r"\*\(float2\*\)\(C_ptr \+ .+?\) = make_float2\(acc_r1_ptr\[0\], acc_r1_ptr\[1\]\);", source)
    doubled = source.replace(store[0], f"{store[0]}\n{store[0]}", 1)
    with pytest.raises(KernelFault) as fault:
        _simulate(doubled, 128, 256, 64, (1, 1))
    assert fault.value.kind == COVERAGE and "stored 2 times" in str(fault.value)


def test_a_fragment_stored_without_its_zero_fill_is_a_fragment_fault():
    """K = 0: no wgmma writes the fragment, so without the fill the stores write uninitialized registers."""
    source = _source(128, 256, None, zero_fill=True)
    unfilled = re.sub(r"acc_r1_ptr\[\d+\] = 0x0p\+0f/\*0\.000000e\+00\*/;", "", source)
    assert unfilled != source
    with pytest.raises(KernelFault, match="which no fill or wgmma wrote") as fault:
        _simulate(unfilled, 128, 256, 0, (1, 1))
    assert fault.value.kind == FRAGMENT


@pytest.mark.parametrize("old,new,message", [
    ("tvm_builtin_cuda_cta_sync();", "tvm_builtin_ptx_bar_sync_count_sync((uint)1, (uint)384);",
     "cannot parse the kernel line 'tvm_builtin_ptx_bar_sync_count_sync"),
    ("(uint)49152", "(uint)(K ? 49152 : 0)", "cannot parse the kernel line"),
    ("if (4 <= ko_r0) {", "if ((ko_r0 < 4) ? 0 : 1) {", r"unsupported C expression '\(ko_r0 < 4\) \? 0 : 1'"),
])
def test_unknown_generated_text_is_rejected_by_name(old, new, message):
    """A codegen change in TVM breaks the transpiler loudly, naming the line (it never passes silently)."""
    with pytest.raises(ValueError, match=message):
        transpile(_planted(_source(128, 256, None), old, new))


@functools.cache
def _tiled_source(m: int | None, n: int, block_m: int, block_n: int, stages: int, ctas: int | None) -> str:
    func = examples.hopper_gemm_kernel(m, n, None, block_m=block_m, block_n=block_n, stages=stages, zero_fill_k=True,
                                       ctas=ctas)
    mod = tvm.transform.Sequential([TailSplit(strategy="partial"), WarpSpecialize("cuda", hopper=True,
                                                                                   debug_check=True)])(
        tvm.IRModule({"main": func}))
    return cuda_source(mod, "sm_90a", tir_pipeline=WARP_SPECIALIZED_PIPELINE)


@pytest.mark.parametrize("block_m,block_n,stages,ctas", [
    (128, 256, 1, None), (128, 256, 3, None), (128, 128, 5, None), (128, 128, 7, 5),  # stages: C `%` of the step
    (256, 200, 2, None), (256, 24, 3, 2), (128, 40, 4, 3),  # other accepted tiles, persistent over 26, 24 tiles
])
@pytest.mark.parametrize("k", [16, 392])
def test_every_stage_count_and_accepted_tile(block_m, block_n, stages, ctas, k):
    """A symbolic M at a ragged 257 x 300, K = 16 (zero-filled to one K tile) or 392 (7 K tiles, fewer or more
    than the stages): every C element stored once from the right register, also where the stage or CTA count is not a
    power of two (a C `%`, which the transpiler refused)."""
    m, n = 257, 300
    source = _tiled_source(None, n, block_m, block_n, stages, ctas)
    check_descriptor_encoder(source)
    grid = (ctas, 1) if ctas else (-(-n // block_n), -(-m // block_m))
    stored = simulate_gemm(transpile(source), m, n, k, grid, seed=k + stages,
                           rings=gemm_rings(block_m, block_n, stages))
    assert stored == m * n


def _fragment_band_gemm(block_m: int, block_n: int, out_cols: int, store_role: int = 1, k: int = 128,
                        stages: int = 2, b_stages: int = 2, double_top: bool = False) -> tvm.tirx.PrimFunc:
    """C = A @ B.T (A: block_m x k, B: block_n x k) on one CTA, two compute roles of `block_m / 2` rows whose
    wgmma tiles span all `block_n` columns of the accumulator, the stores reading only its first `out_cols` columns
    (C has `out_cols` columns, the accumulator as many as C or the wgmma tiles); the top band's store runs on warp
    role `store_role`; A's ring has `stages` stages, B's `b_stages`. `double_top`: a task of role 1 doubles the top
    band of C after its store, its rows in reverse order."""
    band, acc_cols = block_m // 2, max(block_n, out_cols)

    @T.prim_func(s_tir=True)
    def gemm(A: T.Buffer((block_m, k), "float16"), B: T.Buffer((block_n, k), "float16"),
             C: T.Buffer((block_m, out_cols), "float32")):
        T.func_attr({"global_symbol": "gemm", "tirx.noalias": True})
        A_ring = T.sblock_alloc_buffer((stages, block_m, 64), "float16", scope="shared")
        B_ring = T.sblock_alloc_buffer((b_stages, block_n, 64), "float16", scope="shared")
        acc = T.sblock_alloc_buffer((block_m, acc_cols), "float32", scope="shared")
        with T.sblock("init_top"):
            T.reads()
            T.writes(acc[0:band, 0:block_n])
            T.sblock_attr({"warp_role": 1})
            for i, j in T.grid(band, block_n):
                acc[i, j] = T.float32(0)
        with T.sblock("init_bottom"):
            T.reads()
            T.writes(acc[band:block_m, 0:block_n])
            T.sblock_attr({"warp_role": 2})
            for i, j in T.grid(band, block_n):
                acc[band + i, j] = T.float32(0)
        for ko in range(k // 64):
            with T.sblock("load_A"):
                T.reads(A[0:block_m, ko * 64:ko * 64 + 64])
                T.writes(A_ring[ko % stages, 0:block_m, 0:64])
                T.sblock_attr({"warp_role": 0})
                for i, j in T.grid(block_m, 64):
                    A_ring[ko % stages, i, j] = A[i, ko * 64 + j]
            with T.sblock("load_B"):
                T.reads(B[0:block_n, ko * 64:ko * 64 + 64])
                T.writes(B_ring[ko % b_stages, 0:block_n, 0:64])
                T.sblock_attr({"warp_role": 0})
                for i, j in T.grid(block_n, 64):
                    B_ring[ko % b_stages, i, j] = B[i, ko * 64 + j]
            with T.sblock("mma_top"):
                T.reads(A_ring[ko % stages, 0:band, 0:64], B_ring[ko % b_stages, 0:block_n, 0:64],
                        acc[0:band, 0:block_n])
                T.writes(acc[0:band, 0:block_n])
                T.sblock_attr({"warp_role": 1})
                for i, j, kk in T.grid(band, block_n, 64):
                    acc[i, j] = acc[i, j] + T.Cast("float32", A_ring[ko % stages, i, kk]) * T.Cast(
                        "float32", B_ring[ko % b_stages, j, kk])
            with T.sblock("mma_bottom"):
                T.reads(A_ring[ko % stages, band:block_m, 0:64], B_ring[ko % b_stages, 0:block_n, 0:64],
                        acc[band:block_m, 0:block_n])
                T.writes(acc[band:block_m, 0:block_n])
                T.sblock_attr({"warp_role": 2})
                for i, j, kk in T.grid(band, block_n, 64):
                    acc[band + i, j] = acc[band + i, j] + T.Cast("float32", A_ring[ko % stages, band + i, kk]) * (
                        T.Cast("float32", B_ring[ko % b_stages, j, kk]))
        with T.sblock("store_top"):
            T.reads(acc[0:band, 0:out_cols])
            T.writes(C[0:band, 0:out_cols])
            T.sblock_attr({"warp_role": store_role})
            for i, j in T.grid(band, out_cols):
                C[i, j] = acc[i, j]
        if double_top:
            with T.sblock("double_top"):
                T.reads(C[0:band, 0:out_cols])
                T.writes(C[0:band, 0:out_cols])
                T.sblock_attr({"warp_role": 1})
                for i, j in T.grid(band, out_cols):
                    C[band - 1 - i, j] = C[band - 1 - i, j] * T.float32(2)
        with T.sblock("store_bottom"):
            T.reads(acc[band:block_m, 0:out_cols])
            T.writes(C[band:block_m, 0:out_cols])
            T.sblock_attr({"warp_role": 2})
            for i, j in T.grid(band, out_cols):
                C[band + i, j] = acc[band + i, j]

    return gemm


@pytest.mark.parametrize("block_m,block_n,out_cols", [
    (256, 128, 120),  # two 64-row wgmma blocks per role: the second block's registers start at 64, not 60
    (128, 128, 100),  # a last column block of 4 columns (the stores ran 100 // 8 = 12 blocks)
    (256, 64, 36),
])
def test_stores_reading_part_of_the_fragment_columns(block_m, block_n, out_cols):
    """Every C element stored once from the register the wgmma tiles accumulate it in, where the stores read fewer
    columns than the wgmma tiles write (the fragment's layout is the wgmma's, whatever the store reads)."""
    func = _fragment_band_gemm(block_m, block_n, out_cols)
    mod = WarpSpecialize("cuda", hopper=True, debug_check=True)(tvm.IRModule({"main": func}))
    source = cuda_source(mod, "sm_90a", tir_pipeline=WARP_SPECIALIZED_PIPELINE)
    stored = simulate_gemm(transpile(source), block_m, out_cols, 128, (1, 1), seed=out_cols,
                           rings=gemm_rings(block_m, block_n, 2))
    assert stored == block_m * out_cols


def test_rings_of_different_stage_counts_in_one_tma_batch():
    """A's ring of 4 stages, B's of 2: load_B's acquire (the release of B's stage two steps back) stood between the
    batch's copies, so the batch was not merged into one transaction and the kernel was refused ('TMA load task
    'load_A' signals no transaction channel ... see the log'); the acquire now precedes the batch's expect_tx."""
    func = _fragment_band_gemm(256, 128, 128, k=512, stages=4, b_stages=2)
    mod = WarpSpecialize("cuda", hopper=True, debug_check=True)(tvm.IRModule({"main": func}))
    source = cuda_source(mod, "sm_90a", tir_pipeline=WARP_SPECIALIZED_PIPELINE)
    b = Ring("B", SWIZZLE_ATOM_BYTES // HALF_BYTES, 128, 2)  # the smaller allocation first (gemm_rings)
    a = Ring("A", b.base + b.stages * b.stage_size, 256, 4)
    for seed in range(3):
        assert simulate_gemm(transpile(source), 256, 128, 512, (1, 1), seed=seed, rings=(a, b)) == 256 * 128


def test_a_task_reading_what_its_role_s_fragment_store_wrote_follows_the_role_s_barrier():
    """double_top reads C, which store_top's threads store from their fragment registers: without the role's named
    barrier between them (there was none: only generic tasks were followed by one) a thread doubled elements that
    other threads had not stored yet."""
    func = _fragment_band_gemm(128, 64, 64, double_top=True)
    lines = WarpSpecialize("cuda", hopper=True, debug_check=True)(tvm.IRModule({"main": func})).script().splitlines()
    stores = [n for n, line in enumerate(lines) if "C[" in line and "acc_r1[" in line]
    doubling = next(n for n, line in enumerate(lines) if "C[" in line and "T.float32(2" in line)
    assert stores and max(stores) < doubling
    assert any("T.ptx.bar(T.uint32(2), T.uint32(128)" in line for line in lines[max(stores):doubling])
    # the GEMM alone (no task of the role touching C after the store) has no such barrier
    plain = WarpSpecialize("cuda", hopper=True)(tvm.IRModule({"main": _fragment_band_gemm(128, 64, 64)})).script()
    assert "T.ptx.bar(" not in plain


def test_a_fragment_band_shared_by_two_roles_is_refused_naming_them():
    """The top band's store on a third consumer role would read its own registers, which no fill or wgmma wrote."""
    with pytest.raises(WarpSpecializeInputError, match=r"rows 0:128 \(tasks \['init_top', 'mma_top'\], warp role "
                                                       r"1\) and rows 0:128 \(tasks \['store_top'\], warp role 3\)"):
        tile_plan(analyze(_fragment_band_gemm(256, 64, 64, store_role=3)).tree)


def test_a_store_reading_columns_past_the_wgmma_tiles_is_refused_naming_it():
    with pytest.raises(WarpSpecializeInputError, match="fragment store 'store_top' reads columns 0:72 of the "
                                                       r"accumulator 'acc', but the wgmma tiles \['mma_top'\]"):
        tile_plan(analyze(_fragment_band_gemm(128, 64, 72)).tree)


def _gram_gemm(k: int = 512, clear: str = "", prepare: bool = False, note: bool = False) -> tvm.tirx.PrimFunc:
    """C = A @ B.T (A: 128 x k, B: 64 x k; compute roles 1 and 2 of 64 rows) and D = A[0:64] @ A[0:64].T by a
    third compute role (3) whose wgmma tiles read only A's ring; 2 stages. `clear="A"` or `"B"`: a fifth role (4)
    then zeroes that input's first 64 columns (which the copies of step 0 read). `prepare`: a fifth role (4) first
    fills A's first 64 columns with ones, which the TMA copy of step 0 then reads. `note`: the copy role also writes
    `notes[ko]` after each step's copies, and a fifth role (4) reads the notes and then zeroes A's last 64 columns
    (which the copies of the last step read)."""
    stages = 2
    rows = {"A": 128, "B": 64, "": 0}[clear]

    @T.macro
    def init(acc, name, role, row0):
        with T.sblock(name):
            T.reads()
            T.writes(acc[row0:row0 + 64, 0:64])
            T.sblock_attr({"warp_role": role})
            for i, j in T.grid(64, 64):
                acc[row0 + i, j] = T.float32(0)

    @T.macro
    def mma(A_ring, B_ring, acc, ko, name, role, row0):
        with T.sblock(name):
            T.reads(A_ring[ko % stages, row0:row0 + 64, 0:64], B_ring[ko % stages, 0:64, 0:64],
                    acc[row0:row0 + 64, 0:64])
            T.writes(acc[row0:row0 + 64, 0:64])
            T.sblock_attr({"warp_role": role})
            for i, j, kk in T.grid(64, 64, 64):
                acc[row0 + i, j] = acc[row0 + i, j] + T.Cast("float32", A_ring[ko % stages, row0 + i, kk]) * T.Cast(
                    "float32", B_ring[ko % stages, j, kk])

    @T.macro
    def store(acc, C, name, role, row0):
        with T.sblock(name):
            T.reads(acc[row0:row0 + 64, 0:64])
            T.writes(C[row0:row0 + 64, 0:64])
            T.sblock_attr({"warp_role": role})
            for i, j in T.grid(64, 64):
                C[row0 + i, j] = acc[row0 + i, j]

    @T.macro
    def clear_input(X, rows):
        with T.sblock("clear"):
            T.reads()
            T.writes(X[0:rows, 0:64])
            T.sblock_attr({"warp_role": 4})
            for i, j in T.grid(rows, 64):
                X[i, j] = T.float16(0)

    @T.prim_func(s_tir=True)
    def gemm(A: T.Buffer((128, k), "float16"), B: T.Buffer((64, k), "float16"), C: T.Buffer((128, 64), "float32"),
             D: T.Buffer((64, 64), "float32")):
        T.func_attr({"global_symbol": "gemm", "tirx.noalias": True})
        A_ring = T.sblock_alloc_buffer((stages, 128, 64), "float16", scope="shared")
        B_ring = T.sblock_alloc_buffer((stages, 64, 64), "float16", scope="shared")
        acc = T.sblock_alloc_buffer((128, 64), "float32", scope="shared")
        gram = T.sblock_alloc_buffer((64, 64), "float32", scope="shared")
        notes = T.sblock_alloc_buffer((k // 64,), "float32")
        init(acc, "init_top", 1, 0)
        init(acc, "init_bottom", 2, 64)
        with T.sblock("init_gram"):
            T.reads()
            T.writes(gram[0:64, 0:64])
            T.sblock_attr({"warp_role": 3})
            for i, j in T.grid(64, 64):
                gram[i, j] = T.float32(0)
        if prepare:
            with T.sblock("prepare"):
                T.reads()
                T.writes(A[0:128, 0:64])
                T.sblock_attr({"warp_role": 4})
                for i, j in T.grid(128, 64):
                    A[i, j] = T.float16(1)
        for ko in range(k // 64):
            with T.sblock("load_A"):
                T.reads(A[0:128, ko * 64:ko * 64 + 64])
                T.writes(A_ring[ko % stages, 0:128, 0:64])
                T.sblock_attr({"warp_role": 0})
                for i, j in T.grid(128, 64):
                    A_ring[ko % stages, i, j] = A[i, ko * 64 + j]
            with T.sblock("load_B"):
                T.reads(B[0:64, ko * 64:ko * 64 + 64])
                T.writes(B_ring[ko % stages, 0:64, 0:64])
                T.sblock_attr({"warp_role": 0})
                for i, j in T.grid(64, 64):
                    B_ring[ko % stages, i, j] = B[i, ko * 64 + j]
            if note:
                with T.sblock("note"):
                    T.reads()
                    T.writes(notes[ko:ko + 1])
                    T.sblock_attr({"warp_role": 0})
                    notes[ko] = T.float32(1)
            with T.sblock("mma_gram"):
                T.reads(A_ring[ko % stages, 0:64, 0:64], gram[0:64, 0:64])
                T.writes(gram[0:64, 0:64])
                T.sblock_attr({"warp_role": 3})
                for i, j, kk in T.grid(64, 64, 64):
                    gram[i, j] = gram[i, j] + T.Cast("float32", A_ring[ko % stages, i, kk]) * T.Cast(
                        "float32", A_ring[ko % stages, j, kk])
            mma(A_ring, B_ring, acc, ko, "mma_top", 1, 0)
            mma(A_ring, B_ring, acc, ko, "mma_bottom", 2, 64)
        with T.sblock("store_gram"):
            T.reads(gram[0:64, 0:64])
            T.writes(D[0:64, 0:64])
            T.sblock_attr({"warp_role": 3})
            for i, j in T.grid(64, 64):
                D[i, j] = gram[i, j]
        store(acc, C, "store_top", 1, 0)
        store(acc, C, "store_bottom", 2, 64)
        if clear == "A":
            clear_input(A, rows)
        if clear == "B":
            clear_input(B, rows)
        if note:
            with T.sblock("clear_last"):
                T.reads(notes[0:k // 64])
                T.writes(A[0:128, k - 64:k])
                T.sblock_attr({"warp_role": 4})
                for i, j in T.grid(128, 64):
                    A[i, k - 64 + j] = T.float16(0)

    return gemm


def test_a_consumer_of_a_batch_s_first_copy_only_waits_for_the_batch_transaction():
    """mma_gram reads only A's ring: load_A's commit to it stood between the batch's copies, so the batch was not
    merged and the kernel was refused ('TMA load task 'load_A' signals no transaction channel ... see the log').
    Every consumer of the batch now waits for its one transaction, which completes after both copies."""
    func = _gram_gemm()
    analysis = analyze(func)
    plan = tile_plan(analysis.tree)
    assert len(plan.mmas) == 3 and "mma_gram" in plan.mmas
    protocol = hopper_protocol(analysis.protocol, plan)
    (arrive,) = [op for op in protocol.ops["load_A"] if op.tx_copies]
    assert [name for name, _ in arrive.tx_copies] == ["load_A", "load_B"] and arrive.tx_bytes == 128 * 128 + 64 * 128
    assert not [op for op in protocol.ops.get("load_B", ()) if op.action == ARRIVE]
    for task in plan.mmas:
        (wait,) = [op for op in protocol.before(task) if op.action == WAIT]
        assert wait.signalling_group == arrive.group, task
    assert check(func, hopper=True).ok
    WarpSpecialize("cuda", hopper=True, debug_check=True)(tvm.IRModule({"main": func}))


def _unmerged(clear: str) -> dict[str, str]:
    """`transaction_protocol`'s reasons for the batches of `_gram_gemm(clear=clear)` it leaves as they are, with the
    tiles of the kernel without the clearing task (tile_plan itself refuses the copies whose source is overwritten)."""
    tiles = tile_plan(analyze(_gram_gemm()).tree)
    return transaction_protocol(analyze(_gram_gemm(clear=clear)).protocol, tiles).unmerged


def test_a_release_between_the_copies_of_a_tma_batch_is_refused_naming_it():
    """clear zeroes what load_A's first copy reads, so load_A releases A to it between the batch's copies; the
    refusal said only "its batch's commits could not be merged; see the log"."""
    assert _unmerged("A")["load_A"].startswith(
        "its batch ['load_A', 'load_B'] was kept as it is: load_A releases A[0:128, ko * 64:ko * 64 + 64] to clear "
        "(warp role 4, channels [12], which then writes it) right after issuing its copy")


def test_a_release_after_the_last_copy_of_a_tma_batch_is_refused_naming_it():
    """clear zeroes B[0:64, 0:64], which load_B's first copy reads: the batch was merged with load_B's release to
    clear right after issuing its TMA copy, which reads B asynchronously, so clear could zero B before the copy
    read it (and check called the protocol safe)."""
    assert _unmerged("B")["load_A"].startswith(
        "its batch ['load_A', 'load_B'] was kept as it is: load_B releases B[0:64, ko * 64:ko * 64 + 64] to clear "
        "(warp role 4, channels [12], which then writes it) right after issuing its copy")


@pytest.mark.parametrize("options,writer,region", [
    ({"clear": "A"}, "clear", "A[0:128, 0:64]"),
    ({"clear": "B"}, "clear", "B[0:64, 0:64]"),
    ({"note": True}, "clear_last", "A[0:128, 448:512]"),
])
def test_a_tma_copy_whose_source_a_later_task_writes_is_refused_naming_both(options, writer, region):
    """note: the copy role commits its notes to clear_last right after issuing the last step's copies, and
    clear_last then zeroes the columns those copies read: no release of the copy's was needed (program order and
    the commit imply it), so the kernel was accepted and check called it safe, though the TMA copy may still be
    reading A when clear_last writes it."""
    func = _gram_gemm(**options)
    load = "load_B" if options.get("clear") == "B" else "load_A"
    with pytest.raises(WarpSpecializeInputError,
                       match=re.escape(f"'{load}' is no TMA load: task '{writer}' (warp role 4) writes its source "
                                       f"{region} after it in program order, but a TMA copy reads its source "
                                       "asynchronously")):
        tile_plan(analyze(func).tree)
    with pytest.raises((RuntimeError, WarpSpecializeInputError), match=re.escape(f"'{load}' is no TMA load")):
        WarpSpecialize("cuda", hopper=True)(tvm.IRModule({"main": func}))


@pytest.mark.nvcc
def test_generic_writes_to_a_tma_source_are_fenced_from_the_async_proxy():
    """prepare writes A (generic proxy) and its release lets load_A's TMA copy read it (async proxy): without a
    `fence.proxy.async.global` between them (there was none) the PTX memory model does not order the copy's reads
    after the writes."""
    func = _gram_gemm(prepare=True)
    mod = WarpSpecialize("cuda", hopper=True, debug_check=True)(tvm.IRModule({"main": func}))
    source = cuda_source(mod, "sm_90a", tir_pipeline=WARP_SPECIALIZED_PIPELINE)
    lines = source.splitlines()
    write = max(n for n, line in enumerate(lines) if line.strip().startswith("A_ptr["))
    fence = next(n for n, line in enumerate(lines) if n > write and "fence_proxy_proxy_async_global" in line)
    arrive = next(n for n, line in enumerate(lines) if n > write and "mbarrier_arrive" in line)
    assert fence < arrive
    assert "fence.proxy.async.global;" in source
    compile_cuda_source(source, "sm_90a")
    # a kernel whose generic tasks write no TMA source has no such fence
    plain = cuda_source(WarpSpecialize("cuda", hopper=True)(tvm.IRModule({"main": _gram_gemm()})), "sm_90a",
                        tir_pipeline=WARP_SPECIALIZED_PIPELINE)
    assert "fence.proxy.async.global" not in plain
