"""Regressions found in review: each case once produced wrong code, a crash, dead instruction sites or wrong
metrics. Every case is compiled for llvm and compared with the original program."""

import numpy as np
import pytest
import tvm
from tvm import s_tir
from tvm.script import tirx as T

from tvm_tailsplit import TailSplit
from tvm_tailsplit.split import analysis
from tvm_tailsplit.split.examples import matmul
from tvm_tailsplit.split.rewrite import remove_marks
from tvm_tailsplit.testing import assert_same_results, threads_as_serial_loops

STRATEGIES = ["full", "partial", "auto"]


@T.prim_func(s_tir=True)
def nested_if_else_hoisting(B: T.Buffer((2, 2, 4, 4), "float32")):
    for i_0, j_0, i_1, j_1 in T.grid(2, 2, 4, 4):
        if i_0 < 1:
            if j_0 < 1:
                B[i_0, j_0, i_1, j_1] = T.float32(1)
            else:
                if j_1 < 1:
                    B[i_0, j_0, i_1, j_1] = T.float32(2)
        else:
            if j_0 < 1:
                if i_1 < 2:
                    B[i_0, j_0, i_1, j_1] = T.float32(3)
            else:
                if i_1 < 2:
                    if j_1 < 1:
                        B[i_0, j_0, i_1, j_1] = T.float32(4)


def test_tvm_hoist_if_then_else_miscompiles_nested_if_else_chains():
    """Why guard chains are emitted as disjoint ifs: TVM 0.27's HoistIfThenElse gets nested if/else wrong.
    If this test starts failing, TVM fixed the bug (the disjoint form stays correct either way)."""
    executable = tvm.compile(tvm.IRModule({"main": nested_if_else_hoisting}), target="llvm")
    result = tvm.runtime.tensor(np.zeros((2, 2, 4, 4), "float32"))
    executable["main"](result)
    expected = np.zeros((2, 2, 4, 4), "float32")
    expected[0, 0] = 1
    expected[0, 1, :, 0] = 2
    expected[1, 0, :2] = 3
    expected[1, 1, :2, 0] = 4
    assert (result.numpy() != expected).sum() > 0


def tiled_matmul(m, n, k, tiles):
    sch = s_tir.Schedule(matmul(m, n, k))
    block = sch.get_sblock("C")
    i, j, kk = sch.get_loops(block)
    i_outer, i_middle, i_inner = sch.split(i, [None, *tiles])
    j_outer, j_middle, j_inner = sch.split(j, [None, *tiles])
    k_outer, k_inner = sch.split(kk, [None, tiles[-1]])
    sch.reorder(i_outer, j_outer, i_middle, j_middle, k_outer, i_inner, j_inner, k_inner)
    sch.annotate(i_inner, "pragma_emit_insn", "mma")
    return sch.mod


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_two_level_tiled_matmul_guard_chains_compile_correctly(strategy):
    mod = tiled_matmul(21, 19, 13, (3, 4))
    after = TailSplit(strategy=strategy, max_mapping_cost=64)(mod)
    assert_same_results(mod, after)
    assert analysis.conditions_under_marks(after) == 0


def gpu_matmul(m, n, k):
    sch = s_tir.Schedule(matmul(m, n, k))
    block = sch.get_sblock("C")
    i, j, kk = sch.get_loops(block)
    by, ty, yi = sch.split(i, [None, 4, 4])
    bx, tx, xi = sch.split(j, [None, 4, 4])
    ko, ki = sch.split(kk, [None, 8])
    sch.reorder(by, bx, ty, tx, ko, ki, yi, xi)
    for loop, thread in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"), (tx, "threadIdx.x")):
        sch.bind(loop, thread)
    sch.decompose_reduction(block, ko)
    sch.annotate(yi, "pragma_emit_insn", "mma")
    return sch.mod


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_gpu_matmul_thread_guard_chains(strategy):
    mod = gpu_matmul(37, 29, 19)
    after = TailSplit(strategy=strategy)(mod)
    assert_same_results(threads_as_serial_loops(mod), threads_as_serial_loops(after))


@T.prim_func(s_tir=True)
def tensorized_neighbour(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i_0 in range(4):
        with T.sblock("copy_o"):
            vo = T.axis.spatial(4, i_0)
            T.reads(A[vo * 4 : vo * 4 + 4])
            T.writes(B[vo * 4 : vo * 4 + 4])
            A_tile = T.match_buffer(A[vo * 4 : vo * 4 + 4], (4,), "float32", offset_factor=1)
            B_tile = T.match_buffer(B[vo * 4 : vo * 4 + 4], (4,), "float32", offset_factor=1)
            for i_1 in range(4):
                B_tile[i_1] = A_tile[i_1]
        for i_1 in T.serial(4, annotations={"pragma_emit_insn": "v"}):
            with T.sblock("B"):
                vi = T.axis.spatial(16, i_0 * 4 + i_1)
                T.where(i_0 * 4 + i_1 < 14)
                B[vi] = A[vi] * T.float32(2)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_block_with_match_buffers_next_to_a_mark(strategy):
    mod = tvm.IRModule({"main": tensorized_neighbour})
    after = TailSplit(strategy=strategy)(mod)
    s_tir.analysis.verify_well_formed(after["main"])
    assert_same_results(mod, after)


@T.prim_func(s_tir=True)
def colliding_names(A: T.Buffer((12,), "float32"), B: T.Buffer((12,), "float32"), C: T.Buffer((12,), "float32")):
    for i_0 in range(3):
        with T.sblock("outer"):
            vo = T.axis.spatial(3, i_0)
            for i_1 in range(4):
                with T.sblock("B_0"):
                    vi = T.axis.spatial(12, vo * 4 + i_1)
                    C[vi] = A[vi]
        for i_1 in T.serial(5, annotations={"pragma_emit_insn": "v"}):
            with T.sblock("B"):
                vi = T.axis.spatial(12, i_0 * 4 + i_1)
                T.where(i_1 < 4)
                B[vi] = A[vi] + T.float32(1)


def test_block_names_stay_unique_and_existing_names_are_kept():
    mod = tvm.IRModule({"main": colliding_names})
    for strategy in ("full", "partial"):
        after = TailSplit(strategy=strategy)(mod)
        names = []
        sch = s_tir.Schedule(after)
        for block in ("B", "B_0", "outer"):
            names.append(sch.get(sch.get_sblock(block)).name_hint)
        assert names == ["B", "B_0", "outer"]
        assert_same_results(mod, after)


@T.prim_func(s_tir=True)
def body_if_without_else(A: T.Buffer((9, 6), "float32"), B: T.Buffer((9, 6), "float32")):
    for a in range(9):
        for b in T.serial(6, annotations={"pragma_emit_insn": "vcopy"}):
            with T.sblock("B"):
                va, vb = T.axis.remap("SS", [a, b])
                if va + vb < 10:
                    B[va, vb] = A[va, vb]


@pytest.mark.parametrize("strategy", ["full", "partial"])
def test_block_if_without_else_decided_false_drops_the_block(strategy):
    mod = tvm.IRModule({"main": body_if_without_else})
    after = TailSplit(strategy=strategy)(mod)
    assert analysis.instruction_count(after) == analysis.InstructionCount(sites=5, issued=9)
    assert_same_results(mod, after)


@T.prim_func(s_tir=True)
def if_above_the_mark(A: T.Buffer((8, 4), "float32"), B: T.Buffer((8, 4), "float32")):
    for i in range(8):
        if i < 4:
            for j in T.serial(4, annotations={"pragma_emit_insn": "v"}):
                with T.sblock("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    T.where(i + j < 6)
                    B[vi, vj] = A[vi, vj] + T.float32(1)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_if_above_the_mark_leaves_no_dead_copies(strategy):
    mod = tvm.IRModule({"main": if_above_the_mark})
    after = TailSplit(strategy=strategy)(mod)
    counts = analysis.instruction_count(after)
    assert counts.issued == 4 and all(n > 0 for n in counts.issued_per_site), after.script()
    assert_same_results(mod, after)


@T.prim_func(s_tir=True)
def guard_in_nested_block(A: T.Buffer((12,), "float32"), B: T.Buffer((12,), "float32")):
    for i_0 in range(3):
        for i_1 in T.serial(4, annotations={"pragma_emit_insn": "v"}):
            with T.sblock("outer"):
                vo = T.axis.spatial(3, i_0)
                vi_1 = T.axis.spatial(4, i_1)
                with T.sblock("B"):
                    vi = T.axis.spatial(12, vo * 4 + vi_1)
                    T.where(vo * 4 + vi_1 < 10)
                    B[vi] = A[vi]


@T.prim_func(s_tir=True)
def nested_marks(A: T.Buffer((12,), "float32"), B: T.Buffer((12,), "float32")):
    for i_0 in T.serial(3, annotations={"pragma_emit_insn": "outer"}):
        for i_1 in T.serial(4, annotations={"pragma_emit_insn": "inner"}):
            with T.sblock("B"):
                vi = T.axis.spatial(12, i_0 * 4 + i_1)
                T.where(i_0 * 4 + i_1 < 10)
                B[vi] = A[vi]


def test_metrics_see_guards_in_nested_blocks_and_count_each_guard_once():
    assert analysis.conditions_under_marks(guard_in_nested_block) == 1
    assert analysis.instruction_count(guard_in_nested_block).issued == 12
    assert analysis.conditions_under_marks(nested_marks) == 1
    assert analysis.instruction_count(nested_marks) == analysis.InstructionCount(sites=1, issued=12)
    report = analysis.explain_split(guard_in_nested_block)
    assert "guards inside this nested block are kept" in str(report)
    mod = tvm.IRModule({"main": guard_in_nested_block})
    assert_same_results(mod, TailSplit()(mod))


@T.prim_func
def loops_without_blocks(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (40,), "float32")
    B = T.match_buffer(b, (40,), "float32")
    for i_0 in range(5):
        for i_1 in T.serial(8, annotations={"pragma_emit_insn": "vmul8"}):
            if i_0 * 8 + i_1 < n:
                B[i_0 * 8 + i_1] = A[i_0 * 8 + i_1] * T.float32(2)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_marks_in_a_function_without_a_root_block_are_split(strategy):
    """A plain PrimFunc (loops and ifs, no blocks: no root block) was reported as having 'no marks' and left
    unchanged, and estimate_mapping_cost failed on it with an AttributeError."""
    mod = tvm.IRModule({"main": loops_without_blocks})
    reports = []
    after = TailSplit(strategy=strategy, reports=reports)(mod)
    assert reports[0].changed and "marks i_1 (vmul8)" in str(reports[0])
    assert analysis.conditions_under_marks(after) == 0
    assert len(analysis.estimate_mapping_cost(loops_without_blocks)) == 1
    for n in (0, 1, 7, 8, 9, 40, 41):
        assert_same_results(mod, after, scalar_args={"n": n}, trials=1)


@T.prim_func
def marks_under_an_attr(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (40,), "float32")
    B = T.match_buffer(b, (40,), "float32")
    with T.attr(0, "tailsplit_test_scope", 1):
        for i_0 in range(5):
            for i_1 in T.serial(8, annotations={"pragma_emit_insn": "vmul8"}):
                if i_0 * 8 + i_1 < n:
                    B[i_0 * 8 + i_1] = A[i_0 * 8 + i_1] * T.float32(2)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_marks_under_an_attr_stmt_are_split(strategy):
    """Marks below an AttrStmt (T.attr, T.launch_thread in hand-written TIR) were not found: the report said 'no
    marks' and the function stayed unchanged. The AttrStmt is kept once around the split nest."""
    mod = tvm.IRModule({"main": marks_under_an_attr})
    reports = []
    after = TailSplit(strategy=strategy, reports=reports)(mod)
    assert reports[0].changed and "marks i_1 (vmul8)" in str(reports[0])
    assert analysis.conditions_under_marks(after) == 0
    assert after.script().count("tailsplit_test_scope") == 1
    plain = analysis.instruction_count(loops_without_blocks, symbolic_values={"n": 20})
    assert analysis.instruction_count(marks_under_an_attr, symbolic_values={"n": 20}) == plain
    assert plain.issued > 0
    for n in (0, 1, 7, 8, 9, 40, 41):
        assert_same_results(mod, after, scalar_args={"n": n}, trials=1)


@T.prim_func(s_tir=True)
def likely_guard(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (32,), "float32")
    B = T.match_buffer(b, (32,), "float32")
    for i_0 in range(4):
        for i_1 in T.serial(8, annotations={"pragma_emit_insn": "vmul8"}):
            if T.likely(i_0 * 8 + i_1 < n):
                with T.sblock("B"):
                    vi = T.axis.spatial(32, i_0 * 8 + i_1)
                    B[vi] = A[vi] * T.float32(2)


@T.prim_func(s_tir=True)
def negated_guard(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (32,), "float32")
    B = T.match_buffer(b, (32,), "float32")
    for i_0 in range(4):
        for i_1 in T.serial(8, annotations={"pragma_emit_insn": "vmul8"}):
            with T.sblock("B"):
                vi = T.axis.spatial(32, i_0 * 8 + i_1)
                T.where(not (i_0 * 8 + i_1 >= n))
                B[vi] = A[vi] * T.float32(2)


@pytest.mark.parametrize("func", [likely_guard, negated_guard], ids=["likely", "not"])
@pytest.mark.parametrize("strategy", ["full", "partial"])
def test_a_likely_or_negated_comparison_is_split_like_the_comparison(func, strategy):
    """`T.likely(c)` (a hint with the value of `c`) and `not (a >= b)` were opaque atoms: kept under the mark, so
    no main tile was condition-free."""
    mod = tvm.IRModule({"main": func})
    assert analysis.conditions_under_marks(mod) == 1
    after = TailSplit(strategy=strategy)(mod)
    assert analysis.conditions_under_marks(after) == 0
    for n in (-3, 0, 1, 7, 8, 9, 31, 32, 40):
        assert_same_results(mod, after, scalar_args={"n": n}, trials=1)


@T.prim_func(s_tir=True)
def stepped_marked_loop(A: T.Buffer((4, 32), "float32"), B: T.Buffer((4, 32), "float32")):
    for i in range(4):
        for j in T.serial(0, 32, step=3, annotations={"pragma_emit_insn": "vrow"}):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(2)


def test_removing_a_mark_keeps_the_loop_step():
    """``ir_utils.with_loop`` rebuilt loops without their ``step``: a marked ``T.serial(0, 32, step=3)`` lost its
    step when the mark was removed (``remove_marks``, ``tensorize_marked``, every loop TailSplit copies) and
    wrote every column instead of every third."""
    executable = tvm.compile(remove_marks(tvm.IRModule({"main": stepped_marked_loop})), target="llvm")
    a = np.random.default_rng(0).uniform(-1, 1, (4, 32)).astype("float32")
    b = tvm.runtime.tensor(np.zeros((4, 32), "float32"))
    executable["main"](tvm.runtime.tensor(a), b)
    expected = np.zeros((4, 32), "float32")
    expected[:, ::3] = a[:, ::3] * 2
    np.testing.assert_array_equal(b.numpy(), expected)


@T.prim_func(s_tir=True)
def stepped_loop_above_the_mark(A: T.Buffer((8, 32), "float32"), B: T.Buffer((8, 32), "float32"), n: T.int32):
    for i in T.serial(1, 8, step=3):
        for j in T.serial(0, 16, annotations={"pragma_emit_insn": "vrow"}):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.where(j + i < n)
                B[vi, vj] = A[vi, vj] * T.float32(2)


@T.prim_func(s_tir=True)
def stepped_loop_below_the_mark(A: T.Buffer((8, 64), "float32"), B: T.Buffer((8, 64), "float32"), n: T.int32):
    for i in range(8):
        for j in T.serial(0, 4, annotations={"pragma_emit_insn": "vrow"}):
            for k in T.serial(1, 16, step=2):
                with T.sblock("B"):
                    vi = T.axis.spatial(8, i)
                    vj = T.axis.spatial(64, j * 16 + k)
                    T.where(k >= 4 and j * 16 + k < n)
                    B[vi, vj] = A[vi, vj] * T.float32(2)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("func", [stepped_loop_above_the_mark, stepped_loop_below_the_mark])
def test_a_loop_with_a_step_is_never_cut(func, strategy):
    """The planner cut a loop with a step like a loop of step 1: the copy of ``T.serial(1, 8, step=3)`` over
    ``[0, n - 15)`` ran ``i = 0, 3, ...`` (a row the original never writes) and the copy of ``k`` below the mark
    over ``[4, 16)``, rebased to 0, ran the even columns. A loop with a step is now kept whole (its variable is
    decided by a guard chain above the mark, or its guard stays), and the report says why."""
    mod = tvm.IRModule({"main": func})
    reports = []
    after = TailSplit(strategy=strategy, reports=reports)(mod)
    executables = (tvm.compile(remove_marks(mod), target="llvm"), tvm.compile(remove_marks(after), target="llvm"))
    for n in range(-3, 70, 3):
        assert_same_results(mod, after, {"n": n}, trials=1, executables=executables)
    assert "a loop with step" in str(reports[0])


@T.prim_func(s_tir=True)
def tail_with_an_opaque_guard(a: T.handle, b: T.handle, n: T.int32, m: T.int32):
    A = T.match_buffer(a, (64,), "float32")
    B = T.match_buffer(b, (64,), "float32")
    for i_0 in range(4):
        for i_1 in T.serial(16, annotations={"pragma_emit_insn": "v16"}):
            with T.sblock("B"):
                vi = T.axis.spatial(64, i_0 * 16 + i_1)
                T.where(i_0 * 16 + i_1 < n and (i_0 * 16 + i_1 < m or i_1 == 3))
                B[vi] = A[vi] * T.float32(2)


def test_a_second_partial_split_repeats_no_guard_of_the_first():
    """The first run leaves the disjunction (opaque) under the mark and decides ``i_0`` by a guard chain of
    ``if``s on ``n``. A second run planned a chain for ``i_0`` again (the disjunction mentions it) and cut it at
    the split points of the enclosing ``if``: its one case was the range where that ``if`` holds, emitted as a
    copy of it (``if i_0 < T.max(0, T.min(4, n // 16)): if i_0 < T.max(0, T.min(4, n // 16)): ...``). A case is
    now tested over the intervals beside it where an enclosing ``if`` fails, so the second run changes nothing."""
    mod = tvm.IRModule({"main": tail_with_an_opaque_guard})
    once = TailSplit(strategy="partial")(mod)
    twice = TailSplit(strategy="partial")(once)
    tvm.ir.assert_structural_equal(twice, once)
    executables = tuple(tvm.compile(remove_marks(m), target="llvm") for m in (mod, twice))
    for n in (-1, 0, 1, 15, 16, 17, 40, 64, 65):
        for m in (0, 3, 20, 64):
            assert_same_results(mod, twice, {"n": n, "m": m}, trials=1, executables=executables)


@T.prim_func(s_tir=True)
def static_window(A: T.Buffer((48,), "float32"), B: T.Buffer((48,), "float32")):
    for i_0 in T.unroll(3):
        for i_1 in T.serial(16, annotations={"pragma_emit_insn": "v16"}):
            with T.sblock("B"):
                vi = T.axis.spatial(48, i_0 * 16 + i_1)
                T.where(5 <= i_0 * 16 + i_1 and i_0 * 16 + i_1 < 37)
                B[vi] = A[vi] * T.float32(2)


def test_a_second_partial_split_of_a_static_chain_changes_nothing():
    """The guard chain's case for the last tile (a single point at the end of ``i_0``'s range) is emitted as
    ``if i_0 == 2``; a second run dropped its half that always holds (``i_0 <= 2``), so it rewrote the nest
    (``if i_0 >= 2``, and ``i_0 == 1`` as ``i_0 <= 1 and i_0 >= 1``) and reported a partial split with nothing in
    its notes. Atoms that always hold in an ``if`` above the marks no longer make a nest change."""
    mod = tvm.IRModule({"main": static_window})
    once = TailSplit(strategy="partial")(mod)
    reports = []
    twice = TailSplit(strategy="partial", reports=reports)(once)
    tvm.ir.assert_structural_equal(twice, once)
    assert not reports[0].changed
    assert_same_results(mod, twice)


@T.prim_func
def bound_below_the_mark(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (64,), "float32")
    B = T.match_buffer(b, (64,), "float32")
    for i in range(4):
        for j in T.serial(4, annotations={"pragma_emit_insn": "v"}):
            x: T.let = i * 16 + j * 4
            for k in range(4):
                if x + k < n:
                    B[x + k] = A[x + k] * T.float32(2)


@T.prim_func
def bound_above_the_mark(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (64,), "float32")
    B = T.match_buffer(b, (64,), "float32")
    for i in range(4):
        x: T.let = i * 16
        for j in T.serial(16, annotations={"pragma_emit_insn": "v"}):
            if x + j < n:
                B[x + j] = A[x + j] * T.float32(2)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_guard_on_a_variable_bound_below_the_mark_stays_where_the_variable_is_defined(strategy):
    """A variable bound by a ``Bind`` (``x: T.let = ...``) was taken for a symbol like ``n``: the range of ``k``
    intersected with ``x + k < n`` got its end bound above the mark, before ``x`` was bound there, and the pass
    failed in TVM's verifier ('Invalid use of undefined variable x'). Such an end now stays in the loop header
    below the ``Bind``; a ``Bind`` above the mark still lets the end be bound above the mark."""
    for func, where in ((bound_below_the_mark, "depends on variables bound below the mark"),
                        (bound_above_the_mark, "computed above the mark")):
        mod = tvm.IRModule({"main": func})
        reports = []
        after = TailSplit(strategy=strategy, reports=reports)(mod)
        assert where in str(reports[0])
        assert analysis.conditions_under_marks(after) == 0
        executables = (tvm.compile(remove_marks(mod), target="llvm"), tvm.compile(remove_marks(after), target="llvm"))
        for n in range(-2, 68, 3):
            assert_same_results(mod, after, {"n": n}, trials=1, executables=executables)


@T.prim_func
def marks_in_a_while_loop(a: T.handle, b: T.handle, flag: T.handle, n: T.int32):
    A = T.match_buffer(a, (64,), "float32")
    B = T.match_buffer(b, (64,), "float32")
    F = T.match_buffer(flag, (1,), "int32")
    while F[0] > 0:
        for i in range(4):
            for j in T.serial(16, annotations={"pragma_emit_insn": "v"}):
                if i * 16 + j < n:
                    B[i * 16 + j] = A[i * 16 + j] + B[i * 16 + j]
        F[0] = F[0] - 1


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_marks_inside_a_while_loop_are_split(strategy):
    """Marks inside a ``while`` loop were not found: the report said 'no marks, unchanged' and the metrics counted
    no instruction site. The while loop is now kept once around the split nest, and instruction_count, which
    cannot know its trip count, says so."""
    mod = tvm.IRModule({"main": marks_in_a_while_loop})
    reports = []
    after = TailSplit(strategy=strategy, reports=reports)(mod)
    assert reports[0].changed and "marks j (v)" in str(reports[0])
    assert analysis.conditions_under_marks(mod) == 1 and analysis.conditions_under_marks(after) == 0
    with pytest.raises(ValueError, match="while loop .* unknown number of times"):
        analysis.instruction_count(mod, symbolic_values={"n": 5})
    executables = (tvm.compile(remove_marks(mod), target="llvm"), tvm.compile(remove_marks(after), target="llvm"))
    for n in (-1, 0, 1, 15, 16, 17, 40, 64, 65):  # seed 2 draws F = 19: the while loop runs 19 times
        assert_same_results(mod, after, {"n": n}, trials=1, seed=2, executables=executables)


@T.prim_func(s_tir=True)
def likely_kept_under_the_mark(a: T.handle, b: T.handle, n: T.int32, m: T.int32):
    A = T.match_buffer(a, (4, 1), "float32")
    B = T.match_buffer(b, (4, 1), "float32")
    for i_0 in range(1):
        for i_1 in T.serial(4, annotations={"pragma_emit_insn": "v"}):
            for j in range(1):
                if not T.likely(3 * n - j - m >= 3) and 3 * (i_0 * 4 + i_1) - j - n + 2 * m < 12:
                    with T.sblock("B"):
                        vi = T.axis.spatial(4, i_0 * 4 + i_1)
                        vj = T.axis.spatial(1, j)
                        B[vi, vj] = A[vi, vj] * T.float32(2)


@pytest.mark.parametrize("strategy", ["full", "partial"])
def test_likely_hints_kept_under_the_mark_are_dropped(strategy):
    """The opaque guard ``not T.likely(...)`` stayed under the mark, below ``for j in range(T.max(1 - T.max(0, i_0 *
    12 + i_1 * 3 + m * 2 - n - 11), 0))``, and TVM 0.27's LoopPartition, partitioning that loop on the hint, wrote
    11 elements before B and one row too many at n = -3, m = 0. The rewritten nest now carries no likely hint."""
    mod = tvm.IRModule({"main": likely_kept_under_the_mark})
    after = TailSplit(strategy=strategy)(mod)
    executables = (tvm.compile(remove_marks(mod), target="llvm"), tvm.compile(remove_marks(after), target="llvm"))
    for n in range(-3, 14, 2):
        for m in range(-3, 14, 3):
            assert_same_results(mod, after, {"n": n, "m": m}, trials=1, executables=executables)
    assert "T.likely" not in after.script()
