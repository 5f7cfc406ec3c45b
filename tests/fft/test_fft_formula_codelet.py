"""Formula trees and derived codelets checked against the dense DFT matrix."""

import numpy as np
import pytest
from tvm import tirx

from tvm_tailsplit.fft.codelet import derive_codelet
from tvm_tailsplit.fft.factor import breakdown
from tvm_tailsplit.fft.formula import (
    DFT,
    StridePermutation,
    Twiddle,
    cooley_tukey,
    dft_matrix,
    formula_of,
    unit_root,
)


def test_dft_matrix_matches_numpy():
    for n in (1, 2, 5, 8, 12):
        np.testing.assert_allclose(dft_matrix(n, -1), np.fft.fft(np.eye(n), axis=0), atol=1e-15)
        np.testing.assert_allclose(dft_matrix(n, 1), n * np.fft.ifft(np.eye(n), axis=0), atol=1e-14)


def test_unit_root_is_exact_on_octants():
    assert unit_root(1, 8, -1) == (np.sqrt(0.5), -np.sqrt(0.5))
    assert unit_root(2, 8, -1) == (0.0, -1.0)
    assert unit_root(3, 4, 1) == (0.0, -1.0)


def test_cooley_tukey_prints_as_a_formula():
    formula = cooley_tukey(DFT(4), DFT(8))
    assert str(formula) == "(DFT_4 ⊗ I_8) · T^32_8 · (I_4 ⊗ DFT_8) · L^32_4"
    nested = formula_of(breakdown(96, 8))
    assert str(nested) == ("(DFT_4 ⊗ I_24) · T^96_24 · (I_4 ⊗ ((DFT_4 ⊗ I_6) · T^24_6 · (I_4 ⊗ DFT_6) · L^24_4))"
                           " · L^96_4")


@pytest.mark.parametrize("n", [4, 6, 12, 16, 30, 64, 96, 100, 128])
@pytest.mark.parametrize("limit", [4, 8])
@pytest.mark.parametrize("sign", [-1, 1])
def test_formula_of_breakdown_equals_dense_dft(n, limit, sign):
    formula = formula_of(breakdown(n, limit, limit))
    np.testing.assert_allclose(formula.dense(sign), dft_matrix(n, sign), atol=1e-13)


def test_leaf_matrices():
    np.testing.assert_array_equal(StridePermutation(6, 2).dense(-1) @ np.arange(6), [0, 2, 4, 1, 3, 5])
    np.testing.assert_allclose(np.diag(Twiddle(4, 2).dense(-1)), [1, 1, 1, -1j], atol=1e-15)


@pytest.mark.parametrize("n", range(1, 33))
@pytest.mark.parametrize("sign", [-1, 1])
def test_codelet_equals_dense_dft(n, sign):
    codelet = derive_codelet(n, sign)
    matrix = codelet.evaluate(np.eye(n, dtype=np.complex128)).T
    np.testing.assert_allclose(matrix, dft_matrix(n, sign), rtol=0, atol=2e-15 * n)


def test_simplification_removes_trivial_multiplications():
    assert derive_codelet(2, -1).operation_counts() == {"add": 4, "mul": 0, "neg": 0}
    assert derive_codelet(4, -1).operation_counts() == {"add": 16, "mul": 0, "neg": 0}
    # DFT_8: only the (1 ± i)/√2 twiddles multiply, two real multiplications each
    assert derive_codelet(8, 1).operation_counts()["mul"] == 4
    # the conjugate symmetry of a prime's matrix halves the multiplications: (p-1)² real ones
    assert derive_codelet(5, -1).operation_counts()["mul"] == 16
    # far below the 8·n² real operations of a dense complex matrix-vector product
    assert derive_codelet(32, -1).flops() < 8 * 32 * 32 / 2


def test_codelet_emits_tir_with_bound_temporaries():
    codelet = derive_codelet(4, -1)
    inputs = [(tirx.Var(f"r{j}", "float32"), tirx.Var(f"i{j}", "float32")) for j in range(4)]
    bound = []

    def bind(expr):
        var = tirx.Var(f"t{len(bound)}", "float32")
        bound.append((var, expr))
        return var

    outputs = codelet.emit(inputs, "float32", bind)
    assert len(outputs) == 4 and len(bound) > 0
    assert "x0.re" in codelet.to_text() and "y3" in codelet.to_text()
