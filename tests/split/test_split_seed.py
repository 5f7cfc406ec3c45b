"""The seed's example, reproduced exactly: ``for a in range(9): for b in range(6): if a + b < 10`` with the
mark on ``b``. Full split: ``a`` in [0,4] with ``b`` in [0,5] and no condition, then ``a = 5, 6, 7, 8`` with
``b`` in [0,4], [0,3], [0,2], [0,1]. Partial split: one ``a`` loop, decided by a guard chain above the mark
(disjoint ``if``s)."""

import tvm
from tvm.script import tirx as T

from tvm_tailsplit import TailSplit
from tvm_tailsplit.split import analysis, split_function


@T.prim_func(s_tir=True)
def seed(A: T.Buffer((9, 6), "float32"), B: T.Buffer((9, 6), "float32")):
    for a in range(9):
        for b in T.serial(6, annotations={"pragma_emit_insn": "vcopy"}):
            with T.sblock("B"):
                va, vb = T.axis.remap("SS", [a, b])
                T.where(a + b < 10)
                B[va, vb] = A[va, vb]


@T.prim_func(s_tir=True)
def seed_full_split(A: T.Buffer((9, 6), "float32"), B: T.Buffer((9, 6), "float32")):
    for a in range(5):
        for b in T.serial(6, annotations={"pragma_emit_insn": "vcopy"}):
            with T.sblock("B_0"):
                va = T.axis.spatial(9, a)
                vb = T.axis.spatial(6, b)
                B[va, vb] = A[va, vb]
    for a in range(5, 6):
        for b in T.serial(5, annotations={"pragma_emit_insn": "vcopy"}):
            with T.sblock("B_1"):
                va = T.axis.spatial(9, a)
                vb = T.axis.spatial(6, b)
                B[va, vb] = A[va, vb]
    for a in range(6, 7):
        for b in T.serial(4, annotations={"pragma_emit_insn": "vcopy"}):
            with T.sblock("B_2"):
                va = T.axis.spatial(9, a)
                vb = T.axis.spatial(6, b)
                B[va, vb] = A[va, vb]
    for a in range(7, 8):
        for b in T.serial(3, annotations={"pragma_emit_insn": "vcopy"}):
            with T.sblock("B_3"):
                va = T.axis.spatial(9, a)
                vb = T.axis.spatial(6, b)
                B[va, vb] = A[va, vb]
    for a in range(8, 9):
        for b in T.serial(2, annotations={"pragma_emit_insn": "vcopy"}):
            with T.sblock("B_4"):
                va = T.axis.spatial(9, a)
                vb = T.axis.spatial(6, b)
                B[va, vb] = A[va, vb]


@T.prim_func(s_tir=True)
def seed_partial_split(A: T.Buffer((9, 6), "float32"), B: T.Buffer((9, 6), "float32")):
    for a in range(9):
        if a < 5:
            for b in T.serial(6, annotations={"pragma_emit_insn": "vcopy"}):
                with T.sblock("B_0"):
                    va, vb = T.axis.remap("SS", [a, b])
                    B[va, vb] = A[va, vb]
        if a == 5:
            for b in T.serial(5, annotations={"pragma_emit_insn": "vcopy"}):
                with T.sblock("B_1"):
                    va = T.axis.spatial(9, a)
                    vb = T.axis.spatial(6, b)
                    B[va, vb] = A[va, vb]
        if a == 6:
            for b in T.serial(4, annotations={"pragma_emit_insn": "vcopy"}):
                with T.sblock("B_2"):
                    va = T.axis.spatial(9, a)
                    vb = T.axis.spatial(6, b)
                    B[va, vb] = A[va, vb]
        if a == 7:
            for b in T.serial(3, annotations={"pragma_emit_insn": "vcopy"}):
                with T.sblock("B_3"):
                    va = T.axis.spatial(9, a)
                    vb = T.axis.spatial(6, b)
                    B[va, vb] = A[va, vb]
        if a == 8:
            for b in T.serial(2, annotations={"pragma_emit_insn": "vcopy"}):
                with T.sblock("B_4"):
                    va = T.axis.spatial(9, a)
                    vb = T.axis.spatial(6, b)
                    B[va, vb] = A[va, vb]


def _without_symbol(func):
    return func.without_attr("global_symbol") if "global_symbol" in func.attrs else func


def test_full_split_reproduces_the_seed_exactly():
    after, report = split_function(seed, strategy="full")
    tvm.ir.assert_structural_equal(_without_symbol(after), _without_symbol(seed_full_split))
    assert analysis.conditions_under_marks(after) == 0
    assert analysis.instruction_count(after) == analysis.InstructionCount(sites=5, issued=9)
    notes = [str(n) for n in report.nests[0].notes]
    assert "loop a: split by a + b < 10: [0,4], 5, 6, 7, 8" in notes
    assert "loop b: split by a + b < 10: [0,4] | [0,3] | [0,2] | [0,1]" in notes


def test_partial_split_keeps_one_outer_loop_and_decides_it_above_the_mark():
    after, report = split_function(seed, strategy="partial")
    tvm.ir.assert_structural_equal(_without_symbol(after), _without_symbol(seed_partial_split))
    assert analysis.conditions_under_marks(after) == 0
    assert report.nests[0].strategy == "partial"


def test_the_pass_works_inside_sequential():
    mod = tvm.IRModule({"main": seed})
    with tvm.transform.PassContext(opt_level=3):
        after = tvm.transform.Sequential([TailSplit(strategy="full")])(mod)
    tvm.ir.assert_structural_equal(_without_symbol(after["main"]), _without_symbol(seed_full_split))


def test_without_the_pass_the_guard_forces_one_instruction_per_point():
    assert analysis.instruction_count(seed) == analysis.InstructionCount(sites=1, issued=54)
    assert analysis.conditions_under_marks(seed) == 1
