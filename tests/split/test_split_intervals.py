"""The interval analysis alone: always-true / fuzzy / always-false intervals of one loop variable, with the
other variables over their bound ranges (pure functions, no IR rewriting)."""

import itertools

import pytest
from tvm import tirx

from tvm_tailsplit.split.conditions import atoms_of
from tvm_tailsplit.split.intervals import RangeContext, Status, decompose_range


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
