"""The metrics and the seed's headline: an element-wise multiply over c1=3, h_o=3, w=4, h_i=8, c0=16 with the
h axis cut into two full tiles and a tail, the mark below h_o: 4608 issued instructions become 9."""

import pytest
import tvm
from tvm.script import tirx as T

from tvm_tailsplit import TailSplit
from tvm_tailsplit.split import analysis
from tvm_tailsplit.split.examples import elementwise_multiply_nc1hwc0
from tvm_tailsplit.testing import assert_same_results


def test_headline_4608_instructions_become_9():
    mod = elementwise_multiply_nc1hwc0()
    before = analysis.instruction_count(mod)
    assert before == analysis.InstructionCount(sites=1, issued=3 * 3 * 4 * 8 * 16)
    assert before.issued == 4608
    assert analysis.conditions_under_marks(mod) == 1
    after = TailSplit()(mod)
    counts = analysis.instruction_count(after)
    assert counts == analysis.InstructionCount(sites=2, issued=9)
    assert counts.issued_per_site == (6, 3)
    assert before.issued // counts.issued == 512
    assert analysis.conditions_under_marks(after) == 0
    # 6 full-tile instructions (c1 x two full h tiles) and 3 tail-tile instructions (c1 x the tail).
    script = after.script()
    assert "for j_0 in range(2):" in script and "for j_0 in range(2, 3):" in script
    assert "T.grid(4, 16)" in script  # the tail tile: h_i has 4 rows


@T.prim_func(s_tir=True)
def chain_with_symbolic(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (64,), "float32")
    B = T.match_buffer(b, (64,), "float32")
    for i_0 in range(n):
        for i_1 in T.serial(8, annotations={"pragma_emit_insn": "vmul8"}):
            with T.sblock("B"):
                vi = T.axis.spatial(64, i_0 * 8 + i_1)
                B[vi] = A[vi]


def test_instruction_count_with_symbolic_values():
    assert analysis.instruction_count(chain_with_symbolic, symbolic_values={"n": 5}).issued == 5
    with pytest.raises(ValueError, match="extent of loop i_0 is n"):
        analysis.instruction_count(chain_with_symbolic)
    with pytest.raises(ValueError, match="symbolic variable 'm'"):
        analysis.instruction_count(chain_with_symbolic, symbolic_values={"m": 5})


@T.prim_func(s_tir=True)
def chain_with_two_symbols(a: T.handle, b: T.handle, n: T.int32, m: T.int32):
    A = T.match_buffer(a, (64,), "float32")
    B = T.match_buffer(b, (64,), "float32")
    for i_0 in range(n):
        if i_0 < m:
            for i_1 in T.serial(8, annotations={"pragma_emit_insn": "vmul8"}):
                with T.sblock("B"):
                    vi = T.axis.spatial(64, i_0 * 8 + i_1)
                    B[vi] = A[vi]


@pytest.mark.parametrize("value", ["5", 2.5, True, None])
def test_a_symbolic_value_that_is_no_int_is_named(value):
    """symbolic_values={"n": "x"} failed with "invalid literal for int() with base 10: 'x'" (naming neither n nor
    symbolic_values), and 2.5 or True counted as 2 or 1."""
    with pytest.raises(TypeError, match=r"symbolic_values\['n'\] must be an int, got "):
        analysis.instruction_count(chain_with_symbolic, symbolic_values={"n": value})


def test_the_variables_without_a_value_are_named():
    """With n given and m not, the error said 'give the symbolic variables values' without saying which."""
    assert analysis.instruction_count(chain_with_two_symbols, symbolic_values={"n": 5, "m": 3}).issued == 3
    with pytest.raises(ValueError, match=r"condition i_0 < m is .*\(without a value: m\)"):
        analysis.instruction_count(chain_with_two_symbols, symbolic_values={"n": 5})


def test_unknown_function_name_is_reported():
    with pytest.raises(ValueError, match="function 'other' is not in the module"):
        analysis.instruction_count(tvm.IRModule({"main": chain_with_symbolic}), func_name="other")


@pytest.mark.parametrize("metric", [analysis.instruction_count, analysis.conditions_under_marks,
                                    analysis.estimate_mapping_cost, analysis.explain_split])
def test_something_other_than_a_module_or_a_function_is_a_type_error(metric):
    """A schedule (``sch`` rather than ``sch.mod``) raised "'Schedule' object has no attribute 'functions'"."""
    schedule = tvm.s_tir.Schedule(chain_with_symbolic)
    with pytest.raises(TypeError, match="expected a tvm.IRModule or a tirx.PrimFunc, got Schedule"):
        metric(schedule)


@T.prim_func(s_tir=True)
def stepped_loops(A: T.Buffer((8, 32), "float32"), B: T.Buffer((8, 32), "float32")):
    for i in T.serial(1, 8, step=3):
        for j in T.serial(0, 32, step=4, annotations={"pragma_emit_insn": "vrow"}):
            for k in T.serial(0, 4, step=2):
                with T.sblock("B"):
                    vi = T.axis.spatial(8, i)
                    vj = T.axis.spatial(32, j + k)
                    T.where(j + k < 30)
                    B[vi, vj] = A[vi, vj]


def test_instruction_count_runs_loops_with_a_step_once_per_step():
    """``i`` in ``T.serial(1, 8, step=3)`` takes 3 values and the marked region 8 x 2 points; the count once took
    every value of each range (7 x 32 x 4)."""
    assert analysis.instruction_count(stepped_loops) == analysis.InstructionCount(sites=1, issued=3 * 8 * 2)


@T.prim_func
def guard_in_an_attr_scope(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (64,), "float32")
    B = T.match_buffer(b, (64,), "float32")
    for i in range(4):
        for j in T.serial(16, annotations={"pragma_emit_insn": "v"}):
            with T.attr(0, "tailsplit_test_scope", 1):
                if i * 16 + j < n:
                    B[i * 16 + j] = A[i * 16 + j] * T.float32(2)


def test_a_guard_inside_an_attr_scope_below_the_mark_is_seen():
    """A guard below the mark inside a ``T.attr`` scope was invisible: ``conditions_under_marks`` said 0, every
    marked loop counted as one instruction (4 issued instead of one per point), and TailSplit's report said
    "0 conditions ... nothing to split" without a word about the guard it kept."""
    assert analysis.conditions_under_marks(guard_in_an_attr_scope) == 1
    assert analysis.instruction_count(guard_in_an_attr_scope, symbolic_values={"n": 20}).issued == 64
    report = str(analysis.explain_split(guard_in_an_attr_scope))
    assert "1 conditions" in report and "mark j: not split: it contains a AttrStmt statement" in report
    mod = tvm.IRModule({"main": guard_in_an_attr_scope})
    after = TailSplit()(mod)
    for n in (-1, 0, 7, 16, 17, 64):
        assert_same_results(mod, after, {"n": n}, trials=1)
