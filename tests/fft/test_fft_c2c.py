"""Complex transforms on llvm against numpy.fft in float64, with the issue's error bounds."""

import numpy as np
import pytest

from tvm_tailsplit import fft as tfft
from tvm_tailsplit.testing import guarded_array

from .fft_reference import random_complex, relative_error, tolerance

POWERS_OF_TWO = [2**k for k in range(7, 17)]
MIXED_RADIX = [360, 1000, 2**12 * 3]
PRIMES = [257, 1009]


def check_forward(n: int, batch: int, dtype: str = "complex64", direction: str = "forward",
                  norm: str = "backward") -> None:
    plan = tfft.plan(n, batch, direction=direction, norm=norm, dtype=dtype)
    x = random_complex((batch, n), dtype, seed=n)
    result = plan(x)
    reference_fn = np.fft.fft if direction == "forward" else np.fft.ifft
    reference = reference_fn(x.astype(np.complex128), axis=-1, norm=norm)
    assert result.dtype == np.dtype(dtype) and result.shape == (batch, n)
    error = relative_error(result, reference)
    assert error <= tolerance(n, dtype), f"n={n} batch={batch} {dtype}: relative error {error:.3g}"


@pytest.mark.parametrize("n", range(1, 129))
def test_every_size_up_to_128(n):
    check_forward(n, batch=3)


@pytest.mark.parametrize("n", POWERS_OF_TWO + MIXED_RADIX + PRIMES)
def test_large_sizes(n):
    check_forward(n, batch=1 if n > 4096 else 2)


@pytest.mark.parametrize("batch", [1, 7, 17])
@pytest.mark.parametrize("n", [16, 60, 97])
def test_batch_with_tails(batch, n):
    check_forward(n, batch)


@pytest.mark.parametrize("n", [1, 2, 7, 16, 31, 32, 33, 64, 83, 97, 100, 1009, 4096, 16384])
def test_complex128(n):
    check_forward(n, batch=3, dtype="complex128")


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_norms_and_directions(direction, norm):
    check_forward(12, batch=2, direction=direction, norm=norm)


@pytest.mark.parametrize("n", [97, 83])
def test_backward_rader_and_bluestein(n):
    # the convolution algorithms run their inner transforms in both directions whatever the outer one is
    check_forward(n, batch=2, direction="backward", norm="ortho")


def test_codelets_are_checked_against_dense_matrix_through_the_operator():
    # the operator applied to the identity batch gives the DFT matrix (columns of the transform)
    n = 24
    result = tfft.plan(n, n, dtype="complex128")(np.eye(n, dtype=np.complex128))
    np.testing.assert_allclose(result, np.fft.fft(np.eye(n), axis=-1), atol=1e-14)


def test_strided_views_without_copy():
    base = random_complex((20, 64), "complex64", seed=1)
    view = base[::2, ::2]  # batch stride 128 elements, element stride 2
    plan = tfft.plan(32, 10, istride=2, idist=128)
    result = plan(view)
    assert relative_error(result, np.fft.fft(view.astype(np.complex128))) <= tolerance(32, "complex64")
    with pytest.raises(ValueError, match="strides"):
        tfft.plan(32, 10)(view)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_numpy_like_axis(axis):
    x = random_complex((6, 40, 10), "complex64", seed=2)
    result = tfft.fft(x, axis=axis)
    reference = np.fft.fft(x.astype(np.complex128), axis=axis)
    assert result.shape == reference.shape
    assert relative_error(result, reference) <= tolerance(x.shape[axis], "complex64")


def test_numpy_like_n_crops_and_pads():
    x = random_complex((3, 20), "complex128", seed=3)
    for n in (12, 20, 33):
        assert relative_error(tfft.fft(x, n=n), np.fft.fft(x, n=n)) <= tolerance(n, "complex128")
        assert relative_error(tfft.ifft(x, n=n, norm="ortho"), np.fft.ifft(x, n=n, norm="ortho")) <= 1e-14


@pytest.mark.parametrize("n", [16, 97])
def test_in_place(n):
    plan = tfft.plan(n, 5)
    x = random_complex((5, n), "complex64", seed=4)
    reference = np.fft.fft(x.astype(np.complex128))
    result = plan(x, out=x)
    assert result is x
    assert relative_error(x, reference) <= tolerance(n, "complex64")


def test_no_writes_outside_the_output():
    plan = tfft.plan(100, 7)
    x = random_complex((7, 100), "complex64", seed=5)
    guarded = guarded_array((7, 100, 2), "float32")
    plan(x, out=guarded.array)
    guarded.check_canaries("fft output")
    assert relative_error(guarded.array.view(np.complex64)[..., 0], np.fft.fft(x.astype(np.complex128))) < 2e-7


@pytest.mark.parametrize("n", [64, 97, 1000])
def test_round_trip_and_parseval(n):
    x = random_complex((4, n), "complex128", seed=6)
    spectrum = tfft.fft(x)
    assert relative_error(tfft.ifft(spectrum), x) <= 2 * tolerance(n, "complex128")
    energy_time = np.sum(np.abs(x) ** 2, axis=-1)
    energy_frequency = np.sum(np.abs(spectrum) ** 2, axis=-1) / n
    np.testing.assert_allclose(energy_frequency, energy_time, rtol=1e-13)


def test_float_input_with_trailing_two():
    plan = tfft.plan(8, 2)
    x = random_complex((2, 8), "complex64", seed=7)
    floats = np.ascontiguousarray(x).view(np.float32).reshape(2, 8, 2)
    result = plan(floats)
    assert relative_error(result, np.fft.fft(x.astype(np.complex128))) < 2e-7


def test_bad_input_raises_clear_errors():
    with pytest.raises(ValueError, match="n must be at least 1"):
        tfft.plan(0)
    with pytest.raises(ValueError, match="batch must be at least 1"):
        tfft.plan(8, 0)
    with pytest.raises(ValueError, match="dtype must be one of"):
        tfft.plan(8, dtype="float16")
    with pytest.raises(ValueError, match="norm must be one of"):
        tfft.plan(8, norm="unitary")
    with pytest.raises(ValueError, match="kind must be one of"):
        tfft.plan(8, kind="r2r")
    with pytest.raises(ValueError, match="direction must be 'forward' for kind='r2c'"):
        tfft.plan(8, kind="r2c", direction="backward")
    plan = tfft.plan(8, 2)
    with pytest.raises(ValueError, match="x must be complex64"):
        plan(np.zeros((2, 8), np.complex128))
    with pytest.raises(ValueError, match=r"x has shape \(3, 8\) of complex64, the plan expects \(2, 8\) of complex64"):
        plan(np.zeros((3, 8), np.complex64))
    with pytest.raises(ValueError, match="n must be at least 1"):
        tfft.fft(np.zeros(4), n=0)
    with pytest.raises(ValueError, match="axis 2 is out of bounds"):
        tfft.fft(np.zeros((4, 4)), axis=2)


def test_strided_output_layout():
    plan = tfft.plan(16, 3, ostride=2, odist=40)
    x = random_complex((3, 16), "complex64", seed=8)
    result = plan(x)
    assert result.shape == (3, 16) and result.strides == (40 * 8, 2 * 8)
    assert relative_error(result, np.fft.fft(x.astype(np.complex128))) <= tolerance(16, "complex64")


def test_tvm_tensors_in_and_out():
    from tvm_tailsplit.testing import to_tvm

    plan = tfft.plan(16, 3)
    x = random_complex((3, 16), "complex64", seed=9)
    floats = guarded_array((3, 16, 2), "float32")
    floats.array[...] = x.view(np.float32).reshape(3, 16, 2)
    result = plan(to_tvm(floats.array))
    spectrum = result.numpy().view(np.complex64)[..., 0]
    assert relative_error(spectrum, np.fft.fft(x.astype(np.complex128))) <= tolerance(16, "complex64")


def test_run_on_buffers_in_the_plans_layout_with_own_or_given_tables():
    import tvm

    plan = tfft.plan(48, 2)  # 8 x 6: twiddle tables
    assert plan.constants
    x = random_complex((2, 48), "complex64", seed=10)
    floats = np.ascontiguousarray(x.view(np.float32).reshape(plan.input_shape))
    out = guarded_array(plan.output_shape, "float32")
    plan.run(floats, out.array)  # numpy arrays, wrapped without a copy
    out.check_canaries()
    spectrum = out.array.view(np.complex64)[..., 0]
    assert relative_error(spectrum, np.fft.fft(x.astype(np.complex128))) <= tolerance(48, "complex64")
    # the plan's own tables given explicitly, as device tensors, reproduce the result; zeroed tables change it
    tables = [tvm.runtime.tensor(table, tvm.cpu(0)) for table in plan.constants]
    again = np.zeros(plan.output_shape, np.float32)
    plan.run(floats, again, tables)
    np.testing.assert_array_equal(again, out.array)
    zeroed = [tvm.runtime.tensor(np.zeros_like(table), tvm.cpu(0)) for table in plan.constants]
    plan.run(floats, again, zeroed)
    assert not np.array_equal(again, out.array)
    with pytest.raises(ValueError, match="constants must hold 1 tensors"):
        plan.run(floats, again, tables + tables)
