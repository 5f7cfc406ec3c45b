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
