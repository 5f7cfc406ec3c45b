"""`tvm_tailsplit.testing` on what its docstrings promise: random data and canaries for every buffer dtype a kernel
may have, bool included (its canary is a byte that is neither False nor True)."""

import numpy as np
import pytest
import tvm
from tvm.script import tirx as T

from tvm_tailsplit.testing import assert_same_results, guarded_array, guarded_device_tensor, random_like, run_guarded


@T.prim_func(s_tir=True)
def masked_copy(A: T.Buffer((8,), "float32"), M: T.Buffer((8,), "bool"), B: T.Buffer((8,), "float32"),
                N: T.Buffer((8,), "bool")):
    for i in range(8):
        with T.sblock("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = T.if_then_else(M[vi], A[vi], T.float32(0))
            N[vi] = not M[vi]


@T.prim_func(s_tir=True)
def bool_write_past_the_end(M: T.Buffer((8,), "bool"), N: T.Buffer((8,), "bool")):
    for i in range(8):
        with T.sblock("N"):
            vi = T.axis.spatial(8, i)
            N[vi + 1] = M[vi]


def test_assert_same_results_runs_kernels_with_bool_buffers():
    mod = tvm.IRModule({"main": masked_copy})
    assert_same_results(mod, mod)


@pytest.mark.parametrize("value", [False, True])
def test_a_bool_written_past_its_buffer_is_caught(value):
    executable = tvm.compile(tvm.IRModule({"main": bool_write_past_the_end}), target="llvm")
    with pytest.raises(AssertionError, match="out-of-bounds write after buffer N: 1 canary elements changed"):
        run_guarded(executable, bool_write_past_the_end, [np.full(8, value), np.zeros(8, bool)], {})


def test_bool_canaries_are_intact_after_allocation_and_random_bools_take_both_values():
    guarded_array((5,), "bool").check_canaries()
    guarded_device_tensor((5,), "bool", tvm.cpu()).numpy()
    data = random_like("bool", (64,), np.random.default_rng(0))
    assert data.dtype == bool and data.any() and not data.all()


@T.prim_func(s_tir=True)
def copy_past_the_end(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.sblock("B"):
            vi = T.axis.spatial(8, i)
            B[vi + 1] = A[vi]


@T.prim_func(s_tir=True)
def copy_shifted(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(7):
        with T.sblock("B"):
            vi = T.axis.spatial(7, i)
            B[vi + 1] = A[vi]


@pytest.mark.parametrize("wrong", ["before", "after"])
def test_assert_same_results_names_the_module_that_wrote_out_of_bounds(wrong):
    """The untransformed module writing past a buffer (TVM's LoopPartition with partition_const_loop miscompiles
    a T.likely guard so) was reported as 'out-of-bounds write after buffer B', read as the transformed module's
    fault; the error now names the module, 'before' or 'after'."""
    bad, good = tvm.IRModule({"main": copy_past_the_end}), tvm.IRModule({"main": copy_shifted})
    before, after = (bad, good) if wrong == "before" else (good, bad)
    message = rf"module '{wrong}' \(function main\): out-of-bounds write after buffer B"
    with pytest.raises(AssertionError, match=message):
        assert_same_results(before, after)


@T.prim_func(s_tir=True)
def scaled_copy(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32"), n: T.int32, m: T.int32):
    for i in range(8):
        with T.sblock("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] * T.Cast("float32", n + m)


def test_a_scalar_parameter_without_a_value_is_named():
    """assert_same_results / run_guarded without a value for a scalar parameter raised a bare KeyError: 'm'."""
    mod = tvm.IRModule({"main": scaled_copy})
    assert_same_results(mod, mod, {"n": 1, "m": 2})
    with pytest.raises(ValueError, match=r"scalar_args gives no value for the scalar parameter 'm' of function main "
                                         r"\(it gives \['n'\]\)"):
        assert_same_results(mod, mod, {"n": 1})
