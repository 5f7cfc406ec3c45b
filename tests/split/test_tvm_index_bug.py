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
