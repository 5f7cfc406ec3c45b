"""The interval analysis alone: always-true / fuzzy / always-false intervals of one loop variable, with the
other variables over their bound ranges (pure functions, no IR rewriting)."""

import itertools

import pytest
from tvm import sym, tirx

from tvm_tailsplit.ir_utils import substitute
from tvm_tailsplit.split.conditions import atoms_of
from tvm_tailsplit.split.intervals import (
    RangeContext,
    Status,
    decompose_range,
    decompose_symbolic_range,
    intersect_range,
)


def context_with(**ranges):
    context = RangeContext()
    variables = {}
    for name, (lo, hi) in ranges.items():
        var = tirx.Var(name, "int32")
        variables[name] = var
        context.bind(var, tirx.const(lo, "int32"), tirx.const(hi - lo, "int32"))
    return context, variables


def describe(intervals):
    return [(i.lo, i.hi - 1, i.status.value) for i in intervals]


def test_seed_condition_on_the_outer_variable():
    context, v = context_with(a=(0, 9), b=(0, 6))
    intervals = decompose_range(v["a"], 0, 9, atoms_of(v["a"] + v["b"] < 10), context)
    assert describe(intervals) == [(0, 4, "always-true"), (5, 8, "fuzzy")]


def test_seed_condition_on_the_inner_variable_for_each_outer_value():
    context, v = context_with(a=(0, 9), b=(0, 6))
    expected_last_true = {5: 4, 6: 3, 7: 2, 8: 1}
    for a_value, last in expected_last_true.items():
        with context.narrowed(v["a"], a_value, a_value + 1):
            intervals = decompose_range(v["b"], 0, 6, atoms_of(v["a"] + v["b"] < 10), context)
        assert intervals[0].lo == 0 and intervals[0].hi - 1 == last
        assert intervals[0].status is Status.ALWAYS_TRUE
        assert all(i.status is Status.ALWAYS_FALSE for i in intervals[1:])


def test_negative_coefficient_and_equality():
    context, v = context_with(i=(0, 10), j=(0, 3))
    # 12 - 2*i - j >= 0 with j in [0, 2]: true for i <= 5, fuzzy at i = 6 (only j = 0), false from 7.
    intervals = decompose_range(v["i"], 0, 10, atoms_of(12 - 2 * v["i"] - v["j"] >= 0), context)
    assert describe(intervals) == [(0, 5, "always-true"), (6, 6, "fuzzy"), (7, 9, "always-false")]
    equality = decompose_range(v["i"], 0, 10, atoms_of(tirx.EQ(v["i"], tirx.const(3, "int32"))), context)
    assert [i.status for i in equality] == [Status.ALWAYS_FALSE, Status.ALWAYS_TRUE, Status.ALWAYS_FALSE]


@pytest.mark.parametrize("bound", [-3, 0, 1, 5, 11, 14])
def test_intervals_agree_with_enumeration(bound):
    """Each interval's status is exactly what enumerating the other variables says."""
    context, v = context_with(a=(0, 6), b=(0, 4), c=(1, 3))
    condition = v["a"] * 2 - v["b"] + 3 * v["c"] < bound
    atoms = atoms_of(condition)
    for interval in decompose_range(v["a"], 0, 6, atoms, context):
        for a in range(interval.lo, interval.hi):
            truths = {a * 2 - b + 3 * c < bound for b, c in itertools.product(range(0, 4), range(1, 3))}
            status = {frozenset({True}): Status.ALWAYS_TRUE, frozenset({False}): Status.ALWAYS_FALSE}.get(
                frozenset(truths), Status.FUZZY
            )
            assert status is interval.status, (bound, a, interval)


def test_opaque_atom_gives_no_split_point():
    context, v = context_with(i=(0, 8), j=(0, 8))
    (atom,) = atoms_of(v["i"] * v["j"] < 20)
    assert atom.linear is None
    assert describe(decompose_range(v["i"], 0, 8, [atom], context)) == [(0, 7, "fuzzy")]


# Symbolic ranges: split points and range intersection are expressions in ``n``; every claim is checked by
# evaluating it for many values of ``n`` (and of the other loop variables).


def evaluate(expr, values: dict) -> int:
    value = sym.Analyzer().simplify(substitute(expr, {k: tirx.const(v, "int32") for k, v in values.items()}))
    assert isinstance(value, tirx.IntImm), value
    return int(value.value)


def symbolic_context():
    n = tirx.Var("n", "int32")
    context = RangeContext()
    i_0, i_1 = tirx.Var("i_0", "int32"), tirx.Var("i_1", "int32")
    context.bind(i_0, tirx.const(0, "int32"), tirx.floordiv(n + 15, 16))
    context.bind(i_1, tirx.const(0, "int32"), tirx.const(16, "int32"))
    return context, n, i_0, i_1


def test_symbolic_decomposition_cuts_main_tiles_and_tail_for_every_n():
    context, n, i_0, i_1 = symbolic_context()
    atoms = atoms_of(i_0 * 16 + i_1 < n)
    intervals, unordered = decompose_symbolic_range(i_0, 0, tirx.floordiv(n + 15, 16), atoms, context, set())
    assert unordered is None
    assert [i.status for i in intervals] == [Status.ALWAYS_TRUE, Status.FUZZY]
    for value in range(-20, 70):
        main, tail = intervals
        lo, cut, hi = evaluate(main.lo, {n: value}), evaluate(main.hi, {n: value}), evaluate(tail.hi, {n: value})
        assert lo == 0 and evaluate(tail.lo, {n: value}) == cut
        assert cut == max(0, value // 16) and hi == (value + 15) // 16
        for tile in range(lo, cut):  # main tiles: the condition holds on every lane
            assert all(tile * 16 + lane < value for lane in range(16))


def test_range_intersection_gives_the_tail_extent_for_every_tile():
    context, n, i_0, i_1 = symbolic_context()
    new_lo, new_hi, used = intersect_range(i_1, 0, 16, atoms_of(i_0 * 16 + i_1 < n), {i_0}, context)
    assert len(used) == 1
    for value in range(-5, 70):
        for tile in range(max(0, (value + 15) // 16)):
            lanes = [lane for lane in range(16) if tile * 16 + lane < value]
            low, high = evaluate(new_lo, {n: value, i_0: tile}), evaluate(new_hi, {n: value, i_0: tile})
            assert list(range(low, high)) == lanes


def test_range_intersection_ignores_atoms_over_inner_loops():
    context, n, i_0, i_1 = symbolic_context()
    # Bounding i_0 by i_0 * 16 + i_1 < n would need i_1, a loop inside i_0: not usable through i_0.
    assert intersect_range(i_0, 0, 4, atoms_of(i_0 * 16 + i_1 < n), set(), context) is None


def test_proofs_do_not_assume_ranges_of_unrelated_loops():
    context, n, i_0, _ = symbolic_context()
    k = tirx.Var("k", "int32")
    context.bind(k, tirx.const(0, "int32"), n - 20)  # a sibling loop: non-empty only for n >= 21
    assert not context.prove(n >= 21)
    assert context.prove(tirx.Or(n >= 21, n < 21))


def test_proofs_assume_the_ranges_in_the_order_of_the_nest_whatever_the_variables_addresses():
    """The ranges a proof assumed were collected from sets of variables, so the analyzer was bound, and Z3's
    constraints conjoined, in the order of the variables' addresses; proofs that fall back to Z3 could then
    succeed or fail by that order, and the same program split differently in two processes (or for two parses of
    one source: tests/split/test_split_symbolic.py). They are now in the order the loops were bound."""
    for trial in range(40):
        context = RangeContext()
        n = tirx.Var("n", "int32")
        loops = [tirx.Var(f"i{k}_{trial}", "int32") for k in range(5)]
        for var in loops:
            context.bind(var, tirx.const(0, "int32"), n)
        expr = sum(loops[1:], loops[0]) < n * 5
        assert list(context._relevant_ranges(expr, None)) == loops
