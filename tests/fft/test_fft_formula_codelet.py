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


# long double is wider than float64 on x86 (64 significant bits) and aarch64 Linux (113); elsewhere it is float64
_WIDE_LONG_DOUBLE = np.finfo(np.longdouble).nmant > np.finfo(np.float64).nmant


@pytest.mark.skipif(not _WIDE_LONG_DOUBLE, reason="no long double wider than float64 to check the rounding against")
@pytest.mark.parametrize("n", [12, 97, 1000, 2187, 3072])
def test_unit_root_is_correctly_rounded(n):
    """Every twiddle within half a unit of 2^-53 (plus the reference's own rounding) of the exact root, on both
    signs and for exponents beyond n: a float64 half-turn reduction erred by up to ~5 units at these sizes."""
    pi = np.longdouble("3.14159265358979323846264338327950288")
    exponents = np.arange(-3, 2 * n)
    angle = 2 * pi * exponents.astype(np.longdouble) / n
    for sign in (-1, 1):
        roots = np.array([unit_root(int(t), n, sign) for t in exponents], np.longdouble)
        error = np.maximum(abs(roots[:, 0] - np.cos(angle)), abs(roots[:, 1] - sign * np.sin(angle)))
        assert float(error.max()) * 2**53 <= 0.51, (n, sign, float(error.max()) * 2**53)


@pytest.mark.skipif(not _WIDE_LONG_DOUBLE, reason="no long double wider than float64 for the reference transform")
@pytest.mark.parametrize("n", [243, 2187])
def test_complex128_powers_of_three_are_as_accurate_as_the_twiddles_allow(n):
    """The float64 transform of 3^k points within 1.6 eps (relative L2) of the exact one (scipy in long double):
    with twiddles off by up to ~5 units it erred by 2.1-2.6 eps, twice numpy's."""
    scipy_fft = pytest.importorskip("scipy.fft")
    from tvm_tailsplit import fft

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, n)) + 1j * rng.standard_normal((2, n))
    exact = x.astype(np.clongdouble)
    for ours, reference in ((fft.fft(x), scipy_fft.fft(exact)), (fft.ifft(x), scipy_fft.ifft(exact))):
        error = np.linalg.norm(ours - reference) / np.linalg.norm(reference)
        assert float(error) / np.finfo(np.float64).eps <= 1.6, float(error) / np.finfo(np.float64).eps


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
    # exact roots (cos(π/3) = 0.5, not 0.5000000000000001) keep the symmetries of sizes with a factor of 3 or 5
    # visible: DFT_6 and DFT_10 multiply 8 and 32 times (12 and 48 with the float64 half-turn roots)
    assert derive_codelet(6, -1).operation_counts()["mul"] == 8
    assert derive_codelet(10, 1).operation_counts()["mul"] == 32
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
