"""``tensorize_marked`` on operands whose layout the intrinsic's implementation does not assume: an implementation
buffer declared without strides is a compact tile (TVM's ``LowerMatchBuffer`` binds no strides for it and checks
none), so a region that is not contiguous in memory must stay as code, with the reason in the report; results
equal numpy with canaries around every buffer."""

import numpy as np
import pytest
import tvm
from tvm import s_tir, te, tirx
from tvm.script import tirx as T

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
    return marked_for_dot_16x4(te.create_prim_func([a, w, c]).with_attr("global_symbol", "main"))


def marked_for_dot_16x4(func) -> tvm.IRModule:
    """A dense layer's block ``C`` tiled for the one-instruction ``dot_16x4`` (``VNNI_DOT_16x4_LLVM22``): loops
    ``j_0, r_0, i, j_1, r_1``, the init split out, the mark on the 16-output loop ``j_1``."""
    sch = s_tir.Schedule(func)
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


@T.prim_func(s_tir=True)
def rows_of_a_strided_view(A: T.Buffer((4, 48), "float32"), B: T.Buffer((4, 37), "float32"),
                           C: T.Buffer((4, 37), "float32")):
    with T.sblock("root"):
        view = T.match_buffer(A[0:4, 0:37], (4, 37), "float32", strides=[48, 1])  # rows 48 floats apart
        for i, j_0 in T.grid(4, 3):
            for j_1 in T.serial(16, annotations={"pragma_emit_insn": intr.MUL_16}):
                with T.sblock("C"):
                    vi = T.axis.spatial(4, i)
                    vj = T.axis.spatial(37, j_0 * 16 + j_1)
                    T.where(j_0 * 16 + j_1 < 37)
                    C[vi, vj] = view[vi, vj] * B[vi, vj]


@T.prim_func(s_tir=True)
def every_other_element(A: T.Buffer((32,), "float32"), B: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    view = T.decl_buffer((16,), "float32", data=A.data, strides=[2])  # A[0], A[2], ..., A[30]
    for i in T.serial(16, annotations={"pragma_emit_insn": intr.MUL_16}):
        with T.sblock("C"):
            vi = T.axis.spatial(16, i)
            C[vi] = view[vi] * B[vi]


def test_a_row_of_a_strided_buffer_is_contiguous():
    """A 16-float piece of one row of a buffer with strides ``[48, 1]`` is 16 contiguous floats, but every region
    of a buffer that declares strides was taken as not contiguous: the main tiles stayed scalar code ('the region
    (1, 16) is not contiguous in memory') while the tails got the masked vector form. Contiguity is now read from
    the strides; every other element of a buffer (stride 2) still stays as code."""
    records = []
    out = tensorize_marked(TailSplit()(tvm.IRModule({"main": rows_of_a_strided_view})), report=records)
    assert [r.action for r in records] == ["tensorized", "variable_length"], [str(r) for r in records]
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(-1, 1, shape).astype("float32") for shape in ((4, 48), (4, 37)))
    got = run_guarded(tvm.compile(out, target=TARGET), out["main"], [a, b, np.zeros((4, 37), "float32")], {})[2]
    np.testing.assert_array_equal(got, a[:, :37] * b)

    records = []
    out = tensorize_marked(tvm.IRModule({"main": every_other_element}), report=records)
    assert [r.action for r in records] == ["left"] and "not contiguous" in records[0].reason, records[0].reason
    a, b = (rng.uniform(-1, 1, shape).astype("float32") for shape in ((32,), (16,)))
    got = run_guarded(tvm.compile(out, target=TARGET), out["main"], [a, b, np.zeros(16, "float32")], {})[2]
    np.testing.assert_array_equal(got, a[::2] * b)
