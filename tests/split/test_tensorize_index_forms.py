"""``tensorize_marked`` on the index forms a user's element-wise block may have under a 16-lane mark (found by a
throwaway fuzzer of TailSplit + tensorize_marked): shifted and symbolic starts, an in-place store, one buffer for
both operands, swapped operands and a tile-periodic index are mapped (main tiles by the intrinsic, the symbolic
tail by the masked variable-length form); reversed, strided, halved and broadcast indices and another operation
are left as code. Every form computes what the untransformed function computes, with canaries around every
buffer, for a symbolic length ``n`` (empty, shorter than a tile, whole tiles, a tail) and store offset ``m``."""

import numpy as np
import pytest
import tvm
from tvm import s_tir

from tvm_tailsplit import MARK_KEY, TailSplit, tensorize_marked
from tvm_tailsplit.ir_utils import EMIT_INSN_PRAGMA, drop_loop_annotation
from tvm_tailsplit.split import intrinsics as intr
from tvm_tailsplit.testing import random_like, run_guarded

TARGET = intr.llvm_target()
MAPPED = {"tensorized", "instantiated", "variable_length"}

# (store, value): vi is the block's iterator over range(n)
ACCEPTED = [
    ("C[vi]", "A[vi + 3] * B[vi]"),
    ("C[vi + m]", "A[vi] * B[vi]"),
    ("A[vi]", "A[vi] * B[vi]"),
    ("C[vi]", "A[vi] * A[vi]"),
    ("C[vi]", "B[vi] * A[vi]"),
    ("C[vi]", "A[vi % 16] * B[vi]"),
]
REFUSED = [
    ("C[vi]", "A[40 - vi] * B[vi]"),
    ("C[vi]", "A[vi * 2] * B[vi]"),
    ("C[vi]", "A[vi // 2] * B[vi]"),
    ("C[vi]", "A[0] * B[vi]"),
    ("C[vi]", "A[vi] + B[vi]"),
]


def marked(store: str, value: str) -> tvm.IRModule:
    """``store = value`` over ``range(n)`` (A holds 128 elements, B and C 64), split by 16, the lanes marked
    ``MUL_16``."""
    source = f"""
@T.prim_func(s_tir=True)
def main(A: T.Buffer((128,), "float32"), B: T.Buffer((64,), "float32"), C: T.Buffer((64,), "float32"),
         n: T.int32, m: T.int32):
    T.func_attr({{"tirx.noalias": True}})
    for i in range(n):
        with T.sblock("C"):
            vi = T.axis.spatial(n, i)
            {store} = {value}
"""
    func = tvm.script.from_source("# from tvm.script import tirx as T\n" + source)
    sch = s_tir.Schedule(tvm.IRModule({"main": func}))
    (loop,) = sch.get_loops(sch.get_sblock("C"))
    _, lanes = sch.split(loop, [None, 16])
    sch.annotate(lanes, MARK_KEY, intr.MUL_16)
    return sch.mod


@pytest.mark.parametrize(("store", "value", "mapped"), [(*form, True) for form in ACCEPTED] +
                         [(*form, False) for form in REFUSED], ids=lambda x: str(x))
def test_index_forms_under_a_vector_mark(store, value, mapped):
    intr.register_intrinsics()
    mod = marked(store, value)
    records: list = []
    after = tensorize_marked(TailSplit()(mod), report=records)
    actions = {record.action for record in records}
    if mapped:
        assert "left" not in actions and actions & {"tensorized", "instantiated"} and "variable_length" in actions, \
            [str(r) for r in records]
    else:
        assert actions == {"left"}, [str(r) for r in records]
    reference = tvm.compile(drop_loop_annotation(mod, EMIT_INSN_PRAGMA), target=TARGET)
    executable = tvm.compile(after, target=TARGET)
    rng = np.random.default_rng(0)
    for n in (0, 5, 16, 37, 40):
        for m in (0, 7):
            inputs = [random_like("float32", tuple(int(d) for d in p.shape), rng)
                      for p in mod["main"].params if not isinstance(p.ty, tvm.ir.PrimType)]
            want = run_guarded(reference, mod["main"], inputs, {"n": n, "m": m})
            got = run_guarded(executable, after["main"], inputs, {"n": n, "m": m})
            for name, expected, actual in zip("ABC", want, got, strict=True):
                np.testing.assert_array_equal(actual, expected, err_msg=f"buffer {name}, n={n}, m={m}")
