"""Bad and undecidable input: functions without marks pass through unchanged, conditions the pass cannot
decide are kept (and the program stays correct), invalid options raise ValueError, and the report explains
per mark what was split and what was kept and why."""

import logging
import re

import numpy as np
import pytest
import tvm
from tvm.script import tirx as T

from tvm_tailsplit import TailSplit
from tvm_tailsplit.split import analysis, split_function
from tvm_tailsplit.testing import assert_same_results


@T.prim_func(s_tir=True)
def no_marks(A: T.Buffer((10,), "float32"), B: T.Buffer((10,), "float32")):
    for i_0, i_1 in T.grid(3, 4):
        with T.sblock("B"):
            vi = T.axis.spatial(10, i_0 * 4 + i_1)
            T.where(i_0 * 4 + i_1 < 10)
            B[vi] = A[vi]


@T.prim_func(s_tir=True)
def square_condition(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    for i in range(8):
        for j in T.serial(8, annotations={"pragma_emit_insn": "vrow"}):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.where(i * j < 20)
                B[vi, vj] = A[vi, vj] + T.float32(1)


@T.prim_func(s_tir=True)
def load_condition(A: T.Buffer((16,), "float32"), M: T.Buffer((16,), "int32"), B: T.Buffer((16,), "float32")):
    for i_0 in range(4):
        for i_1 in T.serial(4, annotations={"pragma_emit_insn": "vmask"}):
            with T.sblock("B"):
                vi = T.axis.spatial(16, i_0 * 4 + i_1)
                T.where(M[i_0 * 4 + i_1] > 0 and i_0 * 4 + i_1 < 14)
                B[vi] = A[vi]


@T.prim_func(s_tir=True)
def symbolic_extent(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (64,), "float32")
    B = T.match_buffer(b, (64,), "float32")
    for i_0 in range(8):
        for i_1 in T.serial(8, annotations={"pragma_emit_insn": "vmul8"}):
            with T.sblock("B"):
                vi = T.axis.spatial(64, i_0 * 8 + i_1)
                T.where(i_0 * 8 + i_1 < n)
                B[vi] = A[vi] * T.float32(2)


def test_a_function_without_marks_passes_through_unchanged():
    mod = tvm.IRModule({"main": no_marks})
    after = TailSplit()(mod)
    tvm.ir.assert_structural_equal(after, mod)
    func, report = split_function(no_marks)
    assert func.same_as(no_marks)
    assert "no marks" in str(report)


def test_non_affine_condition_is_kept_and_the_program_stays_correct():
    mod = tvm.IRModule({"main": square_condition})
    reports = []
    after = TailSplit(strategy="full", reports=reports)(mod)
    assert_same_results(mod, after)
    text = str(reports[0])
    assert "i * j < 20 kept under the mark: not an affine integer comparison" in text


def test_condition_on_a_load_is_kept_while_the_affine_part_is_split():
    mod = tvm.IRModule({"main": load_condition})
    reports = []
    after = TailSplit(strategy="full", reports=reports)(mod)
    assert_same_results(mod, after, trials=4)
    assert "opaque" in str(reports[0])
    # The affine atom i_0 * 4 + i_1 < 14 is gone; only the load-based atom stays under the marks.
    script = after.script()
    assert "< 14" not in script and "M[" in script


@pytest.mark.parametrize("n", [-2, 0, 1, 7, 8, 9, 30, 64])
def test_symbolic_condition_is_split_with_its_bound_hoisted_and_explained(n):
    mod = tvm.IRModule({"main": symbolic_extent})
    reports = []
    after = TailSplit(strategy="full", reports=reports)(mod)
    assert_same_results(mod, after, scalar_args={"n": n})
    text = str(reports[0])
    assert "loop i_0: split by i_0 * 8 + i_1 < n" in text
    assert "loop i_1: range intersected with i_0 * 8 + i_1 < n: [0, T.min(8, n - i_0 * 8)), computed above the mark" \
        in text
    assert "proved: loop i_1" in text


@pytest.mark.parametrize(
    "options, message",
    [
        ({"strategy": "fastest"}, "strategy must be one of"),
        ({"max_mapping_cost": 0}, "max_mapping_cost must be a positive integer"),
        ({"max_mapping_cost": 2.5}, "max_mapping_cost must be a positive integer"),
        ({"max_fuzzy_expansion": -1}, "max_fuzzy_expansion must be a positive integer"),
    ],
)
def test_invalid_options_raise_value_error(options, message):
    with pytest.raises(ValueError, match=message):
        TailSplit(**options)


def test_a_verbose_that_is_not_a_bool_is_refused():
    # verbose="no" is truthy: it logged every report at INFO without a word
    with pytest.raises(TypeError, match="TailSplit: verbose must be a bool, got str 'no'"):
        TailSplit(verbose="no")


def test_verbose_explains_what_was_split_and_kept(caplog):
    caplog.set_level(logging.INFO, logger="tvm_tailsplit")
    TailSplit(strategy="auto", verbose=True)(tvm.IRModule({"main": load_condition}))
    out = caplog.text
    assert "TailSplit main:" in out  # named by the GlobalVar
    assert "marks i_1 (vmask)" in out
    assert "mapping cost: full split" in out
    assert "loop i_0: split by" in out
    assert "kept under the mark" in out


def test_long_fuzzy_interval_is_not_expanded_beyond_the_limit():
    mod = tvm.IRModule({"main": square_condition.with_attr("global_symbol", "main")})

    @T.prim_func(s_tir=True)
    def diagonal(A: T.Buffer((40, 40), "float32"), B: T.Buffer((40, 40), "float32")):
        for i in range(40):
            for j in T.serial(40, annotations={"pragma_emit_insn": "vrow"}):
                with T.sblock("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    T.where(j <= i)
                    B[vi, vj] = A[vi, vj]

    mod = tvm.IRModule({"main": diagonal})
    reports = []
    after = TailSplit(strategy="full", max_fuzzy_expansion=8, reports=reports)(mod)
    assert_same_results(mod, after)
    assert "more than max_fuzzy_expansion=8" in str(reports[0])
    assert analysis.conditions_under_marks(after) >= 1
    assert np.isfinite(analysis.instruction_count(after).issued)


@T.prim_func(s_tir=True)
def tetrahedron(A: T.Buffer((16, 16, 16), "float32"), B: T.Buffer((16, 16, 16), "float32")):
    for i, j in T.grid(16, 16):
        for k in T.serial(16, annotations={"pragma_emit_insn": "vrow"}):
            with T.sblock("B"):
                vi, vj, vk = T.axis.remap("SSS", [i, j, k])
                T.where(i + j + k < 16)
                B[vi, vj, vk] = A[vi, vj, vk] * T.float32(2)


@pytest.mark.parametrize("strategy", ["full", "partial"])
def test_nested_expansions_stay_within_the_limit(strategy):
    """Expansions multiply along the nest: each of the 16 points of ``i`` held an expansion of ``j`` (16 - i
    points), 136 copies of block B for max_fuzzy_expansion=16 (with extents of 64 and one loop more: 43,680 guard
    chain cases, planned in 24 s). No statement is now copied more than max_fuzzy_expansion times by expansions:
    ``i`` is expanded, ``j`` keeps its fuzzy interval, and the report says why."""
    mod = tvm.IRModule({"main": tetrahedron})
    reports = []
    after = TailSplit(strategy=strategy, max_fuzzy_expansion=16, reports=reports)(mod)
    assert_same_results(mod, after)
    copies = after.script().count('T.sblock("B')
    assert copies <= 2 * 16, copies  # the expanded points of i, each with the intervals of j it keeps
    assert re.search(r"of j has \d+ points \(\d+ copies with the 16 of the expanded intervals around it\), more "
                     "than max_fuzzy_expansion=16: not expanded", str(reports[0]))


@T.prim_func(s_tir=True)
def symbolic_outer_loop(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (n * 8,), "float32")
    B = T.match_buffer(b, (n * 8,), "float32")
    for i_0 in range(n):
        for i_1 in T.serial(8, annotations={"pragma_emit_insn": "vmul8"}):
            with T.sblock("B"):
                vi = T.axis.spatial(n * 8, i_0 * 8 + i_1)
                T.where(i_1 < 5)
                B[vi] = A[vi] * T.float32(2)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7])
def test_static_guard_under_a_symbolic_loop_is_split(n):
    mod = tvm.IRModule({"main": symbolic_outer_loop})
    after = TailSplit()(mod)
    assert analysis.conditions_under_marks(after) == 0
    assert "for i_0 in range(n)" in after.script()
    assert_same_results(mod, after, scalar_args={"n": n})


def test_explain_split_reports_without_changing_the_function():
    report = analysis.explain_split(load_condition, strategy="full")
    text = str(report)
    assert "loop i_0: split by" in text and "M[i_0 * 4 + i_1] > 0 kept under the mark: not an affine" in text
    assert analysis.conditions_under_marks(load_condition) == 1


@T.prim_func(s_tir=True)
def loop_level_floordiv_guard(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (32,), "float32")
    B = T.match_buffer(b, (32,), "float32")
    for i_0 in range(4):
        for i_1 in T.serial(8, annotations={"pragma_emit_insn": "vmul8"}):
            if (i_0 * 8 + i_1) // 3 < n:
                with T.sblock("B"):
                    vi = T.axis.spatial(32, i_0 * 8 + i_1)
                    B[vi] = A[vi] * T.float32(2)


def test_a_loop_level_if_kept_under_a_mark_is_explained():
    """A loop-level if under a mark that the pass cannot decide was kept with no word in the report (only the
    guards of blocks were explained)."""
    mod = tvm.IRModule({"main": loop_level_floordiv_guard})
    reports = []
    after = TailSplit(strategy="full", reports=reports)(mod)
    assert "mark i_1: if (i_0 * 8 + i_1) // 3 < n kept under the mark: not an affine integer comparison" \
        in str(reports[0])
    for n in (0, 1, 5, 11):
        assert_same_results(mod, after, scalar_args={"n": n}, trials=1)


@T.prim_func(s_tir=True)
def fused_row_tails(A: T.Buffer((10, 37), "float32"), B: T.Buffer((10, 37), "float32")):
    # sch.fuse(i, j_0) after splitting 37 by 16: the tail test goes through % (no split point)
    for i_j_0_fused in range(30):
        for j_1 in T.serial(16, annotations={"pragma_emit_insn": "vrow"}):
            with T.sblock("B"):
                vi = T.axis.spatial(10, i_j_0_fused // 3)
                vj = T.axis.spatial(37, i_j_0_fused % 3 * 16 + j_1)
                T.where(i_j_0_fused % 3 * 16 + j_1 < 37)
                B[vi, vj] = A[vi, vj] * T.float32(2)


@pytest.mark.parametrize("strategy", ["auto", "full", "partial"])
def test_a_loop_no_condition_cuts_is_reported_unchanged(strategy):
    """A split or guard chain of one piece over the whole range changes nothing: the report said 'full split'
    with 'loop i_j_0_fused: split by ...: [0,29]' and SplitReport.changed was True for an unchanged program."""
    func, report = split_function(fused_row_tails, strategy=strategy)
    assert func.same_as(fused_row_tails)
    assert not report.changed
    text = str(report)
    assert "(nothing to split)" in text
    assert "split by" not in text and "guard chain" not in text
    assert "i_j_0_fused % 3 * 16 + j_1 < 37 kept under the mark" in text


@T.prim_func(s_tir=True)
def fused_split_row_tails(A: T.Buffer((10, 37), "float32"), B: T.Buffer((10, 37), "float32")):
    # as fused_row_tails, the fused loop split by 4: its last step (28, 29) is cut, the others are not
    for f_0, f_1 in T.grid(8, 4):
        for j_1 in T.serial(16, annotations={"pragma_emit_insn": "vrow"}):
            with T.sblock("B"):
                vi = T.axis.spatial(10, (f_0 * 4 + f_1) // 3)
                vj = T.axis.spatial(37, (f_0 * 4 + f_1) % 3 * 16 + j_1)
                T.where(f_0 * 4 + f_1 < 30 and (f_0 * 4 + f_1) % 3 * 16 + j_1 < 37)
                B[vi, vj] = A[vi, vj] * T.float32(2)


@pytest.mark.parametrize("strategy", ["full", "partial"])
def test_copies_a_split_leaves_whole_are_reported_as_not_cut(strategy):
    mod = tvm.IRModule({"main": fused_split_row_tails})
    reports = []
    after = TailSplit(strategy=strategy, reports=reports)(mod)
    assert_same_results(mod, after)
    assert reports[0].changed
    (line,) = [line for line in str(reports[0]).splitlines() if "- loop f_1:" in line]
    assert line.endswith(": [0,3] (whole range: not cut) | [0,1]"), line
