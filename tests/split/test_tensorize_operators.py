"""TailSplit + ``tensorize_marked`` on operators users run on CPUs, beyond the project's workloads: a dense layer
with a bias epilogue fused under its tiles (two marks in one function), ragged shapes; every mark's record, the
IR's well-formedness, and numpy on canary-guarded buffers."""

import numpy as np
import pytest
import tvm
from tvm import s_tir, te, tirx

from tvm_tailsplit import MARK_KEY, TailSplit, tensorize_marked
from tvm_tailsplit.split import intrinsics as intr
from tvm_tailsplit.testing import random_like, run_guarded

TARGET = intr.llvm_target()


def dense_bias(m, n, k):
    """``D = A @ W + bias``: the matmul in 8 x 16 tiles of the any-depth kernel, the bias add computed per tile
    (``reverse_compute_at`` the column tile), its 16 columns marked for the 16-lane add."""
    a, w = te.placeholder((m, k), "float32", name="A"), te.placeholder((k, n), "float32", name="W")
    bias = te.placeholder((n,), "float32", name="bias")
    r = te.reduce_axis((0, k), "r")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * w[r, j], axis=r), name="C")
    d = te.compute((m, n), lambda i, j: c[i, j] + bias[j], name="D")
    sch = s_tir.Schedule(te.create_prim_func([a, w, bias, d]).with_attr("global_symbol", "main"))
    block = sch.get_sblock("C")
    i, j, r_loop = sch.get_loops(block)
    i_0, i_1 = sch.split(i, [None, 8])
    j_0, j_1 = sch.split(j, [None, 16])
    sch.reorder(i_0, j_0, i_1, j_1, r_loop)
    sch.annotate(i_1, MARK_KEY, intr.MATMUL_8x16_ANY_DEPTH)
    epilogue = sch.get_sblock("D")
    sch.reverse_compute_at(epilogue, j_0)
    sch.annotate(sch.get_loops(epilogue)[-1], MARK_KEY, intr.ADD_16)
    return sch.mod


@pytest.mark.parametrize("shape", [(13, 40, 21), (9, 37, 5)], ids=lambda s: "x".join(map(str, s)))
def test_a_variable_length_matmul_tail_leaves_the_function_well_formed(shape):
    """The matmul's row tail (the variable-length form) comes before the next tile's bias add, a main tile that
    ``sch.tensorize`` takes: the tail's loops must each define their own variable, or the schedule of the next
    mark refuses the ill-formed function."""
    m, n, k = shape
    records = []
    out = tensorize_marked(TailSplit()(dense_bias(m, n, k)), report=records)
    s_tir.analysis.verify_well_formed(out["main"])
    assert [r.action for r in records if r.block.startswith("D")].count("tensorized") >= 1, [str(r) for r in records]
    assert not any("ill-formed" in r.reason for r in records), [str(r) for r in records]
    executable = tvm.compile(out, target=TARGET)
    rng = np.random.default_rng(0)
    a, w, bias = (random_like("float32", s, rng) for s in ((m, k), (k, n), (n,)))
    got = run_guarded(executable, out["main"], [a, w, bias, np.zeros((m, n), np.float32)], {})[3]
    np.testing.assert_allclose(got, a @ w + bias, rtol=1e-5, atol=1e-5)


def two_matmuls(k):
    """``C = A @ W`` and ``C2 = A @ W2`` in one function, ``M`` symbolic: each in 8 x 16 tiles of the any-depth
    kernel, whose main tiles (under the symbolic split) are matched and instantiated, one site each."""
    m = tirx.Var("m", "int32")
    a = te.placeholder((m, k), "float32", name="A")
    weights = [te.placeholder((k, 32), "float32", name=name) for name in ("W", "W2")]

    def product(w, index):
        r = te.reduce_axis((0, k), f"r{index}")
        return te.compute((m, 32), lambda i, j: te.sum(a[i, r] * w[r, j], axis=r), name=f"C{index}")

    outputs = [product(w, index) for index, w in enumerate(weights)]
    sch = s_tir.Schedule(te.create_prim_func([a, *weights, *outputs]).with_attr("global_symbol", "main"))
    for index in range(2):
        block = sch.get_sblock(f"C{index}")
        i, j, r_loop = sch.get_loops(block)
        i_0, i_1 = sch.split(i, [None, 8])
        j_0, j_1 = sch.split(j, [None, 16])
        sch.reorder(i_0, j_0, i_1, j_1, r_loop)
        sch.annotate(i_1, MARK_KEY, intr.MATMUL_8x16_ANY_DEPTH)
    return sch.mod


def test_an_implementation_instantiated_twice_defines_its_variables_once_each():
    """Each instantiation renews the implementation's definitions (its accumulator buffer, its loops): the same
    ``acc`` at two sites made the function ill-formed."""
    k = 9
    records = []
    out = tensorize_marked(TailSplit()(two_matmuls(k)), report=records)
    assert [r.action for r in records].count("instantiated") == 2, [str(r) for r in records]
    s_tir.analysis.verify_well_formed(out["main"])
    executable = tvm.compile(out, target=TARGET)
    rng = np.random.default_rng(0)
    for m in (0, 5, 8, 21):
        a, w, w2 = (random_like("float32", s, rng) for s in ((m, k), (k, 32), (k, 32)))
        zeros = np.zeros((m, 32), np.float32)
        got = run_guarded(executable, out["main"], [a, w, w2, zeros, zeros], {"m": m})
        np.testing.assert_allclose(got[3], a @ w, rtol=1e-5, atol=1e-5, err_msg=f"m = {m}")
        np.testing.assert_allclose(got[4], a @ w2, rtol=1e-5, atol=1e-5, err_msg=f"m = {m}")
