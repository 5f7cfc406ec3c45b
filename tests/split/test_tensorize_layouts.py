"""``tensorize_marked`` on operands whose layout the intrinsic's implementation does not assume: an implementation
buffer declared without strides is a compact tile (TVM's ``LowerMatchBuffer`` binds no strides for it and checks
none), so a region that is not contiguous in memory must stay as code, with the reason in the report; results
equal numpy with canaries around every buffer."""

import numpy as np
import pytest
import tvm
from tvm import s_tir, te, tirx

from tvm_tailsplit import MARK_KEY, TailSplit, tensorize_marked
from tvm_tailsplit.split import intrinsics as intr
from tvm_tailsplit.testing import run_guarded

TARGET = intr.llvm_target()


def dense_int8_unpacked(m, n, k):
    """``C[i, j] = sum_r A[i, r] * W[j, r]`` with ``W`` unpacked ``[N, K]`` (a dense layer's weight as stored),
    tiled for ``dot_16x4`` (16 outputs x 4 reduction steps) and marked: the 16 x 4 tile of ``W`` is rows ``K``
    apart, not the 64 contiguous bytes ``vpdpbusd`` reads. ``n=None``: ``N`` symbolic."""
    rows = tirx.Var("n", "int32") if n is None else n
    a = te.placeholder((m, k), "uint8", name="A")
    w = te.placeholder((rows, k), "int8", name="W")
    r = te.reduce_axis((0, k), "r")
    c = te.compute((m, rows), lambda i, j: te.sum(a[i, r].astype("int32") * w[j, r].astype("int32"), axis=r),
                   name="C")
    sch = s_tir.Schedule(te.create_prim_func([a, w, c]).with_attr("global_symbol", "main"))
    block = sch.get_sblock("C")
    i, j, r_loop = sch.get_loops(block)
    j_0, j_1 = sch.split(j, [None, 16])
    r_0, r_1 = sch.split(r_loop, [None, 4])
    sch.reorder(j_0, r_0, i, j_1, r_1)
    sch.decompose_reduction(block, r_0)
    sch.annotate(j_1, MARK_KEY, intr.VNNI_DOT_16x4_LLVM22)
    return sch.mod


@pytest.mark.parametrize("n", [32, 20, None], ids=["main-tiles", "with-tails", "symbolic-n"])
def test_a_weight_tile_that_is_not_contiguous_is_not_tensorized(n):
    m, k = 3, 10
    records = []
    out = tensorize_marked(TailSplit()(dense_int8_unpacked(m, n, k)), report=records)
    assert all(r.action == "left" for r in records), [str(r) for r in records]
    assert any("buffer W" in r.reason and "not contiguous" in r.reason for r in records), [str(r) for r in records]
    executable = tvm.compile(out, target=TARGET)
    rng = np.random.default_rng(0)
    for value in ([n] if n is not None else [1, 16, 20, 37]):
        a = rng.integers(0, 256, (m, k)).astype("uint8")
        w = rng.integers(-100, 100, (value, k)).astype("int8")
        got = run_guarded(executable, out["main"], [a, w, np.zeros((m, value), np.int32)], {"n": value})[2]
        np.testing.assert_array_equal(got, a.astype(np.int32) @ w.astype(np.int32).T, err_msg=f"n = {value}")
