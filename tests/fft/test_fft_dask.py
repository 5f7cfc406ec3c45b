"""FFTs of chunked dask arrays (`tvm_tailsplit.fft.dask_array`) on a local distributed cluster of two worker
processes: results against numpy for 1-D and 2-D, complex and real transforms, with chunks along and across
the transformed axes; the per-chunk kernel is the generated operator, planned in the workers."""

import subprocess
import sys

import numpy as np
import pytest

da = pytest.importorskip("dask.array", reason="dask[array] is not installed (pip install 'tvm-tailsplit[dask]')")
distributed = pytest.importorskip("distributed", reason="distributed is not installed (pip install distributed)")

from tvm_tailsplit.fft import dask_array as dfft  # noqa: E402
from tvm_tailsplit.fft import planner  # noqa: E402

SHAPE, CHUNKS = (24, 40), (7, 9)  # every axis split in uneven chunks, so every transform rechunks


@pytest.fixture(scope="module")
def client():
    """Two single-threaded worker processes (about 2 s to start, 2 s to close on 2 cores)."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  worker_dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        yield client


def relative_error(result, expected) -> float:
    return float(np.linalg.norm(result - expected) / np.linalg.norm(expected))


def random_array(dtype, shape=SHAPE, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def plan_cache_misses(client) -> int:
    """Plans compiled so far by the workers' processes (misses of their plan caches)."""
    return sum(client.run(lambda: planner._cached_plan.cache_info().misses).values())


@pytest.mark.parametrize(("name", "axis", "dtype"), [("fft", 0, "complex64"), ("ifft", -1, "complex64"),
                                                     ("fft", -1, "complex128"), ("ifft", 0, "complex128")])
def test_c2c_1d_matches_numpy_and_keeps_dtype(client, name, axis, dtype):
    x = random_array(dtype)
    y = getattr(dfft, name)(da.from_array(x, chunks=CHUNKS), axis=axis, norm="ortho")
    assert y.dtype == dtype
    other = 1 - axis % 2
    assert y.chunks[other] == da.from_array(x, chunks=CHUNKS).chunks[other]  # the other axis keeps its chunks
    result = y.compute()
    assert result.dtype == dtype
    assert relative_error(result, getattr(np.fft, name)(x, axis=axis, norm="ortho")) < 1e-5


@pytest.mark.parametrize("axis", [0, 1])
def test_real_1d_with_n_matches_numpy(client, axis):
    x = random_array("float32")
    spectrum = dfft.rfft(da.from_array(x, chunks=CHUNKS), n=30, axis=axis)
    assert spectrum.dtype == np.complex64 and spectrum.shape[axis] == 16
    assert relative_error(spectrum.compute(), np.fft.rfft(x, n=30, axis=axis)) < 1e-5
    back = dfft.irfft(spectrum, n=30, axis=axis)
    assert back.dtype == np.float32
    assert relative_error(back.compute(), np.fft.irfft(np.fft.rfft(x, n=30, axis=axis), n=30, axis=axis)) < 1e-5


def test_2d_c2c_and_real_match_numpy(client):
    x, real = random_array("complex64"), random_array("float32", seed=1)
    ours = [dfft.fft2(da.from_array(x, chunks=CHUNKS)), dfft.ifftn(da.from_array(x, chunks=CHUNKS), norm="forward"),
            dfft.rfft2(da.from_array(real, chunks=CHUNKS)),
            dfft.irfft2(da.from_array(np.fft.rfft2(real).astype(np.complex64), chunks=CHUNKS), s=SHAPE)]
    expected = [np.fft.fft2(x), np.fft.ifftn(x, norm="forward"), np.fft.rfft2(real), real]
    computed = client.compute(ours, sync=True)
    for y, result, reference in zip(ours, computed, expected, strict=True):
        assert result.dtype == y.dtype and y.dtype in (np.complex64, np.float32)
        assert result.shape == reference.shape
        assert relative_error(result, reference) < 1e-5


def test_hermitian_transforms_match_numpy(client):
    x, real = random_array("complex64"), random_array("float32")
    hermitian = dfft.hfft(da.from_array(x, chunks=CHUNKS), n=50, axis=0, norm="ortho")
    inverse = dfft.ihfft(da.from_array(real, chunks=CHUNKS))
    result, inverse_result = client.compute([hermitian, inverse], sync=True)
    assert relative_error(result, np.fft.hfft(x, n=50, axis=0, norm="ortho")) < 1e-5
    assert relative_error(inverse_result, np.fft.ihfft(real)) < 1e-5


def test_per_chunk_kernel_is_the_generated_operator_planned_in_the_workers(client):
    x = random_array("complex64", shape=(12, 33))  # a size no other test plans
    y = dfft.fft(da.from_array(x, chunks=(4, 33)))
    layers = list(y.dask.layers)
    assert any(name.startswith("tvm_tailsplit_fft-") for name in layers), layers
    assert not any(name.startswith("rechunk") for name in layers)  # one chunk along the axis already
    reference = da.fft.fft(da.from_array(x, chunks=(4, 33)))  # dask's own numpy-backed kernel
    assert not any(name.startswith("tvm_tailsplit") for name in reference.dask.layers)
    client_plans = planner._cached_plan.cache_info().misses
    worker_plans = plan_cache_misses(client)
    assert relative_error(y.compute(), np.fft.fft(x)) < 1e-5
    assert plan_cache_misses(client) > worker_plans  # the workers compiled plans of n=33
    assert planner._cached_plan.cache_info().misses == client_plans  # the client compiled nothing


def test_rechunk_keeps_chunks_within_dask_chunk_size():
    import dask

    x = da.zeros((64, 512), dtype=np.complex64, chunks=(4, 128))
    assert dfft.one_chunk_along(x, 1).chunks == ((4,) * 16, (512,))  # 16 KiB chunks: rows kept
    with dask.config.set({"array.chunk-size": "8KiB"}):
        rechunked = dfft.one_chunk_along(x, 1)
    assert rechunked.chunks[1] == (512,)
    assert max(rechunked.chunks[0]) * 512 * 8 <= 8 * 1024
    assert dfft.one_chunk_along(rechunked, 1) is rechunked


def test_unknown_chunk_sizes_along_other_axes_rechunk_only_the_transformed_axis():
    # rows selected by a mask have unknown (nan) chunk sizes; the transformed axis, of known chunks, is rechunked
    # alone (dask's "auto" rechunk of the other axes refused unknown sizes)
    x = random_array("complex128", seed=3)
    a = da.from_array(x, chunks=CHUNKS)
    rows = a[a[:, 0].real > -np.inf]
    assert np.isnan(rows.shape[0])
    assert relative_error(dfft.fft(rows).compute(scheduler="synchronous"), np.fft.fft(x)) < 1e-12
    assert relative_error(dfft.rfft(rows.real, n=50).compute(scheduler="synchronous"),
                          np.fft.rfft(x.real, n=50)) < 1e-12


def test_bad_arguments_are_refused_when_the_graph_is_built():
    x = da.from_array(random_array("complex64"), chunks=CHUNKS)
    with pytest.raises(ValueError, match="norm"):
        dfft.fft(x, norm="unitary")
    with pytest.raises(ValueError, match="axis 2 is out of bounds"):
        dfft.fft(x, axis=2)
    with pytest.raises(ValueError, match="n must be at least 1"):
        dfft.ifft(x, n=0)
    with pytest.raises(TypeError, match="a must be real"):  # a wrong type, as for the numpy-like rfft
        dfft.rfft(x)
    with pytest.raises(ValueError, match="axes must be unique"):
        dfft.fftn(x, axes=(0, 0))
    with pytest.raises(ValueError, match="s and axes"):
        dfft.fftn(x, s=(4,), axes=(0, 1))
    with pytest.raises(TypeError, match="axes must be an integer or a sequence"):
        dfft.fft2(x, axes="01")
    for real in (dfft.rfftn, dfft.irfftn, dfft.rfft2, dfft.irfft2):  # (an IndexError of a list index)
        with pytest.raises(ValueError, match="at least 1 axis must be transformed"):
            real(x.real if real in (dfft.rfftn, dfft.rfft2) else x, axes=())


@pytest.mark.parametrize("dtype", [object, "U3", "datetime64[s]", np.longdouble])
@pytest.mark.parametrize("name", ["fft", "hfft", "rfftn"])
def test_dtypes_the_kernel_refuses_are_refused_when_the_graph_is_built(name, dtype):
    # the graph was built with the dtype complex128 and the TypeError came from a worker at compute time (object:
    # dask's "Can not use auto rechunking with object dtype")
    if np.dtype(dtype).itemsize == 8 and dtype is np.longdouble:
        pytest.skip("long double is double on this platform")
    x = da.from_array(np.arange(6).reshape(2, 3).astype(dtype), chunks=1)
    with pytest.raises(TypeError, match=r"a must be a numeric array, got dtype|a has dtype float\d+ \(long double\)"):
        getattr(dfft, name)(x)


@pytest.mark.parametrize(("name", "shape", "kwargs"), [
    ("irfft", (3, 1), {}), ("hfft", (3, 1), {}), ("irfftn", (3, 1), {}), ("irfft2", (3, 1), {}),
    ("fft", (3, 0), {}), ("rfft", (3, 0), {}), ("fft2", (0, 3), {}),
])
def test_default_lengths_of_no_points_are_refused_when_the_graph_is_built(name, shape, kwargs):
    # the graph was built with an axis of 0 points and the error came from a worker at compute time
    dtype = "float64" if name == "rfft" else "complex128"
    with pytest.raises(ValueError, match=r"invalid number of data points \(0\)"):
        getattr(dfft, name)(da.from_array(np.ones(shape, dtype)), **kwargs)
    with pytest.raises(ValueError, match=r"Invalid number of FFT data points \(0\)"):  # as numpy
        getattr(np.fft, name)(np.ones(shape, dtype), **kwargs)


def test_package_imports_without_dask():
    code = ("import sys; sys.modules['dask'] = None\n"
            "import tvm_tailsplit.fft, tvm_tailsplit.fft.dask_array as d\n"
            "try:\n    d.fft([1.0, 2.0])\nexcept ImportError as e:\n    print(e)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "pip install 'tvm-tailsplit[dask]'" in run.stdout
