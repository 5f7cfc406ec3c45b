"""Real transforms (r2c / c2r) with numpy's rfft / irfft semantics."""

import numpy as np
import pytest

from tvm_tailsplit import fft as tfft

from .fft_reference import random_complex, random_real, relative_error, tolerance

REAL_SIZES = list(range(1, 21)) + [31, 32, 33, 64, 83, 97, 100, 1000, 1024, 4096]


@pytest.mark.parametrize("n", REAL_SIZES)
def test_rfft(n):
    x = random_real((3, n), "float32", seed=n)
    result = tfft.rfft(x)
    reference = np.fft.rfft(x.astype(np.float64))
    assert result.dtype == np.complex64 and result.shape == reference.shape
    assert relative_error(result, reference) <= tolerance(n, "complex64")


@pytest.mark.parametrize("n", REAL_SIZES)
def test_irfft(n):
    spectrum = random_complex((3, n // 2 + 1), "complex64", seed=n)
    result = tfft.irfft(spectrum, n=n)
    reference = np.fft.irfft(spectrum.astype(np.complex128), n=n)
    assert result.dtype == np.float32 and result.shape == reference.shape
    assert relative_error(result, reference) <= tolerance(n, "complex64")


@pytest.mark.parametrize("n", [1, 2, 9, 16, 97, 1000])
def test_real_complex128(n):
    x = random_real((2, n), "float64", seed=n)
    assert relative_error(tfft.rfft(x), np.fft.rfft(x)) <= tolerance(n, "complex128")
    spectrum = np.fft.rfft(x)
    assert relative_error(tfft.irfft(spectrum, n=n), x) <= 2 * tolerance(n, "complex128")


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize("n", [12, 15])
def test_real_norms(n, norm):
    x = random_real((2, n), "float64", seed=1)
    assert relative_error(tfft.rfft(x, norm=norm), np.fft.rfft(x, norm=norm)) <= 1e-14
    spectrum = np.fft.rfft(x, norm=norm)
    assert relative_error(tfft.irfft(spectrum, n=n, norm=norm), np.fft.irfft(spectrum, n=n, norm=norm)) <= 1e-14


def test_irfft_ignores_imaginary_parts_of_dc_and_nyquist_like_numpy():
    spectrum = random_complex((1, 9), "complex128", seed=2)  # n = 16: X[0] and X[8] have imaginary parts
    np.testing.assert_allclose(tfft.irfft(spectrum), np.fft.irfft(spectrum), atol=1e-15)


def test_irfft_default_n_and_axis():
    spectrum = random_complex((5, 7, 4), "complex128", seed=3)
    for axis in (0, 1, 2):
        result = tfft.irfft(spectrum, axis=axis)
        reference = np.fft.irfft(spectrum, axis=axis)
        assert result.shape == reference.shape
        assert relative_error(result, reference) <= 1e-14


def test_rfft_strided_and_axis():
    x = random_real((8, 30), "float32", seed=4)
    for view, axis in ((x[:, ::2], -1), (x, 0), (x[::2], 1)):
        result = tfft.rfft(view, axis=axis)
        reference = np.fft.rfft(view.astype(np.float64), axis=axis)
        assert relative_error(result, reference) <= tolerance(view.shape[axis], "complex64")


@pytest.mark.parametrize("n", [10, 64, 97])
def test_real_round_trip(n):
    x = random_real((4, n), "float32", seed=5)
    assert relative_error(tfft.irfft(tfft.rfft(x), n=n), x) <= 2 * tolerance(n, "complex64")


def test_real_plan_layout_and_errors():
    plan = tfft.plan(16, 2, kind="r2c")
    assert plan.input_shape == (2, 16) and plan.output_shape == (2, 9, 2)
    inverse = tfft.plan(16, 2, kind="c2r", direction="backward")
    assert inverse.input_shape == (2, 9, 2) and inverse.output_shape == (2, 16)
    with pytest.raises(ValueError, match="x must be float32"):
        plan(np.zeros((2, 16), np.float64))
    with pytest.raises(TypeError, match="x must be real"):
        tfft.rfft(np.zeros(4, np.complex64))
    with pytest.raises(ValueError, match="istride must be 1 for an r2c plan of even n"):
        tfft.plan(16, 2, kind="r2c", istride=2)
