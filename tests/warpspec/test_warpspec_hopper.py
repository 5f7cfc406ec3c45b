"""Hopper form (`WarpSpecialize("cuda", hopper=True)`): tiles, transaction protocol, checker, sm_90a code.

Without a GPU: the tile analysis, the transaction protocol checked by `check` (with planted bugs), the example's
meaning on llvm, and nvcc for sm_90a with ptxas figures. The `gpu` tests run the kernel against numpy.
"""

import dataclasses
import re

import numpy as np
import pytest
import tvm
import tvm_ffi

from tvm_tailsplit.cuda import compile_cuda_source, cuda_source, cuda_target
from tvm_tailsplit.ir_utils import substitute
from tvm_tailsplit.testing import run_with_guarded_output, threads_as_serial_loops
from tvm_tailsplit.warpspec import (
    WARP_SPECIALIZED_PIPELINE,
    WarpSpecialize,
    WarpSpecializeInputError,
    analyze,
    check,
    examples,
    tile_plan,
    transaction_protocol,
)
from tvm_tailsplit.warpspec.ablation import unspecialized_hopper_kernel
from tvm_tailsplit.warpspec.check import DEADLOCK, IN_FLIGHT, MISSING_ARRIVE, PARITY_ALIASING, RACE, TRANSACTION
from tvm_tailsplit.warpspec.codegen import generate
from tvm_tailsplit.warpspec.hopper import (
    FRAGMENT_HEADROOM_REGISTERS,
    L2_PROMOTION_256B,
    PRODUCER_REGISTERS,
    SWIZZLE_128B,
    consumer_registers,
    hopper_protocol,
)
from tvm_tailsplit.warpspec.protocol import ARRIVE, WAIT
from tvm_tailsplit.warpspec.retirement import WGMMA_IN_FLIGHT, defer_releases

from .test_warpspec_ragged import _operands

A_BYTES, B_BYTES = 128 * 64 * 2, 256 * 64 * 2


def _transaction_protocol(k_tiles=6, stages=3):
    analysis = analyze(examples.hopper_gemm_kernel(128, 256, 64 * k_tiles, stages=stages))
    return transaction_protocol(analysis.protocol, tile_plan(analysis.tree))


def test_tile_plan_of_the_hopper_gemm():
    plan = tile_plan(analyze(examples.hopper_gemm_kernel(256, 512, 256)).tree)
    assert {name: load.bytes for name, load in plan.loads.items()} == {"load_A": A_BYTES, "load_B": B_BYTES}
    assert {name: (t.row0, t.m, t.n, t.k) for name, t in plan.mmas.items()} == {
        "mma_top": (0, 64, 256, 64), "mma_bottom": (64, 64, 256, 64)}
    assert set(plan.fragment_tasks) == {"init_top", "init_bottom", "store_top", "store_bottom"}
    assert plan.fragments == {"acc"}


def test_bounds_guarded_loads_are_tma_loads_with_zero_fill():
    plan = tile_plan(analyze(examples.hopper_gemm_kernel(256, 512, 100, zero_fill_k=True)).tree)
    assert {name: load.bytes for name, load in plan.loads.items()} == {"load_A": A_BYTES, "load_B": B_BYTES}
    # A guard that is not the source's bounds (here: half of the box) makes no TMA load: the wgmma reading the
    # ring is then rejected.
    func = examples.hopper_gemm_kernel(256, 512, 256)

    def halve(store):
        if store.buffer.name != "A_ring":
            return store
        zero = tvm.tirx.const(0, "float16")
        return tvm.tirx.BufferStore(store.buffer, tvm.tirx.if_then_else(store.indices[2] < 32, store.value, zero),
                                    store.indices)

    guarded = func.with_body(tvm_ffi.structural_map(func.body, (tvm.tirx.BufferStore, halve), order="post"))
    with pytest.raises((WarpSpecializeInputError, RuntimeError), match=r"which no TMA load task writes; .* \('load_A' "
                       r"is no TMA load: it must copy an element of a global buffer, unguarded or guarded by that "
                       r"buffer's bounds"):
        tile_plan(analyze(guarded).tree)


def test_stepped_loops_make_no_tile():
    """A task loop with a step other than 1 covers every other row or column: no TMA box or wgmma tile (the tile
    analysis read only the loop's extent, so a stepped copy became a whole-box TMA load)."""
    func = examples.hopper_gemm_kernel(256, 512, 256)

    def every_other(loop):
        if not (isinstance(loop.body, tvm.tirx.BufferStore) and loop.body.buffer.name == "A_ring"):
            return loop  # only the copy's innermost loop
        return tvm.tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, loop.body, loop.thread_binding,
                            dict(loop.annotations), tvm.tirx.const(2, "int32"))

    stepped = func.with_body(tvm_ffi.structural_map(func.body, (tvm.tirx.For, every_other), order="post"))
    assert "range(0, 64, 2)" in stepped.script()
    with pytest.raises((WarpSpecializeInputError, RuntimeError), match=r"which no TMA load task writes; .* \('load_A' "
                       "is no TMA load: its loops must start at 0 and have constant extents and step 1"):
        tile_plan(analyze(stepped).tree)


def test_kernels_without_tiles_have_an_empty_plan_and_are_rejected_for_hopper():
    func = examples.gemm_kernel(k=64)  # B not K-major, 16-wide K tiles: no TMA box of 128-byte rows
    plan = tile_plan(analyze(func).tree)
    assert not plan.loads and not plan.mmas
    # the error says why each task shaped like a tile operation is none (it named no task)
    with pytest.raises((WarpSpecializeInputError, RuntimeError), match=(
            r"no TMA load or no wgmma tile.*'load_A' is no TMA load: its box must have rows of 128 bytes and at most "
            r"256 rows, not 32 rows of 32 bytes; .*'mma' is no wgmma tile: it must read its second operand K-major as "
            r"B_ring\[stage, j, kk\] \(wgmma reads B transposed, n x K\), not B_ring\[ko % 3, kk, j\]")):
        WarpSpecialize("cuda", hopper=True)(tvm.IRModule({"main": func}))


def test_a_wgmma_shaped_task_that_is_no_tile_is_named_with_the_reason():
    """The Hopper GEMM with B not K-major (its ring k x n): 'mma_top' was refused as touching A_ring, without the
    reason that it is no wgmma tile."""
    func = examples.symbolic_k_gemm_kernel(128, 256, 128, 256, 64, 4, 2, b_transposed=False)
    with pytest.raises((WarpSpecializeInputError, RuntimeError), match=(
            r"task 'mma_top' touches \['A_ring'\].*\('mma_top' is no wgmma tile: it must read its second operand "
            r"K-major as B_ring\[stage, j, kk\]")):
        WarpSpecialize("cuda", hopper=True)(tvm.IRModule({"main": func}))


def test_hopper_option_checks():
    with pytest.raises(ValueError, match="'cuda' target only"):
        WarpSpecialize("llvm", hopper=True)
    with pytest.raises(ValueError, match="one warpgroup"):
        WarpSpecialize("cuda", hopper=True, threads_per_role={0: 128, 1: 128, 2: 128})
    with pytest.raises(TypeError, match="hopper must be a bool"):
        WarpSpecialize("cuda", hopper=1)



def test_rings_beyond_the_shared_memory_of_a_block_are_rejected():
    """Five stages of 128 x 64 + 256 x 64 fp16 tiles are 240 KiB of rings, more than the 227 KiB a Hopper block
    may use: nvcc compiles such a kernel (the dynamic shared memory is a launch parameter), and it fails only at its
    launch on the GPU. Four stages, or six of 128-wide tiles, fit."""
    with pytest.raises((WarpSpecializeInputError, RuntimeError), match=r"246784 bytes of shared memory .* 232448"):
        WarpSpecialize("cuda", hopper=True)(tvm.IRModule({"main": examples.hopper_gemm_kernel(128, 256, 512,
                                                                                              stages=5)}))
    with pytest.raises(WarpSpecializeInputError, match="246784 bytes of shared memory"):
        unspecialized_hopper_kernel(examples.hopper_gemm_kernel(128, 256, 512, stages=5))
    for block_n, stages in ((256, 4), (128, 6)):
        func = examples.hopper_gemm_kernel(128, 256, 512, block_n=block_n, stages=stages)
        WarpSpecialize("cuda", hopper=True)(tvm.IRModule({"main": func}))


def _encodings(func: tvm.tirx.PrimFunc) -> list[tuple[str, list]]:
    """The host's `cuTensorMapEncodeTiled` calls of `func`: (source buffer name, the conditions of the ifs around
    the call)."""
    calls = []

    def visit(stmt, conditions):
        if isinstance(stmt, tvm.tirx.IfThenElse):
            visit(stmt.then_case, [*conditions, stmt.condition])
            if stmt.else_case is not None:
                visit(stmt.else_case, [*conditions, tvm.tirx.Not(stmt.condition)])
        elif isinstance(stmt, tvm.tirx.SeqStmt):
            for s in stmt.seq:
                visit(s, conditions)
        elif isinstance(stmt, tvm.s_tir.SBlockRealize):
            visit(stmt.block.body, conditions)
        elif isinstance(stmt, tvm.tirx.Evaluate) and "cuTensorMapEncodeTiled" in str(stmt.value):
            calls.append((stmt.value.args[4].args[0].name, conditions))

    visit(func.body, [])
    return calls


@pytest.mark.parametrize("ctas", [None, 2], ids=["grid", "persistent"])
def test_an_empty_reduction_encodes_no_tensor_map(ctas):
    """K = 0 (zero_fill_k: no K step, C = 0): cuTensorMapEncodeTiled rejects a tensor with an empty dimension
    (globalDim must be non-zero; TVM's wrapper raises on the error), so on a GPU the symbolic-K kernel failed on the
    host before its launch although the kernel itself stores zeros (the event simulation's K = 0). The operands'
    loads run in the K loop, which then runs no step: their tensor maps are encoded only where K > 0."""
    func = examples.hopper_gemm_kernel(256, 512, None, zero_fill_k=True, ctas=ctas)
    lowered = WarpSpecialize("cuda", hopper=True)(tvm.IRModule({"main": func}))["main"]
    (k,) = {dim for dim in lowered.params[0].shape if isinstance(dim, tvm.tirx.Var)}
    analyzer = tvm.sym.Analyzer()
    encodings = _encodings(lowered)
    assert sorted(name for name, _ in encodings) == ["A", "B"]
    for _, conditions in encodings:
        holds = [[analyzer.simplify(substitute(c, {k: tvm.tirx.IntImm("int32", value)})) for c in conditions]
                 for value in (0, 8)]
        assert any(bool(c) is False for c in holds[0])  # not at K = 0
        assert all(bool(c) is True for c in holds[1])  # at K = 8


def test_a_reduction_length_off_tmas_16_byte_row_pitch_is_refused():
    """TMA's tensor map needs rows of a multiple of 16 bytes (K a multiple of 8 fp16), else cuTensorMapEncodeTiled
    fails on the host at the call, with the driver's 'invalid argument'. A constant K = 100 (zero_fill_k) is
    refused when the kernel is generated; a symbolic K is checked by the host before encoding, naming the operand."""
    for build in (lambda f: WarpSpecialize("cuda", hopper=True)(tvm.IRModule({"main": f})),
                  unspecialized_hopper_kernel):
        with pytest.raises((WarpSpecializeInputError, RuntimeError), match=r"rows of 'A' .*200 bytes.*16 bytes"):
            build(examples.hopper_gemm_kernel(128, 256, 100, zero_fill_k=True))
    func = examples.hopper_gemm_kernel(128, 256, None, zero_fill_k=True)
    lowered = WarpSpecialize("cuda", hopper=True)(tvm.IRModule({"main": func}))["main"]
    (k,) = {dim for dim in lowered.params[0].shape if isinstance(dim, tvm.tirx.Var)}
    asserts = []
    tvm_ffi.structural_walk(lowered.body, (tvm.tirx.AssertStmt, asserts.append))
    pitch = [a for a in asserts if "16 bytes" in str(a)]
    assert {re.search(r"rows of '(\w)'", str(a))[1] for a in pitch} == {"A", "B"}
    analyzer = tvm.sym.Analyzer()
    for value, holds in ((100, False), (136, True), (0, True)):
        assert all(bool(analyzer.simplify(substitute(a.condition, {k: tvm.tirx.IntImm("int32", value)}))) is holds
                   for a in pitch)

@pytest.mark.gpu
def test_an_empty_reduction_on_the_gpu():
    func = examples.hopper_gemm_kernel(256, 512, None, zero_fill_k=True)
    executable = tvm.compile(WarpSpecialize("cuda", hopper=True)(tvm.IRModule({"main": func})),
                             target=cuda_target("sm_90a"), tir_pipeline=WARP_SPECIALIZED_PIPELINE)
    for k in (0, 8):
        _assert_gemm_on_the_gpu(executable, 256, 512, k, seed=k)

@pytest.mark.parametrize("k_tiles,stages", [(6, 3), (8, 4), (3, 4), (5, 2)])
def test_transaction_protocol_is_safe(k_tiles, stages):
    protocol = _transaction_protocol(k_tiles, stages)
    producer_ops = [op for ops in protocol.ops.values() for op in ops if op.tx_copies]
    assert len(producer_ops) == 1  # one expect_tx arrive for the batch (load_A, load_B), before load_A
    (arrive,) = producer_ops
    assert arrive in protocol.ops["load_A"] and arrive.before_task and arrive.action == ARRIVE
    assert arrive.tx_bytes == A_BYTES + B_BYTES
    assert not [op for op in protocol.ops["load_B"] if op.action == ARRIVE]
    # Both consumer warpgroups wait on the same transaction channels.
    waits = [op for task in ("mma_top", "mma_bottom") for op in protocol.ops[task] if op.action == WAIT]
    assert {op.group.channels for op in waits} == {arrive.group.channels}
    report = check(protocol)
    assert report.ok, report.describe()


@pytest.mark.parametrize("delta,expected", [(-B_BYTES, {TRANSACTION, RACE}), (-2, {TRANSACTION}),
                                            (+2, {TRANSACTION, DEADLOCK})])
def test_checker_catches_a_wrong_expect_tx_byte_count(delta, expected):
    protocol = _transaction_protocol()
    ops = [dataclasses.replace(op, tx_bytes=op.tx_bytes + delta) if op.tx_copies else op
           for op in protocol.ops["load_A"]]
    report = check(protocol.replace_ops("load_A", ops))
    assert expected <= report.kinds(), report.describe()


def test_checker_catches_a_wrong_parity_and_a_missing_release():
    protocol = _transaction_protocol()
    flipped = [dataclasses.replace(op, parity_flip=True) if op.action == WAIT else op
               for op in protocol.ops["mma_bottom"]]
    assert {PARITY_ALIASING, RACE} & check(protocol.replace_ops("mma_bottom", flipped)).kinds()
    no_release = [op for op in protocol.ops["mma_top"] if op.action != ARRIVE]
    report = check(protocol.replace_ops("mma_top", no_release))
    assert {DEADLOCK, MISSING_ARRIVE} & report.kinds(), report.describe()


MMAS = ("mma_top", "mma_bottom")


@pytest.mark.parametrize("k,stages,zero_fill", [(64 * 6, 3, False), (64 * 8, 4, False), (64 * 5, 2, False),
                                                (None, 4, False), (None, 4, True)],
                         ids=["6_tiles_3_stages", "8_tiles_4_stages", "5_tiles_2_stages", "symbolic_k",
                              "symbolic_k_zero_fill"])
def test_wgmma_groups_stay_in_flight_and_the_protocol_is_safe(k, stages, zero_fill):
    """Each consumer keeps WGMMA_IN_FLIGHT groups in flight: it releases the stage of the previous tile, and the
    checker (which keeps a wgmma's reads in flight until its wait_group) finds no race, deadlock or aliasing."""
    analysis = analyze(examples.hopper_gemm_kernel(128, 256, k, stages=stages, zero_fill_k=zero_fill))
    tiles = tile_plan(analysis.tree)
    protocol = hopper_protocol(analysis.small_protocol(), tiles)
    assert protocol.in_flight == {task: WGMMA_IN_FLIGHT for task in MMAS}
    for task in MMAS:
        (release,) = protocol.after(task)
        assert release.verb == "release" and release.lag == WGMMA_IN_FLIGHT
        assert [op.lag for op in protocol.before(task)] == [0]
    report = check(protocol)
    assert report.ok, report.describe()
    assert hopper_protocol(analysis.protocol, tiles).in_flight == protocol.in_flight  # the symbolic one agrees


def test_a_single_stage_ring_keeps_wait_group_0(caplog):
    """With one stage the producer reacquires the stage one tile later: a group in flight would deadlock."""
    analysis = analyze(examples.hopper_gemm_kernel(128, 256, 64 * 4, stages=1))
    with caplog.at_level("INFO", logger="tvm_tailsplit.warpspec"):
        protocol = hopper_protocol(analysis.protocol, tile_plan(analysis.tree))
    assert protocol.in_flight == {}
    assert "wgmma task 'mma_top' retires its group before its release" in caplog.text
    assert "not provably greater than 1" in caplog.text
    assert check(protocol).ok


@pytest.mark.parametrize("depth,deadlocks", [(2, False), (3, True), (4, True)])
def test_checker_finds_the_deadlock_of_as_many_groups_in_flight_as_stages(depth, deadlocks):
    """3 stages: the producer reacquires a stage 3 tiles after it was filled, so releasing it `depth` >= 3 tiles
    late is a cycle of waits; 2 is safe (`in_flight_protocol` would prove it, the rule asks for 1)."""
    protocol = _transaction_protocol(6, 3)
    for task in MMAS:
        protocol = defer_releases(protocol, task, depth)
    report = check(protocol)
    assert (DEADLOCK in report.kinds()) == deadlocks, report.describe()
    assert report.ok != deadlocks


@pytest.mark.parametrize("depth,lag", [(WGMMA_IN_FLIGHT + 1, WGMMA_IN_FLIGHT), (WGMMA_IN_FLIGHT, 0)],
                         ids=["wait_group_too_shallow", "release_not_deferred"])
def test_checker_catches_a_release_of_a_stage_still_read_by_wgmma(depth, lag):
    """`wgmma.wait_group depth` with the release of the tile `lag` back: the stage is freed while its group may
    still read it, and the producer's next copy into it races with the wgmma."""
    analysis = analyze(examples.hopper_gemm_kernel(128, 256, 64 * 6, stages=3))
    protocol = hopper_protocol(analysis.protocol, tile_plan(analysis.tree))
    ops = [dataclasses.replace(op, lag=lag) if not op.before_task else op for op in protocol.ops["mma_top"]]
    planted = dataclasses.replace(protocol.replace_ops("mma_top", ops),
                                  in_flight={**protocol.in_flight, "mma_top": depth})
    report = check(planted)
    assert {IN_FLIGHT, RACE} <= report.kinds(), report.describe()
    assert "mma_top[0] while its reads are in flight" in report.describe()


def test_defer_releases_names_a_bad_argument():
    protocol = _transaction_protocol(6, 3)
    with pytest.raises(ValueError, match="defer_releases: task must name a task of the protocol, got 'mma'"):
        defer_releases(protocol, "mma", 1)
    with pytest.raises(ValueError, match="defer_releases: depth must be a positive int, got 0"):
        defer_releases(protocol, "mma_top", 0)


def test_only_the_hopper_generator_lowers_tasks_in_flight():
    analysis = analyze(examples.hopper_gemm_kernel(128, 256, 64 * 6, stages=3))
    protocol = hopper_protocol(analysis.protocol, tile_plan(analysis.tree))
    with pytest.raises(WarpSpecializeInputError, match="in flight"):
        generate(protocol, "cuda")


@pytest.mark.parametrize("k,zero_fill", [(128, False), (100, True), (200, True)])
def test_hopper_gemm_example_means_a_times_b_transposed(k, zero_fill):
    m, n = 128, 256
    func = examples.hopper_gemm_kernel(m, n, k, zero_fill_k=zero_fill)
    mod = threads_as_serial_loops(tvm.IRModule({"main": func}))
    executable = tvm.compile(mod, target="llvm")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype("float16")
    b = rng.standard_normal((n, k)).astype("float16")
    c = tvm.runtime.tensor(np.full((m, n), np.nan, "float32"))
    executable(tvm.runtime.tensor(a), tvm.runtime.tensor(b), c)
    np.testing.assert_allclose(c.numpy(), a.astype("float32") @ b.astype("float32").T, rtol=1e-3, atol=1e-3)


def test_consumer_register_rule():
    assert PRODUCER_REGISTERS == 40
    assert consumer_registers(2) == 232 and consumer_registers(1) == 240
    assert 128 * (PRODUCER_REGISTERS + 2 * consumer_registers(2)) <= 65536
    assert consumer_registers(2, producers=2) == 216
    assert 128 * (2 * PRODUCER_REGISTERS + 2 * consumer_registers(2, producers=2)) <= 65536



def _with_role(func: tvm.tirx.PrimFunc, block_name: str, role: int) -> tvm.tirx.PrimFunc:
    """`func` with the block `block_name` annotated to run on warp role `role`."""
    def edit(realize):
        block = realize.block
        if block.name_hint != block_name:
            return realize
        return tvm.s_tir.SBlockRealize(realize.iter_values, realize.predicate, tvm.s_tir.SBlock(
            block.iter_vars, block.reads, block.writes, block.name_hint, block.body,
            annotations={**block.annotations, "warp_role": role}))

    root = func.body.block
    body = tvm_ffi.structural_map(root.body, (tvm.s_tir.SBlockRealize, edit), order="post")
    return func.with_body(tvm.s_tir.SBlockRealize([], True, tvm.s_tir.SBlock(
        [], [], [], "root", body, alloc_buffers=root.alloc_buffers)))


@pytest.mark.nvcc
def test_setmaxnreg_shares_the_register_file_among_two_producer_warpgroups():
    """B's TMA loads on a role of their own (3), 128-wide tiles: two producer warpgroups of 40 registers and two
    consumers. ptxas gives the 512 threads 128 registers each at launch, the CTA's whole pool of 65,536; raised to
    232 each (the share left by one producer), the consumers asked for 69,632 in all, so a `setmaxnreg.inc` could
    never be granted and its warpgroup waited forever. The consumers' share is what the register file leaves after
    both producers (216)."""
    func = _with_role(examples.hopper_gemm_kernel(256, 512, None, zero_fill_k=True, block_n=128), "load_B", 3)
    mod = WarpSpecialize("cuda", hopper=True, debug_check=True)(tvm.IRModule({"main": func}))
    source = cuda_source(mod, "sm_90a", tir_pipeline=WARP_SPECIALIZED_PIPELINE)
    kernel = source[source.index('extern "C" __global__'):]
    counts = [int(r) for r in re.findall(r"setmaxnreg_(?:inc|dec)_sync_aligned_u32_(\d+)\(\);", kernel)]
    assert sorted(counts) == [PRODUCER_REGISTERS] * 2 + [consumer_registers(2, producers=2)] * 2
    assert 128 * sum(counts) <= 65536
    (usage,) = compile_cuda_source(source, "sm_90a")
    assert usage.spill_store_bytes == 0 and usage.registers * 512 >= 128 * sum(counts)

def _hopper_source(m, n, k, zero_fill=False):
    specialize = WarpSpecialize("cuda", hopper=True, debug_check=True)
    mod = specialize(tvm.IRModule({"main": examples.hopper_gemm_kernel(m, n, k, zero_fill_k=zero_fill)}))
    return cuda_source(mod, "sm_90a", tir_pipeline=WARP_SPECIALIZED_PIPELINE)


FENCE = re.compile(r"\s*tvm_tailsplit_fence_operand\((\w+)\[(\d+)\]\);")


def _assert_fragments_fenced(kernel: str) -> None:
    """CUTLASS's operand fences: every register of the fragment is fenced right before each `wgmma.fence` (the
    first wgmma of a tile) and right after each `wgmma.wait_group`."""
    lines = kernel.splitlines()

    def fenced(index: int, step: int) -> set:
        registers, index = set(), index + step
        while 0 <= index < len(lines) and (match := FENCE.fullmatch(lines[index])):
            registers.add((match.group(1), int(match.group(2))))
            index += step
        return registers

    sites = [(i, -1) for i, line in enumerate(lines) if "wgmma_fence_fence_sync_aligned();" in line]
    sites += [(i, 1) for i, line in enumerate(lines) if re.search(r"wgmma_wait_group\w+\(\);", line)]
    assert len(sites) >= 2
    for index, step in sites:
        registers = fenced(index, step)
        (name,) = {register[0] for register in registers}
        assert sorted(r for _, r in registers) == list(range(128)), (lines[index], name)  # m64n256: 128 floats


@pytest.mark.nvcc
@pytest.mark.parametrize("k,zero_fill", [(256, False), (None, False), (None, True)],
                         ids=["k256", "symbolic_k", "symbolic_k_zero_fill"])
def test_nvcc_compiles_the_hopper_gemm_for_sm_90a(k, zero_fill):
    source = _hopper_source(256, 512, k, zero_fill)
    kernel = source[source.index('extern "C" __global__'):]
    assert "__grid_constant__ CUtensorMap A_tensor_map" in kernel and "CUtensorMap B_tensor_map" in kernel
    assert kernel.count("complete_tx__bytes(") == 2  # one TMA copy per operand tile
    assert "arrive_expect_tx" in kernel and "(uint)49152" in kernel  # 128x64 + 256x64 fp16
    assert "m64n256k16" in kernel and "wgmma_commit_group" in kernel and "wgmma_wait_group" in kernel
    # With more K tiles than stages (symbolic K) each consumer keeps one group in flight and then releases the
    # previous stage; K = 256 is 4 tiles in 4 stages: no stage is ever released, and every group retires at once.
    # Every run of fragment stores follows `wgmma.wait_group 0` (the drain after the loop).
    pattern = r"(wgmma_wait_group\w+|mbarrier_arrive\w*)\(|\(C_ptr \+ "
    events = [m.group(1) or "store C" for m in re.finditer(pattern, kernel)]
    after_in_flight = [events[i + 1] for i, e in enumerate(events) if e.endswith(f"aligned_{WGMMA_IN_FLIGHT}")]
    assert after_in_flight == (["mbarrier_arrive_nocount_arrive_shared_b64"] * 2 if k is None else [])
    before_stores = {events[i - 1] for i, e in enumerate(events) if e == "store C" and events[i - 1] != e}
    assert before_stores == {"wgmma_wait_group_wait_group_sync_aligned_0"}
    assert "setmaxnreg_dec_sync_aligned_u32_40" in kernel and "setmaxnreg_inc_sync_aligned_u32_232" in kernel
    assert "__shared__ alignas" not in kernel  # rings and barriers in one dynamic buffer (1024-byte atoms)
    _assert_fragments_fenced(kernel)
    # thread 0 traps unless both rings start on a 1024-byte swizzle atom of the shared window
    assert len(re.findall(r"trap_when_assert_failed\(\(\(tvm_builtin_cuda_cvta_generic_to_shared\(.*"
                          r"& \(uint\)1023\) == \(uint\)0\)\);", kernel)) == 2
    (usage,) = compile_cuda_source(source, "sm_90a")
    print("hopper gemm", k, usage)
    assert usage.spill_store_bytes == 0 and usage.stack_frame_bytes == 0
    # setmaxnreg.inc blocks forever when the CTA's pool (what ptxas allocated per thread at launch) is short
    assert usage.registers * 384 >= 128 * (PRODUCER_REGISTERS + 2 * consumer_registers(2))
    assert usage.performance_losses == ()  # ptxas keeps the wgmma pipeline (no serialized groups)


@pytest.mark.nvcc
def test_ptxas_reports_serialized_wgmma_groups():
    """What the assertion above guards against: touching the accumulator while its group is in flight makes ptxas
    serialize the wgmma instructions (and say so), which would undo the group kept in flight."""
    in_flight = f"tvm_builtin_ptx_wgmma_wait_group_wait_group_sync_aligned_{WGMMA_IN_FLIGHT}();"
    source = _hopper_source(256, 512, None)
    assert in_flight in source
    planted = source.replace(in_flight, in_flight + "\nacc_r1_ptr[0] = acc_r1_ptr[0] * 2.0f;", 1)
    (usage,) = compile_cuda_source(planted, "sm_90a")
    assert any("wgmma.mma_async instructions are serialized" in note for note in usage.performance_losses)


def _assert_gemm_on_the_gpu(func, m: int, n: int, k: int, seed: int) -> None:
    """Compile `func` (C = A @ B.T) for sm_90a (unless it is compiled already), run it on GPU 0 and compare with
    numpy (C poisoned with NaN)."""
    executable = func if isinstance(func, tvm.runtime.Executable) else tvm.compile(
        tvm.IRModule({"main": func}) if isinstance(func, tvm.tirx.PrimFunc) else func,
        target=cuda_target("sm_90a"), tir_pipeline=WARP_SPECIALIZED_PIPELINE)
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype("float16")
    b = rng.standard_normal((n, k)).astype("float16")
    device = tvm.cuda(0)
    c = tvm.runtime.tensor(np.full((m, n), np.nan, "float32"), device)
    executable(tvm.runtime.tensor(a, device), tvm.runtime.tensor(b, device), c)
    np.testing.assert_allclose(c.numpy(), a.astype("float32") @ b.astype("float32").T, rtol=2e-3, atol=2e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k", [(256, 512, 256), (512, 512, 1024), (1024, 1024, 4096), (256, 256, 1000),
                                   (128, 256, 72)])
def test_hopper_gemm_on_the_gpu(m, n, k):
    zero_fill = k % 64 != 0  # TMA fills the last K tile past K with zeros
    for kernel_k in (k, None):
        func = examples.hopper_gemm_kernel(m, n, kernel_k, zero_fill_k=zero_fill)
        _assert_gemm_on_the_gpu(WarpSpecialize("cuda", hopper=True)(tvm.IRModule({"main": func})), m, n, k, seed=1)


@pytest.mark.nvcc
def test_generic_tasks_run_on_the_role_threads_in_the_hopper_form():
    """A task of no tile form (here: doubling the top rows of C after the store) is strided over its warpgroup and
    followed by the role's named barrier, since it reads what the role's store wrote."""
    func = examples.hopper_gemm_kernel(256, 512, 256)

    def add_scale(realize):
        block = realize.block
        if block.name_hint != "store_top":
            return realize
        (written,) = block.writes

        def double(store):
            return tvm.tirx.BufferStore(store.buffer, tvm.tirx.BufferLoad(store.buffer, store.indices) * 2.0,
                                        store.indices)

        body = tvm_ffi.structural_map(block.body, (tvm.tirx.BufferStore, double), order="post")
        scale = tvm.s_tir.SBlock([], [written], [written], "scale_top", body, annotations=block.annotations)
        return tvm.tirx.SeqStmt([realize, tvm.s_tir.SBlockRealize([], True, scale)])

    root = func.body.block
    body = tvm_ffi.structural_map(root.body, (tvm.s_tir.SBlockRealize, add_scale), order="post")
    func = func.with_body(tvm.s_tir.SBlockRealize([], True, tvm.s_tir.SBlock(
        [], [], [], "root", body, alloc_buffers=root.alloc_buffers)))
    mod = WarpSpecialize("cuda", hopper=True, debug_check=True)(tvm.IRModule({"main": func}))
    source = cuda_source(mod, "sm_90a", tir_pipeline=WARP_SPECIALIZED_PIPELINE)
    kernel = source[source.index('extern "C" __global__'):]
    assert "bar_sync_count_sync((uint)2, (uint)128)" in kernel  # role 1 is the second role: named barrier 2
    (usage,) = compile_cuda_source(source, "sm_90a")
    assert usage.spill_store_bytes == 0


def _with_row_copy(func: tvm.tirx.PrimFunc, stage_after: str = "store_bottom", use_after: str = "store_bottom",
                   use_role: int = 2) -> tvm.tirx.PrimFunc:
    """`func` (the Hopper GEMM) with two generic tasks: after the block `stage_after` the copy role (0) stages
    `A[0, 0:64]` in a shared buffer (strided over its warp), and after `use_after` the compute role `use_role`
    writes it to `C[0, 0:64]`."""
    a, c = func.params[0], func.params[2]
    row = tvm.tirx.decl_buffer((64,), "float16", "row_s", scope="shared")
    whole = tvm.ir.Range(0, 64)

    def task(name, role, reads, writes, store):
        j = tvm.tirx.Var("j", "int32")
        block = tvm.s_tir.SBlock([], reads, writes, name, tvm.tirx.For(j, 0, 64, tvm.tirx.ForKind.SERIAL, store(j)),
                                 annotations={"warp_role": role})
        return tvm.s_tir.SBlockRealize([], True, block)

    def add_tasks(realize):
        name = realize.block.name_hint
        if name not in (stage_after, use_after):
            return realize
        stage = task("stage_row", 0, [tvm.tirx.BufferRegion(a, [tvm.ir.Range(0, 1), whole])],
                     [tvm.tirx.BufferRegion(row, [whole])],
                     lambda j: tvm.tirx.BufferStore(row, tvm.tirx.BufferLoad(a, [0, j]), [j]))
        use = task("use_row", use_role, [tvm.tirx.BufferRegion(row, [whole])],
                   [tvm.tirx.BufferRegion(c, [tvm.ir.Range(0, 1), whole])],
                   lambda j: tvm.tirx.BufferStore(c, tvm.tirx.Cast("float32", tvm.tirx.BufferLoad(row, [j])), [0, j]))
        return tvm.tirx.SeqStmt([realize, *([stage] if name == stage_after else []),
                                 *([use] if name == use_after else [])])

    root = func.body.block
    body = tvm_ffi.structural_map(root.body, (tvm.s_tir.SBlockRealize, add_tasks), order="post")
    return func.with_body(tvm.s_tir.SBlockRealize([], True, tvm.s_tir.SBlock(
        [], [], [], "root", body, alloc_buffers=[*root.alloc_buffers, row])))


def test_a_channel_the_copy_role_arrives_on_expects_its_warps_threads():
    """A generic task of the copy role signals another role after the K loop (`stage_row -> use_row`): only the copy
    role's first warp runs its program, so the channel's mbarrier must expect 32 arrivals; initialized to 128 (a
    warpgroup), its phase never completes and `use_row`'s warpgroup waits forever. Every arrive of a channel that
    is no transaction is counted here per role: the copy role's by its warp, a compute role's by its warpgroup."""
    func = _with_row_copy(examples.hopper_gemm_kernel(256, 512, 256))
    mod = WarpSpecialize("cuda", hopper=True, debug_check=True)(tvm.IRModule({"main": func}))
    kernel = cuda_source(mod, "sm_90a", tir_pipeline=WARP_SPECIALIZED_PIPELINE)
    kernel = kernel[kernel.index('extern "C" __global__'):]
    counts = {int(c): int(n) for c, n in re.findall(
        r"mbarrier_init_init_shared_b64\(tvm_builtin_cuda_cvta_generic_to_shared\(\(&\(\(\(uint64_t\*\)"
        r"buf_dyn_shmem_ptr\)\[(\d+)\]\)\)\), \(uint\)(\d+)\);", kernel)}
    consumers = kernel.index("setmaxnreg_inc")  # the copy role's program comes first
    arrives = [(m.start() < consumers, int(m.group(1))) for m in re.finditer(
        r"mbarrier_arrive_nocount_arrive_shared_b64\(tvm_builtin_cuda_cvta_generic_to_shared\(\(&\(\(\(uint64_t\*\)"
        r"buf_dyn_shmem_ptr\)\[(\d+)\]\)\)\)\);", kernel)]
    assert any(by_copy_role for by_copy_role, _ in arrives) and not all(by_copy_role for by_copy_role, _ in arrives)
    assert {channel: counts[channel] for _, channel in arrives} == {
        channel: 32 if by_copy_role else 128 for by_copy_role, channel in arrives}


def test_the_copy_warps_writes_reach_the_transaction_arrive_that_commits_them():
    """The copy role stages a row before the K loop and the top compute role reads it after its stores: no channel of
    its own, the K loop's transaction commits it (the consumer waits for the stage after the row was written).
    That arrive (`expect_tx`) is one thread's, and a release orders only that thread's own writes (and those it has
    observed): the warp's other 31 lanes' stores of the row must reach it through `__syncwarp()` first, else the
    consumer may read the row before they are visible. The GEMM without the row keeps its code (no warp barrier)."""
    func = _with_row_copy(examples.hopper_gemm_kernel(256, 512, None, zero_fill_k=True), "init_top", "store_top", 1)
    mod = WarpSpecialize("cuda", hopper=True, debug_check=True)(tvm.IRModule({"main": func}))
    kernel = cuda_source(mod, "sm_90a", tir_pipeline=WARP_SPECIALIZED_PIPELINE)
    kernel = kernel[kernel.index('extern "C" __global__'):]
    producer = kernel[:kernel.index("setmaxnreg_inc")]
    assert "row_s_ptr[" in producer and "mbarrier_arrive_nocount" not in producer  # committed by the transaction
    expect_tx = [m.start() for m in re.finditer(r"if \(\(\(int\)threadIdx.x\) == 0\) \{\s*"
                                                  r"tvm_builtin_ptx_mbarrier_arrive_expect_tx", producer)]
    assert expect_tx
    for start in expect_tx:  # the statement before each (TVM's `int cse_v = ...;` bindings aside)
        statements = [line.strip() for line in producer[:start].splitlines()
                      if line.strip() and not re.fullmatch(r"int \w+ = .*;", line.strip())]
        assert statements[-1] == "tvm_builtin_cuda_warp_sync();", statements[-3:]  # __syncwarp()
    assert "warp_sync" not in _hopper_source(256, 512, None, True)


@pytest.mark.nvcc
@pytest.mark.parametrize("k,zero_fill", [(256, False), (None, True)], ids=["k256", "symbolic_k_zero_fill"])
def test_ablation_without_warp_specialization_compiles_for_sm_90a(k, zero_fill):
    """The same tiles and stages, every warpgroup a consumer, thread 0 prefetching stages - 1 iterations ahead."""
    func = unspecialized_hopper_kernel(examples.hopper_gemm_kernel(256, 512, k, zero_fill_k=zero_fill))
    source = cuda_source(tvm.IRModule({"main": func}), "sm_90a", tir_pipeline=WARP_SPECIALIZED_PIPELINE)
    kernel = source[source.index('extern "C" __global__'):]
    assert "__launch_bounds__(256)" in kernel and "setmaxnreg" not in kernel
    assert kernel.count("complete_tx__bytes(") == 4  # prologue and steady state, one copy per operand each
    assert "m64n256k16" in kernel and "float acc_r1_ptr" not in kernel  # one fragment for both warpgroups
    _assert_fragments_fenced(kernel)
    (usage,) = compile_cuda_source(source, "sm_90a")
    print("ablation", k, usage)
    assert usage.spill_store_bytes == 0 and usage.stack_frame_bytes == 0


def test_ablation_rejects_kernels_it_cannot_pipeline():
    with pytest.raises(WarpSpecializeInputError, match="one pipeline loop"):
        unspecialized_hopper_kernel(examples.seed_example())


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k", [(256, 512, 256), (1024, 1024, 4096), (256, 256, 1000)])
def test_ablation_on_the_gpu(m, n, k):
    zero_fill = k % 64 != 0
    func = unspecialized_hopper_kernel(examples.hopper_gemm_kernel(m, n, k, zero_fill_k=zero_fill))
    _assert_gemm_on_the_gpu(func, m, n, k, seed=2)


def test_tensor_maps_are_encoded_with_128_byte_swizzle_and_l2_promotion():
    mod = WarpSpecialize("cuda", hopper=True)(tvm.IRModule({"main": examples.hopper_gemm_kernel(256, 512, None)}))
    calls = []

    def visit(call):
        if call.args and getattr(call.args[0], "value", None) == "runtime.cuTensorMapEncodeTiled":
            calls.append([getattr(a, "value", None) for a in call.args])

    tvm_ffi.structural_walk(mod["main"].body, (tvm.ir.Call, visit))
    # (name, map, dtype, rank 2, data, K, rows, K * 2 bytes, box 64 x rows, element strides 1, 1, no interleave,
    # swizzle, L2 promotion, zero fill): one map per operand
    assert sorted(call[8:] for call in calls) == [[64, 128, 1, 1, 0, SWIZZLE_128B, L2_PROMOTION_256B, 0],
                                                 [64, 256, 1, 1, 0, SWIZZLE_128B, L2_PROMOTION_256B, 0]]


@pytest.mark.parametrize("tiles,message", [
    (dict(block_k=32), r"block_k must be 64 \(a TMA box row of 128 bytes"),
    (dict(block_m=64), r"block_m must be a multiple of 128 up to 256 .*got 64"),
    (dict(block_m=192), r"block_m must be a multiple of 128 .*got 192"),
    (dict(block_m=384, block_n=64), r"block_m .*A's TMA box has at most 256 rows\), got 384"),
    (dict(block_n=12), r"block_n must be a multiple of 8 up to 256 .*got 12"),
    (dict(block_n=264), r"block_n must be a multiple of 8 up to 256 .*got 264"),
    (dict(block_k=0), r"block_k must be a positive int, got 0"),
])
def test_tiles_of_no_hopper_form_are_refused_naming_the_argument(tiles, message):
    """Tiles that WarpSpecialize cannot lower (no TMA box of 128-byte rows, bands not of 64-row wgmma blocks, N past
    wgmma's) were built and refused by the pass as 'found no TMA load' or 'task mma_top touches A_ring', naming
    neither the argument nor the reason."""
    with pytest.raises(ValueError, match=r"hopper_gemm_kernel: " + message):
        examples.hopper_gemm_kernel(300, 300, 192, **tiles)


def test_k_not_a_multiple_of_the_k_tile_names_k():
    with pytest.raises(ValueError, match=r"k must be a multiple of block_k \(64\) unless zero_fill_k=True, got 136"):
        examples.hopper_gemm_kernel(128, 256, 136)


@pytest.mark.parametrize("block_m,block_n", [(128, 8), (128, 48), (256, 128)])
def test_other_accepted_tiles_mean_a_times_b_transposed(block_m, block_n):
    """Tiles the validation accepts besides the rule's widths, on a ragged shape (threads serialized, llvm)."""
    m, n, k = 300, 100, 136
    func = examples.hopper_gemm_kernel(m, n, k, block_m=block_m, block_n=block_n, stages=2, zero_fill_k=True)
    executable = tvm.compile(threads_as_serial_loops(tvm.IRModule({"main": func})), target="llvm")
    a, b = _operands(m, n, k, seed=block_n, b_transposed=True)
    out = run_with_guarded_output(executable, [a, b], (m, n))
    np.testing.assert_allclose(out, a.astype("float32") @ b.astype("float32").T, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("block_n", [208, 256])
def test_fragments_beyond_the_consumer_registers_are_refused(block_n):
    """A 256 x `block_n` tile gives each consumer warpgroup a 128-row band: `block_n` floats per thread. With
    `block_n` = 256 ptxas spilled 9 KiB and serialized the wgmma (note C7511), 208 spilled 5 KiB; the kernel was
    generated without a word. WarpSpecialize now refuses it, naming the tasks and the figures."""
    func = examples.hopper_gemm_kernel(300, 300, 192, block_m=256, block_n=block_n, stages=2)
    with pytest.raises((WarpSpecializeInputError, RuntimeError),
                       match=rf"\['mma_top'\] of warp role 1 accumulate into fragments of {block_n} floats per thread"
                             r".* more than the 232 each of its threads gets"):
        WarpSpecialize("cuda", hopper=True)(tvm.IRModule({"main": func}))


@pytest.mark.nvcc
def test_the_widest_fragment_accepted_compiles_without_spills():
    """The rule's boundary (`FRAGMENT_HEADROOM_REGISTERS`): 256 x 200 tiles, 200 floats per consumer thread."""
    func = examples.hopper_gemm_kernel(300, 300, 192, block_m=256, block_n=200, stages=2)
    assert 200 + FRAGMENT_HEADROOM_REGISTERS <= consumer_registers(2)
    mod = WarpSpecialize("cuda", hopper=True)(tvm.IRModule({"main": func}))
    (usage,) = compile_cuda_source(cuda_source(mod, "sm_90a", tir_pipeline=WARP_SPECIALIZED_PIPELINE), "sm_90a")
    assert usage.spill_store_bytes == 0 and usage.stack_frame_bytes == 0 and usage.performance_losses == ()


def test_a_symbolic_k_not_a_multiple_of_the_k_tile_is_refused_at_the_call():
    """`hopper_gemm_kernel(k=None)` without `zero_fill_k` runs `K // 64` K steps: called with K = 100 it summed
    the first 64 columns only and returned that without a word. The kernel now asserts K % 64 == 0 first, and
    WarpSpecialize keeps the input's leading asserts in every form (llvm threads, CUDA, Hopper host code)."""
    func = examples.hopper_gemm_kernel(130, 100, None)
    serial = tvm.compile(threads_as_serial_loops(tvm.IRModule({"main": func})), target="llvm")
    a, b = _operands(130, 100, 128, seed=3, b_transposed=True)
    np.testing.assert_allclose(run_with_guarded_output(serial, [a, b], (130, 100)),
                               a.astype("float32") @ b.astype("float32").T, rtol=1e-3, atol=1e-3)
    short_a, short_b = _operands(130, 100, 100, seed=4, b_transposed=True)
    # the llvm form checks the input's asserts first, before it needs its 3 concurrent threads
    for executable in (serial, tvm.compile(WarpSpecialize("llvm")(tvm.IRModule({"main": func})), target="llvm")):
        with pytest.raises(RuntimeError, match=r"K must be a multiple of block_k = 64"):
            run_with_guarded_output(executable, [short_a, short_b], (130, 100))
    hopper = WarpSpecialize("cuda", hopper=True)(tvm.IRModule({"main": func}))["main"].script()
    assert "assert K % 64 == 0" in hopper
    assert "K % 64" not in examples.hopper_gemm_kernel(130, 100, None, zero_fill_k=True).script()
