"""A TVM 0.27 miscompilation the TailSplit fuzzer found (no TailSplit involved), shown on its own.

TVM's llvm build of a buffer *load* whose index is a ``floormod`` (or ``floordiv``) of a numerator with a negative
coefficient drops the constant: ``C[p] = B[(2 - p) % 50]`` loads ``B[(-p) % 50]``. ``tvm.sym.Analyzer`` leaves the
expression as it is, so the error is in lowering or code generation. A split can expose or hide it (the load moves
out of, or into, a guard), so the fuzzer (``tests/split/fuzz_nests.py``) keeps the numerators of read indices
non-negative. This test asserts TVM's wrong answer: when it fails, TVM has fixed the bug; delete it and the
fuzzer's restriction."""

import numpy as np
import tvm
from tvm.script import tirx as T


@T.prim_func
def load_with_negative_coefficient(B: T.Buffer((50,), "float32"), C: T.Buffer((50,), "float32")):
    for p in range(5):
        C[p] = B[(2 - p) % 50]


def test_tvm_drops_the_constant_of_a_floormod_load_index():
    b = np.arange(50, dtype="float32")
    c = tvm.runtime.tensor(np.zeros(50, "float32"))
    tvm.compile(tvm.IRModule({"main": load_with_negative_coefficient}), target="llvm")["main"](
        tvm.runtime.tensor(b), c)
    right = np.array([b[(2 - p) % 50] for p in range(5)])  # [2, 1, 0, 49, 48]
    observed = c.numpy()[:5]
    assert not np.array_equal(observed, right)
    np.testing.assert_array_equal(observed, [b[(-p) % 50] for p in range(5)])  # TVM's answer: [0, 49, 48, 47, 46]


@T.prim_func
def store_with_two_offset_mods(B: T.Buffer((14,), "float32")):
    for t in range(4):
        B[(t + 1) % 2 * 7 + t % 2] = T.float32(100) + T.Cast("float32", t)


def test_tvm_merges_floormods_of_one_variable_with_different_offsets():
    """A second one (found by the WarpSpecialize hunt): TVM 0.27's iter-map analysis takes ``(t + 1) % 2`` and
    ``t % 2`` for one split of ``t``: ``iter_map_simplify`` rewrites ``(t + 1) % 2 * 7 + t % 2`` to
    ``(t + 1) % 2 * 8``, ``FlattenBuffer`` does so to store indices (ring indices such as ``R[(t + 1) % 2, t % 2]``
    land elsewhere), and ``detect_iter_map`` calls ``(t + 1) % 2 + t % 2`` (1 at both points of ``[0, 2)``)
    bijective; ``warpspec.codegen._one_to_one`` checks that answer. Asserts TVM's wrong answers: when this fails,
    TVM has fixed the bug."""
    import tvm.sym
    from tvm import tirx

    t = tirx.Var("t", "int32")
    index = tirx.floormod(t + 1, 2) * 7 + tirx.floormod(t, 2)
    (simplified,) = tvm.sym.iter_map_simplify([index], {t: tvm.ir.Range(0, 4)})
    assert str(simplified) == "(t + 1) % 2 * 8"
    one = tirx.floormod(t + 1, 2) + tirx.floormod(t, 2)
    assert len(tvm.sym.detect_iter_map([one], {t: tvm.ir.Range(0, 2)}, True, "bijective").indices) == 1
    b = tvm.runtime.tensor(np.zeros(14, "float32"))
    tvm.compile(tvm.IRModule({"main": store_with_two_offset_mods}), target="llvm")["main"](b)
    right = np.zeros(14, "float32")
    for step in range(4):
        right[(step + 1) % 2 * 7 + step % 2] = 100 + step
    assert not np.array_equal(b.numpy(), right)
    wrong = np.zeros(14, "float32")
    for step in range(4):
        wrong[(step + 1) % 2 * 8] = 100 + step
    np.testing.assert_array_equal(b.numpy(), wrong)
