"""TailSplit keeps the meaning of the program: every transformed function is compiled for llvm and run
against the untransformed one on random data, with canaries around every buffer, exhaustively over small
iteration spaces; after a full split the static cases have no condition left under their marks."""

import pytest
import tvm
from tvm import s_tir, te
from tvm.script import tirx as T

from tvm_tailsplit import TailSplit
from tvm_tailsplit.split import analysis
from tvm_tailsplit.split.examples import elementwise_multiply_nc1hwc0, matmul, vector_scale_1d
from tvm_tailsplit.testing import assert_same_results

STRATEGIES = ["full", "partial", "auto"]


def split_and_check(mod, strategy, expect_condition_free=True, **options):
    after = TailSplit(strategy=strategy, **options)(mod)
    s_tir.analysis.verify_well_formed(after["main"])
    assert_same_results(mod, after)
    if expect_condition_free and strategy == "full":
        assert analysis.conditions_under_marks(after) == 0, after.script()
    # No dead copies: every instruction site the pass emits runs at least once.
    assert all(issued > 0 for issued in analysis.instruction_count(after).issued_per_site), after.script()
    return after


@pytest.mark.parametrize("n", list(range(1, 35)))
def test_one_dimensional_tail_every_length(n):
    mod = vector_scale_1d(n, lanes=8)
    for strategy in ("full", "partial"):
        after = split_and_check(mod, strategy)
        assert analysis.conditions_under_marks(after) == 0
        counts = analysis.instruction_count(after)
        assert counts.issued == n // 8 + (1 if n % 8 else 0)


def tiled_2d(m, n, tile_m, tile_n):
    a = te.placeholder((m, n), "float32", name="A")
    b = te.compute((m, n), lambda i, j: a[i, j] + 1.0, name="B")
    sch = s_tir.Schedule(te.create_prim_func([a, b]).with_attr("global_symbol", "main"))
    i, j = sch.get_loops(sch.get_sblock("B"))
    i_outer, i_inner = sch.split(i, [None, tile_m])
    j_outer, j_inner = sch.split(j, [None, tile_n])
    sch.reorder(i_outer, j_outer, i_inner, j_inner)
    sch.annotate(i_inner, "pragma_emit_insn", "vadd_tile")
    return sch.mod


@pytest.mark.parametrize("m,n", [(13, 10), (16, 7), (9, 9), (8, 8), (1, 3), (20, 30)])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_two_dimensional_conjunction_tails(m, n, strategy):
    mod = tiled_2d(m, n, 4, 8)
    after = split_and_check(mod, strategy)
    assert analysis.conditions_under_marks(after) == 0  # the partial split decides outer tiles above the mark
    tiles = -(-m // 4) * -(-n // 8)
    assert analysis.instruction_count(after).issued == tiles


@T.prim_func(s_tir=True)
def sum_below_ten(A: T.Buffer((9, 6), "float32"), B: T.Buffer((9, 6), "float32")):
    for a in range(9):
        for b in T.serial(6, annotations={"pragma_emit_insn": "vcopy"}):
            with T.sblock("B"):
                va, vb = T.axis.remap("SS", [a, b])
                T.where(a + b < 10)
                B[va, vb] = A[va, vb] * T.float32(3)


@T.prim_func(s_tir=True)
def three_variable_sum(A: T.Buffer((5, 6, 7), "float32"), B: T.Buffer((5, 6, 7), "float32")):
    for a in range(5):
        for b in T.serial(6, annotations={"pragma_emit_insn": "vcopy2d"}):
            for c in range(7):
                with T.sblock("B"):
                    va, vb, vc = T.axis.remap("SSS", [a, b, c])
                    T.where(a + b + c < 12)
                    B[va, vb, vc] = A[va, vb, vc] + T.float32(1)


@T.prim_func(s_tir=True)
def triangular(A: T.Buffer((12, 12), "float32"), B: T.Buffer((12, 12), "float32")):
    for i in range(12):
        for j in T.serial(12, annotations={"pragma_emit_insn": "vrow"}):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.where(j <= i)
                B[vi, vj] = A[vi, vj] - A[vj, vi]


@T.prim_func(s_tir=True)
def body_if_else(A: T.Buffer((10, 12), "float32"), B: T.Buffer((10, 12), "float32")):
    for i in range(10):
        for j_0 in range(3):
            for j_1 in T.serial(4, annotations={"pragma_emit_insn": "vsel"}):
                with T.sblock("B"):
                    vi = T.axis.spatial(10, i)
                    vj = T.axis.spatial(12, j_0 * 4 + j_1)
                    if vi * 2 + vj < 17:
                        B[vi, vj] = A[vi, vj]
                    else:
                        B[vi, vj] = T.float32(0)


@T.prim_func(s_tir=True)
def loop_level_if(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8, 16), "float32")):
    for i in range(8):
        for j_0 in range(4):
            for j_1 in T.serial(4, annotations={"pragma_emit_insn": "vneg"}):
                if i + j_0 * 4 + j_1 >= 5:
                    with T.sblock("B"):
                        vi = T.axis.spatial(8, i)
                        vj = T.axis.spatial(16, j_0 * 4 + j_1)
                        B[vi, vj] = -A[vi, vj]


@T.prim_func(s_tir=True)
def two_blocks_one_nest(A: T.Buffer((30,), "float32"), B: T.Buffer((30,), "float32"), C: T.Buffer((30,), "float32")):
    for i_0 in range(4):
        for i_1 in T.serial(8, annotations={"pragma_emit_insn": "vdouble"}):
            with T.sblock("B"):
                vi = T.axis.spatial(30, i_0 * 8 + i_1)
                T.where(i_0 * 8 + i_1 < 30)
                B[vi] = A[vi] * T.float32(2)
        for i_1 in T.serial(8, annotations={"pragma_emit_insn": "vtriple"}):
            with T.sblock("C"):
                vi = T.axis.spatial(30, i_0 * 8 + i_1)
                T.where(i_0 * 8 + i_1 < 27)
                C[vi] = A[vi] * T.float32(3)


@pytest.mark.parametrize(
    "func",
    [sum_below_ten, three_variable_sum, triangular, body_if_else, loop_level_if, two_blocks_one_nest],
    ids=["a+b<10", "a+b+c<12", "triangular", "body-if-else", "loop-if", "two-marks"],
)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_static_conditions(func, strategy):
    mod = tvm.IRModule({"main": func})
    split_and_check(mod, strategy)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_partial_split_leaves_no_condition_below_the_mark_for_static_cases(strategy):
    for func in (sum_below_ten, three_variable_sum, triangular, body_if_else, loop_level_if):
        after = TailSplit(strategy=strategy)(tvm.IRModule({"main": func}))
        assert analysis.conditions_under_marks(after) == 0, after.script()


def matmul_init_update(m, n, k, tile):
    sch = s_tir.Schedule(matmul(m, n, k))
    block = sch.get_sblock("C")
    i, j, kk = sch.get_loops(block)
    i_outer, i_inner = sch.split(i, [None, tile])
    j_outer, j_inner = sch.split(j, [None, tile])
    k_outer, k_inner = sch.split(kk, [None, tile])
    sch.reorder(i_outer, j_outer, k_outer, i_inner, j_inner, k_inner)
    init = sch.decompose_reduction(block, k_outer)
    sch.annotate(i_inner, "pragma_emit_insn", "mma_tile")
    init_loops = sch.get_loops(init)
    sch.annotate(init_loops[2], "pragma_emit_insn", "fill_tile")
    return sch.mod


@pytest.mark.parametrize("shape", [(7, 9, 11), (8, 8, 8), (5, 12, 3)])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_matmul_with_init_and_update_marks(shape, strategy):
    mod = matmul_init_update(*shape, tile=4)
    after = split_and_check(mod, strategy)
    assert analysis.conditions_under_marks(after) == 0


def test_headline_elementwise_multiply_runs_the_same():
    mod = elementwise_multiply_nc1hwc0()
    for strategy in STRATEGIES:
        split_and_check(mod, strategy)


@T.prim_func(s_tir=True)
def reduction_with_init(A: T.Buffer((10, 13), "float32"), B: T.Buffer((10,), "float32")):
    for i in range(10):
        for k_0 in range(4):
            for k_1 in T.serial(4, annotations={"pragma_emit_insn": "vreduce4"}):
                with T.sblock("B"):
                    vi = T.axis.spatial(10, i)
                    vk = T.axis.reduce(13, k_0 * 4 + k_1)
                    T.where(k_0 * 4 + k_1 < 13)
                    with T.init():
                        B[vi] = T.float32(0)
                    B[vi] = B[vi] + A[vi, vk]


@T.prim_func(s_tir=True)
def mark_inside_nested_block(A: T.Buffer((30,), "float32"), B: T.Buffer((30,), "float32")):
    for i_0 in range(4):
        with T.sblock("outer"):
            vo = T.axis.spatial(4, i_0)
            for i_1 in T.serial(8, annotations={"pragma_emit_insn": "vdouble"}):
                with T.sblock("B"):
                    vi = T.axis.spatial(30, vo * 8 + i_1)
                    T.where(vo * 8 + i_1 < 30)
                    B[vi] = A[vi] * T.float32(2)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_reduction_block_with_init(strategy):
    split_and_check(tvm.IRModule({"main": reduction_with_init}), strategy)


def test_mark_inside_a_nested_block_is_left_unchanged_and_reported():
    mod = tvm.IRModule({"main": mark_inside_nested_block})
    reports = []
    after = TailSplit(strategy="full", reports=reports)(mod)
    assert_same_results(mod, after)
    assert "marks inside a nested block are left unchanged" in str(reports[0])
