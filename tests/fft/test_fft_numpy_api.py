"""numpy.fft / scipy.fft functions on the generated operator (fft.numpy_api) and the scipy.fft backend, checked
against scipy.fft and numpy.fft: values, dtypes, axes, s, norms, out=, overwrite_x, workers, read-only inputs,
errors, fast lengths, dispatch."""

import multiprocessing
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import scipy.fft
import tvm

from tests.fft.fft_reference import random_complex, random_real, relative_error
from tvm_tailsplit import fft as tfft
from tvm_tailsplit.fft import numpy_api, spec

C2C = ("fft", "ifft")
REAL_IN = ("rfft", "ihfft")
COMPLEX_TO_REAL = ("irfft", "hfft")
ND = ("fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn")


def _input(name: str, shape, dtype) -> np.ndarray:
    real = name in REAL_IN or name in ("rfftn", "ihfftn", "rfft2", "ihfft2")
    if real or np.dtype(dtype).kind != "c":
        return (random_real(shape, "float64", seed=3) * 4).astype(dtype)
    return random_complex(shape, dtype, seed=3)


def _bound(dtype) -> float:
    return 3e-6 if np.dtype(dtype) in (np.float16, np.float32, np.complex64) else 1e-13


DTYPES = ("float16", "float32", "float64", "int32", "bool", "complex64", "complex128")


@pytest.mark.parametrize(("name", "dtype"), [(name, dtype) for name in C2C + REAL_IN + COMPLEX_TO_REAL
                                             for dtype in DTYPES if name not in REAL_IN or "complex" not in dtype])
def test_one_dimensional_matches_scipy_with_its_dtypes(name, dtype):
    x = _input(name, (3, 12), dtype)
    result, reference = getattr(tfft, name)(x), getattr(scipy.fft, name)(x)
    assert result.dtype == reference.dtype and result.shape == reference.shape
    assert relative_error(result, reference) <= _bound(dtype)


@pytest.mark.parametrize(("name", "dtype"), [
    (name, dtype) for name in C2C + REAL_IN + COMPLEX_TO_REAL + ("fftn", "rfftn", "irfftn")
    for dtype in (">f2", ">f4", ">c8", ">f8", ">c16") if "c" not in dtype or name not in REAL_IN + ("rfftn",)])
def test_byte_swapped_inputs_keep_scipy_s_precision(name, dtype):
    # a big-endian float32 (e.g. read from a FITS or network file) computed in complex128 (dtype compared by ==)
    native = np.dtype(dtype).newbyteorder("=")
    x = _input(name, (3, 12), dtype)
    result, reference = getattr(tfft, name)(x), getattr(scipy.fft, name)(x.astype(native))  # (scipy: not >f2)
    assert result.dtype == reference.dtype and result.shape == reference.shape
    assert relative_error(result, reference) <= _bound(native)


@pytest.mark.parametrize("name", C2C + REAL_IN + COMPLEX_TO_REAL)
@pytest.mark.parametrize(("n", "axis", "norm"), [(None, 0, "ortho"), (5, -2, "forward"), (16, 1, None)])
def test_one_dimensional_n_axis_norm(name, n, axis, norm):
    x = _input(name, (9, 4, 3), "float64" if name in REAL_IN else "complex128")
    result = getattr(tfft, name)(x, n=n, axis=axis, norm=norm)
    assert relative_error(result, getattr(np.fft, name)(x, n=n, axis=axis, norm=norm)) <= 1e-13


@pytest.mark.parametrize("name", ND)
@pytest.mark.parametrize(("shape", "s", "axes"), [
    ((6, 7, 5), None, None),                 # smooth and prime extents, every axis
    ((6, 7, 5), None, (2, 0)),               # permuted
    ((6, 7, 5), (4, 9), (-1, -3)),           # negative, cropped and padded
    ((6, 7, 5), (8, -1), None),              # the last len(s) axes; -1 keeps the length
    ((4, 11), None, (1,)),                   # one axis: the 1-D path
])
def test_n_dimensional_matches_scipy(name, shape, s, axes):
    x = _input(name, shape, "float64" if name in ("rfftn", "ihfftn") else "complex128")
    result = getattr(tfft, name)(x, s=s, axes=axes, norm="ortho")
    reference = getattr(scipy.fft, name)(x, s=s, axes=axes, norm="ortho")
    assert result.shape == reference.shape and result.dtype == reference.dtype
    assert relative_error(result, reference) <= 1e-13


@pytest.mark.parametrize("name", ["fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2"])
def test_two_dimensional_forms_on_float32(name):
    x = _input(name, (2, 6, 8), "float32" if name in ("rfft2", "ihfft2") else "complex64")
    result, reference = getattr(tfft, name)(x), getattr(scipy.fft, name)(x)
    assert result.dtype == reference.dtype
    assert relative_error(result, reference) <= 3e-6


def test_numpy_2_fftn_axes_permutation_matches_transposition():
    x = random_complex((6, 7, 5), "complex128", seed=4)
    for axes in [(0, 2, 1), (1, 0, 2), (2, 1, 0)]:
        assert relative_error(tfft.fftn(np.transpose(x, axes)), np.transpose(tfft.fftn(x, axes=axes), axes)) < 1e-14


def test_out_receives_the_result():
    x = random_complex((4, 12), "complex128", seed=5)
    out = np.empty((4, 12), np.complex128)
    assert tfft.fft(x, out=out) is out and relative_error(out, np.fft.fft(x)) <= 1e-14
    strided = np.empty((12, 8), np.complex128)[:, ::2]      # the transform axis strided: written directly
    assert tfft.fft(x.T, axis=0, out=strided) is strided and relative_error(strided, np.fft.fft(x.T, axis=0)) < 1e-14
    narrow = np.empty((4, 12), np.complex64)                 # numpy's same-kind casting
    assert tfft.fft(x, out=narrow) is narrow and relative_error(narrow, np.fft.fft(x)) <= 1e-6
    real_out = np.empty((4, 22))
    assert tfft.irfft(x, out=real_out) is real_out and relative_error(real_out, np.fft.irfft(x)) <= 1e-14
    out2 = np.empty((4, 12), np.complex128)
    assert tfft.fftn(x, out=out2) is out2 and relative_error(out2, np.fft.fftn(x)) <= 1e-14
    same = x.copy()
    assert relative_error(tfft.fft(same, out=same), np.fft.fft(x)) <= 1e-14   # out overlapping x: still right
    with pytest.raises(ValueError, match=r"out has shape \(4, 11\), the result has shape \(4, 12\)"):
        tfft.fft(x, out=np.empty((4, 11), np.complex128))
    with pytest.raises(TypeError, match="out has dtype float64"):
        tfft.fft(x, out=np.empty((4, 12)))


def test_overwrite_x_transforms_in_place():
    x = random_complex((3, 16), "complex128", seed=6)
    reference = np.fft.fft(x)
    kept = x.copy()
    tfft.fft(kept)
    np.testing.assert_array_equal(kept, x)                   # without overwrite_x the input is untouched
    result = tfft.fft(x, overwrite_x=True)
    assert np.shares_memory(result, x) and relative_error(result, reference) <= 1e-14
    y = random_complex((4, 6, 8), "complex128", seed=6)
    reference = np.fft.fftn(y)
    assert relative_error(tfft.fftn(y, overwrite_x=True), reference) <= 1e-14


@pytest.mark.parametrize("name", ["fft", "ifft", "fftn"])
@pytest.mark.parametrize("window", [16, 5])
def test_overwrite_x_and_out_with_rows_that_share_memory(name, window):
    # overlapping frames of a writable sliding window (an STFT's): the in-place plan of their steps was refused
    # with "ostride=1 and odist=3 make the outputs ... overlap", arguments the caller never gave
    signal = random_complex(100, "complex128", seed=8)
    frames = np.lib.stride_tricks.sliding_window_view(signal, window, writeable=True)[::3]
    reference = getattr(np.fft, name)(frames.copy(), axes=(1,)) if name == "fftn" else \
        getattr(np.fft, name)(frames.copy())
    axes = {"axes": (1,)} if name == "fftn" else {}
    assert relative_error(getattr(tfft, name)(frames, overwrite_x=True, **axes), reference) <= 1e-14
    out, expected = (np.lib.stride_tricks.sliding_window_view(np.zeros(100, complex), window, writeable=True)[::3]
                     for _ in range(2))
    np.copyto(expected, reference)   # what numpy's copy into such an out leaves (its rows overwrite each other)
    assert getattr(tfft, name)(frames.copy(), out=out, **axes) is out
    assert relative_error(out, expected) <= 1e-14


@pytest.mark.parametrize("call", [
    lambda x, r, m: m.rfft(r[:1], axis=0),                # an axis of one point with a negative stride
    lambda x, r, m: m.ihfft(r[:1], axis=0),
    lambda x, r, m: m.fft(x[:1], axis=0),
    lambda x, r, m: m.fft(x, n=1, axis=0),                # cropped to one point
    lambda x, r, m: m.fft(x[:1], axis=0, out=np.empty((1, 4), np.complex128)[::-1]),
], ids=["rfft", "ihfft", "fft", "fft-n1", "out"])
def test_transforms_of_one_point_along_a_negatively_strided_axis(call):
    # numpy's contiguity ignores the stride of an axis of length 1, so the contiguous copy made for a negative
    # stride kept it and the call failed with AttributeError ('NoneType' object has no attribute 'strides')
    x = np.flip(random_complex((5, 4), "complex128", seed=12), axis=0)
    r = np.flip(random_real((5, 4), "float64", seed=12), axis=0)
    assert relative_error(call(x, r, tfft), call(x, r, np.fft)) <= 1e-14


@pytest.mark.parametrize("name", ["fft", "irfft", "hfft"])
@pytest.mark.parametrize("axis", [0, 1])
def test_fields_of_structured_arrays(name, axis):
    # a field of records of 24 bytes steps 1.5 complex128 elements: taken for a distance of 1 between transforms,
    # it failed with "x has element strides (3, 16, 1), the plan expects (2, 16, 1)"
    records = np.zeros((5, 6), [("a", "f4"), ("x", "c16"), ("b", "f4")])
    records["x"] = random_complex((5, 6), "complex128", seed=13)
    result = getattr(tfft, name)(records["x"], axis=axis)
    assert relative_error(result, getattr(np.fft, name)(records["x"], axis=axis)) <= 1e-14
    out = np.zeros(result.shape, [("a", "f4"), ("y", result.dtype)])
    getattr(tfft, name)(records["x"], axis=axis, out=out["y"])
    np.testing.assert_array_equal(out["y"], result)


class _Container:
    """An array-like whose `__array__` hands over its own storage (as containers of arrays do)."""

    def __init__(self, data: np.ndarray) -> None:
        self.data = data

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        return self.data


@pytest.mark.parametrize("function", [tfft.fft, tfft.ifft, tfft.fftn, tfft.ifft2])
def test_an_array_likes_own_storage_is_not_overwritten(function):
    # its storage owns its memory, which was taken for a temporary of the call: transformed in place
    data = random_complex((4, 8), "complex128", seed=7).copy()
    assert data.flags.owndata
    kept = data.copy()
    result = function(_Container(data))
    np.testing.assert_array_equal(data, kept)
    assert relative_error(result, getattr(np.fft, function.__name__)(kept)) <= 1e-14
    # a temporary of the call (a crop of a cast copy, now also taken as ours) is transformed in place, correctly
    assert relative_error(tfft.fft(kept.astype(np.complex64), n=6), np.fft.fft(kept, n=6)) <= 1e-6


NUM_THREADS = tvm.get_global_func("runtime.NumThreads")


@pytest.fixture
def threads_of_calls(monkeypatch) -> list[int]:
    """The TVM pool's thread count during each 1-D plan call of the numpy functions, in call order."""
    seen: list[int] = []
    real_plan = numpy_api.make_plan

    def recording_plan(*args, **kwargs):
        compiled = real_plan(*args, **kwargs)
        return lambda *call_args: (seen.append(NUM_THREADS()), compiled(*call_args))[1]

    monkeypatch.setattr(numpy_api, "make_plan", recording_plan)
    return seen


def test_workers_sets_the_threads_of_the_call(threads_of_calls):
    num_threads, seen = NUM_THREADS, threads_of_calls
    x = random_complex((64, 64), "complex128", seed=7)
    tfft.fft(x)
    seen.clear()
    default = num_threads()
    reference = np.fft.fft(x)
    for workers, threads in [(1, 1), (2, min(2, default)), (-1, default), (None, default)]:
        assert relative_error(tfft.fft(x, workers=workers), reference) <= 1e-14
        assert seen.pop() == threads and num_threads() == default
    with pytest.raises(ValueError, match="workers must not be zero"):
        tfft.fft(x, workers=0)
    with pytest.raises(ValueError, match="workers value out of range"):
        tfft.ifft(x, workers=-os.cpu_count() - 1)
    assert tfft.fftn(x, workers=1).shape == x.shape


def test_read_only_inputs(tmp_path):
    x = random_real((4, 12), "float64", seed=8)
    buffer = np.frombuffer(x.tobytes(), np.float64).reshape(4, 12)
    path = tmp_path / "x.bin"
    x.tofile(path)
    mapped = np.memmap(path, np.float64, mode="r", shape=(4, 12))
    for array in (buffer, mapped):
        assert not array.flags.writeable
        assert relative_error(tfft.rfft(array), np.fft.rfft(x)) <= 1e-14
        assert relative_error(tfft.fft(array.astype(np.complex128)), np.fft.fft(x)) <= 1e-14
        assert relative_error(tfft.rfftn(array), np.fft.rfftn(x)) <= 1e-14
    spectrum = np.frombuffer(np.fft.fft(x).tobytes(), np.complex128).reshape(4, 12)
    assert relative_error(tfft.ifft(spectrum, overwrite_x=True), x) <= 1e-14   # read-only: not overwritten


@pytest.mark.parametrize("dtype", [np.longdouble, np.clongdouble])
def test_long_double_is_refused(dtype):
    if np.dtype(dtype).itemsize <= (8 if np.dtype(dtype).kind == "f" else 16):
        pytest.skip("long double is double on this platform")
    with pytest.raises(TypeError, match=f"x has dtype {np.dtype(dtype)} \\(long double\\)"):
        tfft.fft(np.ones(8, dtype))
    with pytest.raises(TypeError, match="long double"):
        tfft.fftn(np.ones((2, 8), dtype))


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda: tfft.fft(np.ones(3), 0), ValueError, "n must be at least 1"),
    (lambda: tfft.fft(np.ones(3), 2.0), TypeError, "n must be an integer"),
    (lambda: tfft.fft(np.ones((3, 3)), axis=2), np.exceptions.AxisError, "axis 2 is out of bounds"),
    (lambda: tfft.fft(np.array(1.0)), IndexError, "out of bounds for array of dimension 0"),
    (lambda: tfft.fft(np.ones(3, object)), TypeError, "x must be a numeric array, got dtype object"),
    (lambda: tfft.rfft(np.ones(3, complex)), TypeError, "x must be real, got complex128"),
    (lambda: tfft.fft(np.ones(3), norm="unitary"), ValueError, "norm must be one of"),
    (lambda: tfft.fft(np.ones(3), plan=object()), NotImplementedError, "plan= is reserved"),
    (lambda: tfft.fftn(np.ones((3, 3)), axes=(0, -2)), ValueError, r"all axes must be unique, got \(0, 0\)"),
    (lambda: tfft.fftn(np.ones((3, 3)), axes=(0, 3)), ValueError, "axis 3 is out of bounds"),
    (lambda: tfft.fftn(np.ones((3, 3)), s=(2, 2), axes=(0,)), ValueError, "s and axes must have the same length"),
    (lambda: tfft.fftn(np.ones((3, 3)), s=(2, 2, 2)), ValueError, "s has 3 entries, more than the 2 dimensions"),
    (lambda: tfft.fftn(np.ones((3, 3)), s=(3, 0)), ValueError, "s must hold positive lengths"),
    (lambda: tfft.rfftn(np.ones((3, 3)), axes=()), ValueError, "at least 1 axis must be transformed"),
    (lambda: tfft.irfftn(np.ones((3, 1))), ValueError, r"axis \(1\) has 1 input point\(s\).*give s"),
    (lambda: tfft.fftn(np.ones((3, 3)), axes="01"), TypeError, "axes must be an integer or a sequence"),
])
def test_errors_name_the_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_a_tvm_tensor_or_another_object_numpy_cannot_read_is_refused_by_its_type():
    # numpy wraps such an x in a 0-d object array: a float32 TVM tensor was refused as 'x must be a numeric array, got
    # dtype object', which named no TVM tensor (the plans, which take them, were not mentioned either)
    import tvm

    tensor = tvm.runtime.tensor(np.ones((2, 8), np.float32))
    for function in (tfft.fft, tfft.rfft, tfft.fftn, tfft.irfftn):
        with pytest.raises(TypeError, match=r"x must be an array or array-like of numbers, got a TVM tensor, which "
                                            r"numpy cannot read: pass x.numpy\(\), or call a tvm_tailsplit.fft.plan"):
            function(tensor)
    with pytest.raises(TypeError, match="x must be an array or array-like of numbers, got builtins.NoneType"):
        tfft.fft(None)
    assert tfft.fft(tensor.numpy()).shape == (2, 8)


@pytest.mark.parametrize("name", C2C + REAL_IN + COMPLEX_TO_REAL + ND + ("fft2", "rfft2"))
def test_numpy_s_positional_out_is_refused_not_left_unwritten(name):
    # numpy.fft.fft(x, n, axis, norm, out): here the 5th positional parameter is scipy's overwrite_x, and the array
    # was taken as a flag (rfft, irfft, hfft, ihfft, their n-D forms and c2c of a cast input: `out` silently left
    # unwritten) or failed with numpy's "truth value of an array is ambiguous"
    x = _input(name, (3, 8), "float64" if name in REAL_IN + ("rfftn", "ihfftn", "rfft2") else "complex128")
    out = np.zeros_like(getattr(scipy.fft, name)(x))
    with pytest.raises(TypeError, match="overwrite_x must be a bool, got a numpy array.*pass out= as a keyword"):
        getattr(tfft, name)(x, None, -1 if name in C2C + REAL_IN + COMPLEX_TO_REAL else None, None, out)
    with pytest.raises(TypeError, match="overwrite_x must be a bool"):
        getattr(tfft, name)(x.astype(np.int64 if name in REAL_IN + ("rfftn", "ihfftn", "rfft2") else np.complex64),
                            overwrite_x=out[:1, :1])


def test_integer_arguments_may_be_0_d_arrays_as_in_numpy():
    # numpy and scipy take n, axis and workers by __index__: a 0-d integer array was a TypeError ("n must be an
    # integer, got array(6)"), and as s or axes "iteration over a 0-d array", which named no argument
    x = random_complex((3, 4), "complex128", seed=6)
    zero, one = np.array(0), np.array(1)
    assert relative_error(tfft.fft(x, n=np.array(6), axis=zero), np.fft.fft(x, n=6, axis=0)) <= 1e-13
    assert relative_error(tfft.irfft(x, n=np.array(5), workers=one), np.fft.irfft(x, n=5)) <= 1e-13
    assert relative_error(tfft.fftn(x, s=(np.array(2), 5), axes=(one, zero)),
                          scipy.fft.fftn(x, s=(2, 5), axes=(1, 0))) <= 1e-13
    assert relative_error(tfft.fftn(x, s=np.array(3), axes=one), scipy.fft.fftn(x, s=3, axes=1)) <= 1e-13
    with pytest.raises(TypeError, match=r"axes must be an integer, got array\(1\.\)"):
        tfft.fftn(x, axes=np.array(1.0))
    with pytest.raises(TypeError, match="n must be an integer, got np.True_"):
        tfft.fft(x, n=np.True_)


def test_empty_axes_and_empty_batches_follow_scipy():
    x = np.ones((3, 4))
    result = tfft.fftn(x, axes=())
    assert result.dtype == scipy.fft.fftn(x, axes=()).dtype and np.array_equal(result, x)
    assert tfft.fft(np.ones((0, 4))).shape == (0, 4)
    assert tfft.rfftn(np.ones((0, 4, 6)), axes=(1, 2)).shape == (0, 4, 4)


@pytest.mark.parametrize("call", [
    lambda: tfft.fft(np.ones((3, 0))), lambda: tfft.ifft(np.ones(0)), lambda: tfft.rfft(np.ones((3, 0))),
    lambda: tfft.ihfft(np.ones(0)), lambda: tfft.irfft(np.ones((3, 0))), lambda: tfft.hfft(np.ones(0, complex)),
    lambda: tfft.fftn(np.ones((0, 4))), lambda: tfft.rfftn(np.ones((0, 4, 6))), lambda: tfft.irfftn(np.ones((2, 0, 4))),
    lambda: tfft.fft2(np.ones((3, 0)), s=(3, -1)), lambda: tfft.fftn(np.ones((2, 0, 4)), axes=(1,)),
    lambda: tfft.irfftn(np.ones((4, 0))), lambda: tfft.hfftn(np.ones(1)),
])
def test_transform_axes_of_no_points_are_refused_like_numpy(call):
    # numpy and scipy refuse them ("invalid number of data points (0)"); they were empty or a zero spectrum (rfft
    # of no points gave one 0 frequency), or numpy's "negative dimensions" error for irfft
    with pytest.raises(ValueError, match=r"invalid number of data points \((0|-2)\).*give (n|s)"):
        call()
    assert tfft.fft(np.ones((3, 0)), n=4).shape == (3, 4)        # an explicit length zero-pads, as numpy


def test_n_d_functions_of_one_axis_name_s():
    # they named n, the argument of the 1-D functions they run
    for call in (lambda: tfft.hfftn(np.ones(1)), lambda: tfft.irfftn(np.ones((2, 3, 1)), axes=(2,))):
        with pytest.raises(ValueError, match=r"invalid number of data points \(0\): the last transformed axis "
                                             r"\([02]\) has 1 input point\(s\).*; give s$"):
            call()


def _is_fast(m: int, real: bool) -> bool:
    if real and m > 1 and m % 2:
        return False
    for p in (2, 3, 5, 7):
        while m % p == 0:
            m //= p
    return m == 1


@pytest.mark.parametrize("real", [False, True])
def test_fast_lengths_are_the_nearest_7_smooth_lengths(real):
    fast = [m for m in range(1, 700) if _is_fast(m, real)]
    for target in range(1, 600):
        assert tfft.next_fast_len(target, real) == min(m for m in fast if m >= target)
        assert tfft.prev_fast_len(target, real=real) == max(m for m in fast if m <= target)
    big = 2**40 * 3 + 1
    result = tfft.next_fast_len(big)
    assert result >= big and _is_fast(result, False) and result < 2**40 * 3 * 1.05
    assert tfft.next_fast_len(np.int64(1000)) == 1000
    with pytest.raises(ValueError, match="target must be at least 1"):
        tfft.next_fast_len(0)


def test_helpers_are_numpy_s():
    x = np.arange(10).reshape(2, 5)
    np.testing.assert_array_equal(tfft.fftshift(x, axes=1), np.fft.fftshift(x, axes=1))
    np.testing.assert_array_equal(tfft.ifftshift(x), np.fft.ifftshift(x))
    np.testing.assert_array_equal(tfft.fftfreq(9, 0.5), scipy.fft.fftfreq(9, 0.5))
    np.testing.assert_array_equal(tfft.rfftfreq(10), scipy.fft.rfftfreq(10))


def test_scipy_backend_runs_the_generated_operator_and_falls_back(monkeypatch):
    calls = []
    real_plan, real_plan_nd = numpy_api.make_plan, numpy_api.plan_nd
    monkeypatch.setattr(numpy_api, "make_plan", lambda *a, **k: (calls.append("1-D"), real_plan(*a, **k))[1])
    monkeypatch.setattr(numpy_api, "plan_nd", lambda *a, **k: (calls.append("n-D"), real_plan_nd(*a, **k))[1])
    x = random_complex((4, 12), "complex64", seed=9)
    with scipy.fft.set_backend(tfft):
        result = scipy.fft.fft(x, 16, 0, "ortho", False, 1)
        assert calls == ["1-D"] and result.dtype == np.complex64
        assert relative_error(result, np.fft.fft(x, 16, 0, norm="ortho")) <= 3e-7
        assert relative_error(scipy.fft.irfft2(x, s=(4, 8)), np.fft.irfft2(x, s=(4, 8))) <= 3e-7
        assert calls == ["1-D", "n-D"]
        np.testing.assert_allclose(scipy.fft.dct(x.real), scipy.fft.dct(x.real, workers=1))   # scipy's dct
        assert scipy.fft.fft(np.ones(8, np.longdouble)).dtype == np.clongdouble               # scipy, exactly
        assert calls == ["1-D", "n-D"]
    with scipy.fft.set_backend(tfft, only=True), pytest.raises(scipy.fft._backend.ua.BackendNotImplementedError):
        scipy.fft.dct(x.real)


def test_scipy_backend_keeps_scipy_s_default_workers(threads_of_calls):
    num_threads, seen = NUM_THREADS, threads_of_calls
    x = random_complex((8, 12), "complex128", seed=10)
    with scipy.fft.set_backend(tfft):
        scipy.fft.fft(x)
        with scipy.fft.set_workers(2):
            scipy.fft.fft(x)
    assert seen == [1, min(2, num_threads())]


def test_forked_child_computes_serially():
    x = random_complex((16, 64), "complex128", seed=11)
    tfft.fft(x)  # the parent's TVM pool exists before the fork
    with multiprocessing.get_context("fork").Pool(1) as pool:
        result = pool.apply_async(tfft.fft, (x,)).get(timeout=120)
    assert relative_error(result, np.fft.fft(x)) <= 1e-14


@pytest.mark.parametrize("before", ["3", None])
def test_programs_a_forked_child_runs_keep_the_parents_thread_count(monkeypatch, before):
    # the child's TVM_NUM_THREADS=1 is for its own image (the pool threads are gone): a program it executes (here
    # through subprocess's preexec_fn, which runs the fork handler in the child before exec) starts a fresh pool
    # and gets the parent's value (or none) back when it imports tvm_tailsplit
    root = pathlib.Path(__file__).resolve().parents[2]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
    if before is None:
        monkeypatch.delenv("TVM_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("TVM_NUM_THREADS", before)
    code = ("import os; forked = os.environ['TVM_NUM_THREADS']; import tvm_tailsplit; "
            f"print(forked, os.environ.get('TVM_NUM_THREADS'), os.environ.get('{numpy_api.BEFORE_FORK}'))")
    # env=None: the child's own environment (as the fork handler left it) is the program's
    done = subprocess.run([sys.executable, "-c", code], preexec_fn=lambda: None, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", str(before), "None"]
    assert os.environ.get("TVM_NUM_THREADS") == before  # the parent's own value is untouched


@pytest.mark.parametrize("call, reference, transforms", [
    (lambda x: tfft.fft(x), lambda x: np.fft.fft(x), 50),
    (lambda x: tfft.fft(x, axis=0), lambda x: np.fft.fft(x, axis=0), 64),  # one strided transform reaches too far
    (lambda x: tfft.ifft(x, out=np.empty(x.shape, x.dtype)), lambda x: np.fft.ifft(x), 50),
    (lambda x: tfft.fft(x.copy(), overwrite_x=True), lambda x: np.fft.fft(x), 50),
    (lambda x: tfft.rfft(x.real), lambda x: np.fft.rfft(x.real), 50),
    (lambda x: tfft.irfft(x[:, :33], n=64), lambda x: np.fft.irfft(x[:, :33], n=64), 50),
], ids=["c2c", "axis0", "out", "in-place", "r2c", "c2r"])
def test_batches_beyond_32_bit_indices_run_in_parts(monkeypatch, call, reference, transforms):
    # the operator indexes its buffers with 32-bit integers (spec.MAX_BUFFER_FLOATS): a batch that reaches further
    # (arrays over 8 GiB) runs in calls of as many transforms as fit, here with a limit of 1000 floats; the plans
    # check the limit themselves (spec.layouts)
    monkeypatch.setattr(spec, "MAX_BUFFER_FLOATS", 1000)
    batches = []
    make_plan = numpy_api.make_plan

    def recording(n, batch, *args, **kwargs):
        batches.append(batch)
        return make_plan(n, batch, *args, **kwargs)

    monkeypatch.setattr(numpy_api, "make_plan", recording)
    x = random_complex((50, 64), "complex128", seed=3)
    assert relative_error(call(x), reference(x)) <= 1e-14
    assert len(batches) > 1 and sum(batches) == transforms
    with pytest.raises(ValueError, match="reaches 2000 floats"):  # one transform beyond the limit: no parts
        tfft.fft(np.ones(1000, np.complex64))
