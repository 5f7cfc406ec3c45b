"""merge_equal_cases: the equal leaves of an if tree with disjoint path conditions become one ``if`` each (run on
llvm: same results as the tree), and a tree whose conditions may overlap is left as it is."""

import numpy as np
import tvm
import tvm_ffi
from tvm import tirx
from tvm.script import tirx as T

from tvm_tailsplit.split.merge_cases import merge_equal_cases
from tvm_tailsplit.testing import run_guarded


@T.prim_func
def three_cases(a: T.Buffer((12,), "float32"), c: T.Buffer((12,), "float32")):
    for i in range(12):
        if i < 4:
            c[i] = a[i] * T.float32(2)
        if i >= 4:
            if i < 8:
                c[i] = a[i] + T.float32(1)
            if i >= 8:
                c[i] = a[i] * T.float32(2)


@T.prim_func
def overlapping(a: T.Buffer((12,), "float32"), c: T.Buffer((12,), "float32")):
    for i in range(12):
        if i < 8:
            c[i] = a[i] * T.float32(2)
        if i >= 4:
            c[i] = a[i] * T.float32(2)


def ifs(func) -> int:
    found = []
    tvm_ffi.structural_walk(func.body, (tirx.IfThenElse, found.append))
    return len(found)


def results(func):
    executable = tvm.compile(tvm.IRModule({"main": func}), target="llvm")
    a = np.arange(12, dtype="float32")
    return run_guarded(executable, func, [a, np.zeros(12, "float32")], {})[-1]


def test_equal_leaves_merge_into_one_if_each():
    merged = merge_equal_cases(tvm.IRModule({"main": three_cases}))["main"]
    assert ifs(three_cases) == 4 and ifs(merged) == 2  # "* 2" under (i < 4 or i >= 8), "+ 1" under 4 <= i < 8
    np.testing.assert_array_equal(results(merged), results(three_cases))


def test_overlapping_conditions_are_kept():
    kept = merge_equal_cases(tvm.IRModule({"main": overlapping}))["main"]
    tvm.ir.assert_structural_equal(kept, overlapping)


@T.prim_func
def countdown(f: T.Buffer((4,), "int32")):
    for i in range(4):
        if f[i] > 0:
            f[i] = f[i] - 1
        if f[i] <= 0:
            f[i] = f[i] - 1


def test_conditions_reading_what_a_leaf_writes_are_kept():
    """The two conditions exclude each other when read at one instant, so the equal leaves were merged into
    ``if f[i] > 0 or f[i] <= 0: f[i] -= 1``; but the second condition is read after the first leaf ran, and at
    f[i] = 1 both leaves run (-1, not 0). Trees whose conditions read memory are now left as they are."""
    kept = merge_equal_cases(tvm.IRModule({"main": countdown}))["main"]
    tvm.ir.assert_structural_equal(kept, countdown)
    values = np.array([1, 0, 5, -2], "int32")
    for func in (countdown, kept):
        executable = tvm.compile(tvm.IRModule({"main": func}), target="llvm")
        np.testing.assert_array_equal(run_guarded(executable, func, [values], {})[0], [-1, -1, 4, -3])
