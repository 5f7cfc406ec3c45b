"""The mapping-cost model: code length per strategy from the plans, the features it reports, and the
deterministic full / partial choice of ``strategy="auto"``."""

import tvm
from tvm.script import tirx as T

from tvm_tailsplit import TailSplit
from tvm_tailsplit.split import analysis
from tvm_tailsplit.testing import assert_same_results


@T.prim_func(s_tir=True)
def deep_nest(A: T.Buffer((6, 5, 4, 7), "float32"), B: T.Buffer((6, 5, 4, 7), "float32")):
    for a in range(6):
        for x in range(5):
            for y in range(4):
                for b in T.serial(7, annotations={"pragma_emit_insn": "vrow"}):
                    with T.sblock("B"):
                        va, vx, vy, vb = T.axis.remap("SSSS", [a, x, y, b])
                        T.where(a + b < 8)
                        B[va, vx, vy, vb] = A[va, vx, vy, vb] * T.float32(2)


def test_estimate_reports_both_strategies_and_the_features():
    (cost,) = analysis.estimate_mapping_cost(deep_nest)
    assert cost.condition_variables == ("a", "b")
    assert cost.loop_depth == 4
    assert cost.conditions == 1
    assert cost.fuzzy_interval_sizes == {"a": [4], "b": [4]}  # a in [2,5], b in [3,6]
    # The full split copies the x and y loops for every piece of a; the partial split does not.
    assert cost.full_split > cost.partial_split
    assert cost.chosen == "full"


def test_auto_picks_partial_split_when_the_full_split_is_too_long():
    (cost,) = analysis.estimate_mapping_cost(deep_nest, max_mapping_cost=10)
    assert cost.chosen == "partial"
    mod = tvm.IRModule({"main": deep_nest})
    reports = []
    after = TailSplit(strategy="auto", max_mapping_cost=10, reports=reports)(mod)
    assert reports[0].nests[0].strategy == "partial"
    assert_same_results(mod, after)
    assert analysis.conditions_under_marks(after) == 0
    # One copy of each loop above the mark: the outer loops a, x, y appear once in the partial split.
    assert after.script().count("for a, x, y in T.grid(6, 5, 4):") == 1


def test_the_choice_is_deterministic():
    mod = tvm.IRModule({"main": deep_nest})
    first = TailSplit(strategy="auto", max_mapping_cost=30)(mod)
    second = TailSplit(strategy="auto", max_mapping_cost=30)(mod)
    tvm.ir.assert_structural_equal(first, second)
    assert first.script() == second.script()


def triangle(size):
    @T.prim_func(s_tir=True)
    def func(A: T.Buffer((size, size), "float32"), B: T.Buffer((size, size), "float32")):
        for i in range(size):
            for j in T.serial(size, annotations={"pragma_emit_insn": "vrow"}):
                with T.sblock("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    T.where(j <= i)
                    B[vi, vj] = A[vi, vj]

    return func


def test_estimated_lengths_grow_with_the_fuzzy_interval():
    costs = [analysis.estimate_mapping_cost(triangle(size))[0].full_split for size in (8, 16, 32)]
    assert costs[0] < costs[1] < costs[2]


@T.prim_func(s_tir=True)
def halved_bounds(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8, 16), "float32"), n: T.int32):
    for i in range(8):
        for j in T.serial(16, annotations={"pragma_emit_insn": "vrow"}):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.where(j < n // 2 and i * 2 < n // 3)
                B[vi, vj] = A[vi, vj] * T.float32(2)


def test_the_estimate_is_the_cost_the_pass_reports_for_bounds_such_as_n_floordiv_2():
    """``n // 2`` is a symbol like ``n`` to the pass (``conditions.loop_invariant_symbols``); the estimate once
    planned without that context, saw the guards as opaque and gave a partial split of 4 where the pass's report
    said 5."""
    reports = []
    TailSplit(reports=reports)(tvm.IRModule({"main": halved_bounds}))
    assert analysis.estimate_mapping_cost(halved_bounds) == [reports[0].nests[0].cost]
